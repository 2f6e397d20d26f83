//! SIGINT, SIGTERM and SIGHUP sent from outside end golow as Ctrl-C does: `kill -INT`, `timeout`, SLURM's
//! cancellation, `docker stop` and a closed terminal must not cost the summary, the recording's end, an export's
//! temporary file or the terminal's state. While something catches them (a session's hub, which stops the workers as
//! it does for an interrupt; a full-screen view, which closes and restores the terminal; a sweep, which starts no
//! further cell; a file being written, which is finished or removed), the first is remembered and golow exits with
//! 128 + its number once everything is closed. With nothing catching (while a session is being prepared, say), a
//! signal ends golow at once, as its default would.

use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The signals that end golow as an interrupt does.
pub const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

static RECEIVED: AtomicI32 = AtomicI32::new(0);
static CATCHING: AtomicUsize = AtomicUsize::new(0);
static NEXT_CATCHER: AtomicU64 = AtomicU64::new(0);
/// Who to tell when a signal comes: a view notifies its own loop, which then sees [`received`]; a session's hub hears
/// which signal it was.
static CATCHERS: Mutex<Vec<(u64, Tell)>> = Mutex::new(Vec::new());

type Tell = Arc<dyn Fn(i32) + Send + Sync>;

/// Listens for [`SIGNALS`] on golow's signal listener (`signals`), once per process. Done by the first [`catch`]:
/// until something catches them the signals keep their default, and the listener is started after `--monitor-cpu`
/// has pinned golow, so that it is pinned too.
fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // One ignored when golow started (`nohup` ignores SIGHUP, a shell without job control SIGINT in a
        // background job) stays ignored.
        for signal in SIGNALS {
            crate::signals::listen(signal, on_signal);
        }
    });
}

/// One of [`SIGNALS`], on the listener thread: remembered if first, golow's end if nothing catches it, else told to
/// whoever catches.
fn on_signal(signal: i32) {
    let _ = RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    if CATCHING.load(Ordering::SeqCst) == 0 {
        let _ = signal_hook::low_level::emulate_default_handler(signal);
    }
    let catchers: Vec<Tell> = CATCHERS
        .lock()
        .map(|catchers| catchers.iter().map(|(_, tell)| tell.clone()).collect())
        .unwrap_or_default();
    catchers.iter().for_each(|tell| tell(signal));
}

/// The first terminating signal received, if any.
pub fn received() -> Option<i32> {
    Some(RECEIVED.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// How people name one of [`SIGNALS`].
pub fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// The exit code of a golow a terminating signal ended: 128 + the signal, as a shell reports it.
pub fn exit_code() -> Option<i32> {
    received().map(|signal| 128 + signal)
}

/// While held, a terminating signal is golow's to handle rather than its end.
pub struct Catching {
    catcher: Option<u64>,
}

/// Catches [`SIGNALS`] while the result is held, with nobody to tell: what holds it checks [`received`] itself.
pub fn catch() -> Catching {
    install();
    CATCHING.fetch_add(1, Ordering::SeqCst);
    Catching { catcher: None }
}

/// Catches [`SIGNALS`] while the result is held, calling `tell` with each one that comes, on the listener thread.
pub fn catch_telling(tell: impl Fn(i32) + Send + Sync + 'static) -> Catching {
    let mut catching = catch();
    let id = NEXT_CATCHER.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut catchers) = CATCHERS.lock() {
        catchers.push((id, Arc::new(tell)));
        catching.catcher = Some(id);
    }
    catching
}

impl Drop for Catching {
    fn drop(&mut self) {
        if let (Some(id), Ok(mut catchers)) = (self.catcher, CATCHERS.lock()) {
            catchers.retain(|(other, _)| *other != id);
        }
        CATCHING.fetch_sub(1, Ordering::SeqCst);
    }
}
