//! Descendants of a worker that leave its process group (`setsid`, a daemonising script) escape the group's kill.
//! golow is their subreaper: when their parent ends they become golow's children, and when the session ends
//! those of its children that carry the session's mark in their environment (every worker's descendant inherits
//! it) are killed and reaped, so that nothing a session started outlives it, and nothing else golow's process runs
//! is touched.

use std::sync::atomic::{AtomicU64, Ordering};

use rustix::process::{
    Pid, Signal, WaitOptions, getpid, kill_process, set_child_subreaper, waitpid,
};

/// The variable that marks a session's workers and all they start.
pub const MARK_ENV: &str = "GOLOW_SESSION_MARK";

/// Makes orphaned descendants of this process its children rather than init's, and returns the mark that tells a
/// new session's processes apart.
pub fn adopt() -> String {
    static SESSIONS: AtomicU64 = AtomicU64::new(0);
    // rustix passes the attribute's flag as a pid: any one sets it.
    let _ = set_child_subreaper(Some(getpid()));
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
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        // Reaping it is what keeps it from lingering as a zombie; a specific pid never takes another child's status.
        if let Some(child) = Pid::from_raw(raw)
            && carries_mark(raw, mark)
        {
            let _ = kill_process(child, Signal::KILL);
            let _ = waitpid(Some(child), WaitOptions::empty());
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
