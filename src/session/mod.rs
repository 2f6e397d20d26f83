//! A session: prepare what every worker shares, launch the workers, run the hub until they end.

mod hub;
mod launcher;
mod lines;
mod prepare;
pub mod python;
mod schedule;

pub use hub::{Observer, run};
pub use prepare::{Length, Plan, PrepareError, Prepared, prepare};
