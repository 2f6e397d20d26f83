//! Samplers that run in the monitor, each on its own thread, never on the UI's.

pub mod cuda;
pub mod cupti;
pub mod gpu;
pub mod load;
pub mod machine;
pub mod procfs;
