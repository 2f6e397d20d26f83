//! A session: prepare what every worker shares, launch the workers, run the hub until they end.

mod hub;
mod launcher;
mod lines;
mod prepare;
pub mod python;
mod schedule;

pub use hub::{Control, Observer, run, run_blocking};
pub use prepare::{Length, Plan, PrepareError, Prepared, prepare};

/// The last non-empty line a finished command printed on stderr: what explains its failure in one line.
pub fn last_stderr_line(output: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    last.unwrap_or("no output").trim().to_string()
}
