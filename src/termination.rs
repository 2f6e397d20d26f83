//! SIGINT, SIGTERM and SIGHUP sent from outside end golow as Ctrl-C does: `kill -INT`, `timeout`, SLURM's
//! cancellation, `docker stop` and a closed terminal must not cost the summary, the recording's end, an export's
//! temporary file or the terminal's state. While something catches them (a session's hub, which stops the workers as
//! it does for an interrupt; a full-screen view, which closes and restores the terminal; a sweep, which starts no
//! further cell; a file being written, which is finished or removed), the first is remembered and golow exits with
//! 128 + its number once everything is closed. With nothing catching (while a session is being prepared, say), a
//! signal ends golow at once, as its default would.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use crate::contracts::Bell;

/// The signals that end golow as an interrupt does.
pub const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Which of [`SIGNALS`] golow handles: one ignored when golow started (`nohup` ignores SIGHUP, a shell without job
/// control SIGINT in a background job) stays ignored.
static HANDLED: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];
static CATCHING: AtomicUsize = AtomicUsize::new(0);
static NEXT_BELL: AtomicU64 = AtomicU64::new(0);
/// Views to wake when a signal comes: each rings its own loop, which then sees [`received`].
static BELLS: Mutex<Vec<(u64, Bell)>> = Mutex::new(Vec::new());

/// Starts listening for [`SIGNALS`], once per process, on a thread of its own (a signal handler may do almost
/// nothing; the thread may do the rest). Done by the first [`catch`]: until something catches them the signals keep
/// their default, and the thread is started after `--monitor-cpu` has pinned golow, so that it is pinned too.
fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let mut handled = Vec::new();
        for (signal, flag) in SIGNALS.iter().zip(&HANDLED) {
            if !ignored(*signal) {
                flag.store(true, Ordering::SeqCst);
                handled.push(*signal);
            }
        }
        let Ok(mut signals) = signal_hook::iterator::Signals::new(handled) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("golow-signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    let _ =
                        RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
                    if CATCHING.load(Ordering::SeqCst) == 0 {
                        let _ = signal_hook::low_level::emulate_default_handler(signal);
                    }
                    if let Ok(bells) = BELLS.lock() {
                        bells.iter().for_each(|(_, bell)| bell.ring());
                    }
                }
            });
    });
}

/// Whether `signal` was set to be ignored when golow started, as `nohup` sets SIGHUP.
pub fn ignored(signal: i32) -> bool {
    // SAFETY: reads the current action into a zeroed struct; sets nothing.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut action) == 0
            && action.sa_sigaction == libc::SIG_IGN
    }
}

/// Whether golow handles `signal` (one of [`SIGNALS`]): false for one it found ignored, which it leaves so, and
/// before anything has caught them.
pub fn handles(signal: i32) -> bool {
    SIGNALS
        .iter()
        .zip(&HANDLED)
        .any(|(s, flag)| *s == signal && flag.load(Ordering::SeqCst))
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

/// While held, a terminating signal is golow's to handle rather than its end; the bell, if any, rings when one comes.
pub struct Catching {
    bell: Option<u64>,
}

pub fn catch(bell: Option<Bell>) -> Catching {
    install();
    CATCHING.fetch_add(1, Ordering::SeqCst);
    let bell = bell.and_then(|bell| {
        let id = NEXT_BELL.fetch_add(1, Ordering::Relaxed);
        let mut bells = BELLS.lock().ok()?;
        bells.push((id, bell));
        Some(id)
    });
    Catching { bell }
}

impl Drop for Catching {
    fn drop(&mut self) {
        if let (Some(id), Ok(mut bells)) = (self.bell, BELLS.lock()) {
            bells.retain(|(other, _)| *other != id);
        }
        CATCHING.fetch_sub(1, Ordering::SeqCst);
    }
}
