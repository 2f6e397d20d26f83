//! Running a Python file inside a CPython 3.8–3.13 process golow did not start (`golow attach` loads its step hook
//! so). gdb attaches for some tens of milliseconds, maps a page in the main thread, writes a small bootstrap into
//! it and queues `Py_AddPendingCall(PyRun_SimpleString, page)`; then it detaches, and the main thread runs the
//! bootstrap at its next bytecode boundary, with the GIL, where CPython runs signal handlers. Every check that needs
//! no stop comes first, and gdb reads no symbols: the three addresses it calls are read here from the ELF files the
//! process maps. Why this recipe and not a direct call: docs/attach.md, "Loading the hook into a running process".

mod cpython;
mod permission;
mod process;
mod symbols;

use std::fmt;

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

/// The CPython in `pid`, from /proc/PID/exe and the libpython it maps (no ptrace): refused when `pid` is gone, is
/// no CPython (the line names its program), or runs a CPython golow does not attach to.
pub fn python_in(pid: u32) -> Result<PythonVersion, Refusal> {
    let target = process::Process::open(pid)?;
    let status = target.status()?;
    status.refuse_exited()?;
    let access = permission::check(&target, &status)?;
    cpython::Interpreter::find(&target, &access).map(|interpreter| interpreter.version)
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
