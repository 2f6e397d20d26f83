//! What people see. Headless for now: progress bars on stderr and the summary table on stdout.
//! Draws from the state only; never touches files or processes.

pub mod progress;
pub mod report;
