//! The worker side of golow. What lives here is free of torch and shared with the monitor: the data
//! cache, the event emitter and the turn protocol. The tch workers themselves (`torch/`) are compiled
//! into the `golow-worker` binary only, so that `golow` never links libtorch.

pub mod data;
pub mod emit;
pub mod turns;

pub use emit::EVENT_FD_ENV;
