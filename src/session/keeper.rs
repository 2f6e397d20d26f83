//! What makes `kill -9` of golow harmless: a small process of its own (golow itself, started as `golow __keep`)
//! that waits on a pipe only golow holds. When the pipe closes — golow ended, however it ended — the keeper kills
//! every process that carries the session's mark in its environment (the workers and all they started, wherever
//! they went) and removes the session's directory. A normal end has done both already; the keeper then finds
//! nothing to do.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use super::orphans::{MARK_ENV, carries_mark};

/// The hidden subcommand that runs the keeper.
pub const SUBCOMMAND: &str = "__keep";

/// The golow executable that can run the keeper; set by golow's `main`, so that a session run from anything else
/// (a test binary) never starts itself as one.
static PROGRAM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Lets sessions keep their processes with `program` (golow's own executable).
pub fn enable(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// The running keeper of one session; dropping it ends its watch.
pub struct Keeper {
    child: Child,
    watch: Option<ChildStdin>,
}

impl Keeper {
    /// Starts the keeper of the session marked `mark`, whose directory is `dir`; `None` unless golow's `main`
    /// enabled keepers.
    pub fn start(mark: &str, dir: &Path) -> Option<std::io::Result<Keeper>> {
        let mut command = Command::new(PROGRAM.get()?);
        command
            .arg(SUBCOMMAND)
            .arg(mark)
            .arg(dir)
            .env_remove(MARK_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: an interrupt at the terminal is golow's to handle, not the keeper's.
            .process_group(0);
        Some(command.spawn().map(|mut child| {
            let watch = child.stdin.take();
            Keeper { child, watch }
        }))
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        drop(self.watch.take());
        let _ = self.child.wait();
    }
}

/// The keeper's whole life: wait for the pipe to close, then end what carries the mark and remove the directory.
pub fn keep(mark: &str, dir: &Path) -> i32 {
    // The keeper must outlive a hang-up or interrupt that ends golow.
    crate::signals::ignore(&crate::termination::SIGNALS);
    let mut sink = [0u8; 64];
    while std::io::stdin().read(&mut sink).is_ok_and(|n| n > 0) {}
    end_marked(mark);
    let _ = std::fs::remove_dir_all(dir);
    0
}

/// Kills every process that carries `mark`, again until none is left (one may start another as it is killed).
pub fn end_marked(mark: &str) {
    for _ in 0..10 {
        let marked = marked_processes(mark);
        if marked.is_empty() {
            return;
        }
        for pid in marked {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Live processes (not zombies) whose environment carries `MARK_ENV=mark`.
fn marked_processes(mark: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| !is_zombie(pid) && carries_mark(pid, mark))
        .collect()
}

/// A zombie has ended and keeps its environment no longer, but its /proc entry lingers until it is reaped.
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// The keeper's arguments, as `golow __keep MARK DIR` gives them.
pub fn args(rest: &[String]) -> Option<(String, PathBuf)> {
    match rest {
        [mark, dir] => Some((mark.clone(), PathBuf::from(dir))),
        _ => None,
    }
}
