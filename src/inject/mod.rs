//! Running a Python file inside a CPython 3.8–3.13 process golow did not start (`golow attach` loads its step hook
//! so). gdb attaches for some tens of milliseconds, maps a page in the main thread, writes a small bootstrap into
//! it and queues `Py_AddPendingCall(PyRun_SimpleString, page)`; then it detaches, and the main thread runs the
//! bootstrap at its next bytecode boundary, with the GIL, where CPython runs signal handlers. Every check that needs
//! no stop comes first, and gdb reads no symbols: the three addresses it calls are read here from the ELF files the
//! process maps. Why this recipe and not a direct call: docs/attach.md, "Loading the hook into a running process".

mod bootstrap;
mod cpython;
mod gdb;
mod permission;
mod process;
mod symbols;

use std::fmt;
use std::path::Path;
use std::time::Duration;

pub use bootstrap::python_literal;
pub use permission::attach_permission_here;
pub use process::main_thread_waits_in;

/// Why golow cannot run code in a process: one line, saying what is wrong and what fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// A CPython process's interpreter version, read without stopping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PythonVersion {
    pub major: u8,
    pub minor: u8,
}

impl fmt::Display for PythonVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What scheduling a file cost the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    /// How long the target was stopped: from gdb's attach to its detach, as its markers arrived.
    pub stopped: Duration,
    /// gdb's whole run, from its start to its exit.
    pub gdb: Duration,
    /// The main thread was blocked in futex and its wait was interrupted (EINTR), so the file runs now.
    pub nudged: bool,
}

/// The CPython in `pid`, from /proc/PID/exe and the libpython it maps (no ptrace): refused when `pid` is gone, is
/// no CPython (the line names its program), or runs a CPython golow does not attach to.
pub fn python_in(pid: u32) -> Result<PythonVersion, Refusal> {
    let target = process::Process::open(pid)?;
    let status = target.status()?;
    status.refuse_exited()?;
    let access = permission::check(&target, &status)?;
    cpython::Interpreter::find(&target, &access).map(|interpreter| interpreter.version)
}

/// Schedules `file` (a Python source file, a path as the target sees it) to run in `pid`'s main thread at its next
/// bytecode boundary, with the GIL, in a namespace of its own (`__name__` = "__golow_attach__"), every exception
/// swallowed, and only if the process that runs it is still `pid` (a fork between queueing and running must not run
/// it in the child). Every check comes first, and the first that fails is returned, the target untouched. On success
/// the target runs on, gdb gone. Blocks while gdb runs: at most `timeout`, then gdb is interrupted and given a few
/// seconds' grace to end.
pub fn schedule_file(pid: u32, file: &Path, timeout: Duration) -> Result<Scheduled, Refusal> {
    let target = process::Process::open(pid)?;
    let status = target.status()?;
    status.refuse_exited()?;
    status.refuse_stopped()?;
    status.refuse_traced()?;
    if pid == std::process::id() {
        return Err(Refusal(format!(
            "process {pid} is golow itself; name the Python process to attach to"
        )));
    }
    let access = permission::check(&target, &status)?;
    process::refuse_remote_debug_disabled(&target)?;
    let gdb = gdb::find(std::env::var_os("PATH").as_deref())?;
    let interpreter = cpython::Interpreter::find(&target, &access)?;
    let api = interpreter.c_api(&target)?;
    bootstrap::check_file(&target, file)?;
    let boot = bootstrap::text(file, status.pid_inside())?;
    // The descriptor names the process checked: if it ended since, its pid may be another's now.
    target.refuse_gone()?;
    gdb::schedule(&gdb, pid, &api, &boot, timeout).map_err(|failure| match failure {
        gdb::Failure::Gone => Refusal(format!("process {pid} is gone")),
        gdb::Failure::TracedBy(tracer) => process::traced_by(pid, tracer),
        gdb::Failure::NotPermitted => permission::not_permitted(&target, &status),
        gdb::Failure::Other(line) => Refusal(line),
    })
}

/// `text` from outside (a program's name, gdb's words) as part of a one-line message: cut to `most` characters,
/// its line breaks and other control characters shown as escapes.
fn one_line(text: &str, most: usize) -> String {
    let mut cut: String = text.chars().take(most).collect();
    if text.chars().nth(most).is_some() {
        cut.push('…');
    }
    golow_protocol::text::printable(&cut.replace('\n', "\\n")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn text_from_outside_becomes_one_bounded_line() {
        assert_eq!(one_line("python3.11", 80), "python3.11");
        assert_eq!(one_line("a\nb\u{1b}[2J", 80), "a\\nb\\u{1b}[2J");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}
