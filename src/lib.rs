//! golow: what does each level of abstraction cost? The monitor process: its parts and how they meet are in
//! ARCHITECTURE.md; what travels between processes is the golow-protocol crate.

pub mod channels;
pub mod cli;
pub mod compare;
pub mod console;
pub mod export;
pub mod inject;
pub mod metrics;
pub mod output_files;
pub mod recording;
pub mod session;
pub mod signals;
pub mod state;
pub mod store;
pub mod suspension;
pub mod sweep;
pub mod telemetry;
pub mod termination;
pub mod ui;
