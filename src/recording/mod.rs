//! Recordings: every session written as it happens to a crash-safe file, and read back as an event
//! source for replay, export and comparison. The recorder never interprets events; readers fold them
//! with the same `State::apply` as a live session.

mod checkpoints;
pub mod format;
mod header;
mod player;
mod reader;
mod writer;

pub use header::{default_path, utc};
pub use player::{Damage, Player, PlayerRequest, SecondSession, serve};
pub use reader::{OpenError, Recording};
pub use writer::{FLUSH_EVERY, Recorder, Sink, Written};

#[cfg(test)]
mod tests;
