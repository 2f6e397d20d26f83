//! golow: what does each level of abstraction cost? See README.md and DESIGN.md for the architecture:
//! workers → events → session hub → state → UI, with `event.rs` as the one contract between parts.

pub mod cli;
pub mod config;
pub mod doctor;
pub mod event;
pub mod export;
pub mod files;
pub mod recording;
pub mod replay;
pub mod session;
pub mod state;
pub mod sweep;
pub mod telemetry;
pub mod ui;
pub mod workers;
