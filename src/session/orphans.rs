//! Descendants of a worker that leave its process group (`setsid`, a daemonising script) escape the group's kill.
//! golow is their subreaper: when their parent ends they become golow's children, and when the session ends
//! those of its children that carry the session's mark in their environment (every worker's descendant inherits
//! it) are killed and reaped, so that nothing a session started outlives it, and nothing else golow's process runs
//! is touched.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable that marks a session's workers and all they start.
pub const MARK_ENV: &str = "GOLOW_SESSION_MARK";

/// Makes orphaned descendants of this process its children rather than init's, and returns the mark that tells a
/// new session's processes apart.
pub fn adopt() -> String {
    static SESSIONS: AtomicU64 = AtomicU64::new(0);
    // SAFETY: plain prctl(2) with an integer argument.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
    format!(
        "{}-{}",
        std::process::id(),
        SESSIONS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Kills and reaps every child of this process that carries `mark`: once a session's workers have ended, they
/// are the descendants it adopted.
pub fn end_adopted(mark: &str) {
    let me = std::process::id();
    for pid in crate::telemetry::procfs::children(me) {
        let Ok(pid) = i32::try_from(pid) else {
            continue;
        };
        if !carries_mark(pid, mark) {
            continue;
        }
        // SAFETY: kill(2) and waitpid(2) on one child of ours; reaping it is what keeps it from lingering as a
        // zombie, and a specific pid never takes another child's status.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
}

/// Whether process `pid` was started with the session's `mark` in its environment.
pub fn carries_mark(pid: i32, mark: &str) -> bool {
    let marked = format!("{MARK_ENV}={mark}");
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|&b| b == 0)
            .any(|var| var == marked.as_bytes())
    })
}
