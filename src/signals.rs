//! The one way golow catches signals: a single listener thread, started by the first module that listens, hands each
//! signal to the handler that module gave for it (a signal handler proper may do almost nothing; the thread may do the
//! rest). `termination` listens for SIGINT, SIGTERM and SIGHUP, `suspension` for SIGTSTP and SIGCONT; the keeper
//! process ignores the terminating ones. Nothing else in golow sets a signal's action. A signal ignored when golow
//! started (`nohup`'s SIGHUP, a background job's SIGINT) stays ignored.
//!
//! Signal actions stay on `libc`: rustix, through which golow's other system calls go, does not cover them.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// What a module does with a signal it listens for, on the listener thread.
pub type Handler = fn(i32);

static HANDLERS: Mutex<Vec<(i32, Handler)>> = Mutex::new(Vec::new());

/// Listens for `signal` from now on, handing it to `handler` on the listener thread. False where golow does not
/// handle it: it was ignored when golow started, or it could not be listened for (then it keeps its default).
pub fn listen(signal: i32, handler: Handler) -> bool {
    if ignored(signal) {
        return false;
    }
    let Some(listener) = listener() else {
        return false;
    };
    if let Ok(mut handlers) = HANDLERS.lock() {
        handlers.retain(|(other, _)| *other != signal);
        handlers.push((signal, handler));
    }
    listener.add_signal(signal).is_ok()
}

/// The listener thread's handle, the thread started on the first call; `None` where it could not start.
fn listener() -> Option<&'static signal_hook::iterator::Handle> {
    static LISTENER: OnceLock<Option<signal_hook::iterator::Handle>> = OnceLock::new();
    LISTENER
        .get_or_init(|| {
            let mut signals = signal_hook::iterator::Signals::new::<[i32; 0], i32>([]).ok()?;
            let handle = signals.handle();
            std::thread::Builder::new()
                .name("golow-signals".into())
                .spawn(move || {
                    for signal in signals.forever() {
                        let handler = HANDLERS.lock().ok().and_then(|handlers| {
                            handlers.iter().find(|(s, _)| *s == signal).map(|(_, h)| *h)
                        });
                        if let Some(handler) = handler {
                            handler(signal);
                        }
                    }
                })
                .ok()?;
            Some(handle)
        })
        .as_ref()
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

/// Ignores each of `signals` from now on (a process that must outlive what ends golow).
pub fn ignore(signals: &[i32]) {
    for &signal in signals {
        // SAFETY: signal(2) with SIG_IGN.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
}

/// Does to golow's process group what `signal`'s default action would (SIGTSTP: stops the job), then puts golow's
/// handler back once the signal is no longer pending, and returns (for SIGTSTP, once golow is continued).
pub fn raise_with_default_action(signal: i32) {
    // SAFETY: swaps the signal's action for the default and back, with structs sigaction fills or that it filled;
    // the handler put back is the listener's own, as it was.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        let mut handler: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, &default, &mut handler) != 0 {
            return;
        }
        if let Some(signal) = rustix::process::Signal::from_named_raw(signal) {
            let _ = rustix::process::kill_current_process_group(signal);
        }
        // Whichever of golow's threads takes the signal, it takes it under the default action, which acts on them
        // all: the handler goes back only once the signal is no longer pending.
        while pending(signal) {
            std::thread::sleep(Duration::from_millis(1));
        }
        libc::sigaction(signal, &handler, std::ptr::null_mut());
    }
}

/// Whether `signal` is pending for golow (the calling thread or the whole process).
fn pending(signal: i32) -> bool {
    // SAFETY: sigpending fills the zeroed set it is given; sigismember reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut set) == 0 && libc::sigismember(&set, signal) == 1
    }
}

#[cfg(test)]
mod tests {
    /// The house keeps one way to catch signals: no other source of the monitor listens for one or sets an action.
    #[test]
    fn no_other_module_catches_a_signal() {
        let setting = [
            "signal_hook::iterator",
            "signal_hook::flag",
            "signal_hook::low_level::register",
            "tokio::signal",
            "libc::signal(",
            "libc::sigaction(",
        ];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        let mut dirs = vec![src.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path != src.join("signals.rs")
                {
                    let text = std::fs::read_to_string(&path).unwrap();
                    found.extend(
                        setting
                            .iter()
                            .filter(|call| text.contains(*call))
                            .map(|call| format!("{}: {call}", path.display())),
                    );
                }
            }
        }
        assert!(found.is_empty(), "{found:#?}");
    }
}
