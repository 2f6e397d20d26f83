//! Job control under a full-screen view. In raw mode the terminal sends Ctrl-Z to golow as a key instead of
//! stopping it, and a SIGTSTP from outside would stop golow with the terminal still raw, in the alternate screen and
//! tracking the mouse, under the shell's prompt. So while a view is open, either one has the view give the terminal
//! back and then stop golow's job (its process group) as the terminal would have; SIGCONT (`fg`, or a `kill -CONT`
//! after any stop) has it take the terminal again and draw itself whole.
//!
//! Only golow's own process group stops: every worker and the session's keeper lead groups of their own, so they
//! carry on (until they wait for golow: a built-in worker's next turn, or a pipe or socket to golow that has
//! filled). Until a view first opens (headless runs never open one), SIGTSTP keeps its default; once one has, golow
//! stops on it as the default would whenever no view is open. One ignored when golow started (no job control to
//! return to) stays ignored, and Ctrl-Z then does nothing.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::channels::Notifier;

/// A SIGTSTP the open view has yet to act on.
static ASKED: AtomicBool = AtomicBool::new(false);
/// SIGCONTs received, for a view to see that it was continued.
static CONTINUED: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicBool = AtomicBool::new(false);
/// The open view's notifier.
static VIEW: Mutex<Option<Notifier>> = Mutex::new(None);

/// Listens for SIGTSTP and SIGCONT on golow's signal listener (`signals`), once per process.
fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        if crate::signals::listen(libc::SIGTSTP, on_signal) {
            HANDLED.store(true, Ordering::SeqCst);
            crate::signals::listen(libc::SIGCONT, on_signal);
        }
    });
}

/// SIGTSTP or SIGCONT, on the listener thread.
fn on_signal(signal: i32) {
    let view = VIEW.lock().ok().and_then(|view| view.clone());
    match (signal, view) {
        (libc::SIGTSTP, None) => stop_job(),
        (libc::SIGTSTP, Some(notifier)) => {
            ASKED.store(true, Ordering::SeqCst);
            notifier.notify();
        }
        (_, view) => {
            CONTINUED.fetch_add(1, Ordering::SeqCst);
            view.iter().for_each(Notifier::notify);
        }
    }
}

/// While held, SIGTSTP and SIGCONT are the view's to act on; it is notified when one comes.
pub struct Watching {
    previous: Option<Notifier>,
}

pub fn watch(notifier: Notifier) -> Watching {
    install();
    let previous = VIEW.lock().ok().and_then(|mut view| view.replace(notifier));
    Watching { previous }
}

impl Drop for Watching {
    fn drop(&mut self) {
        if let Ok(mut view) = VIEW.lock() {
            *view = self.previous.take();
        }
    }
}

/// Whether golow can be suspended: false where SIGTSTP was ignored when it started.
pub fn possible() -> bool {
    HANDLED.load(Ordering::SeqCst)
}

/// Whether a SIGTSTP came for the open view since it last asked.
pub fn asked() -> bool {
    ASKED.swap(false, Ordering::SeqCst)
}

/// How many times golow was continued: a view that sees it move takes the terminal again.
pub fn continued() -> u64 {
    CONTINUED.load(Ordering::SeqCst)
}

/// Stops golow's job as SIGTSTP's default would (the shell then has the terminal), and returns once it is continued.
/// Where nothing could continue it (no job control: SIGTSTP was ignored, or golow's process group is orphaned, which
/// the kernel does not stop), it returns at once.
pub fn stop_job() {
    if !possible() {
        return;
    }
    crate::signals::raise_with_default_action(libc::SIGTSTP);
}
