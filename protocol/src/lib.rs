//! What golow's processes say to each other, in one place so that no two of them can disagree:
//!
//! - [`admit`]: what the monitor admits of a worker's stream: numbers checked, names cut, a connection's hello
//!   its own process's.
//! - [`event`]: the event schema. Workers write `WorkerEvent`s; the monitor stamps everything into `Record`s, which
//!   are what recordings hold and what the state folds. A recorded or worker's line of the kinds they are mostly made
//!   of is scanned straight from its bytes (`record_scan`), and serde reads the rest.
//! - [`config`]: the session's configuration and each worker's (the `config.json` a worker is started with).
//! - [`collector`]: the CUPTI collector's windows of kernels and copies, and where it finds its socket.
//! - [`script`]: what golow's Python hook says about a user's own script, on a socket every process of it can reach.
//! - [`schema`]: the JSON Schemas of what workers and the hook write, checked in for the Python side's tests.
//! - [`channels`]: the descriptors a worker inherits and the turn grants it reads on one of them.
//! - [`text`]: what is said that came from outside, made safe for a terminal.
//! - [`nonfinite`]: how a measured number that is NaN or infinite (a diverging run's loss) is written.

pub mod admit;
pub mod channels;
pub mod collector;
pub mod config;
pub mod event;
pub mod nonfinite;
mod record_scan;
#[cfg(any(test, feature = "samples"))]
pub mod samples;
pub mod schema;
pub mod script;
pub mod text;
