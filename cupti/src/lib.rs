//! golow's CUPTI collector. CUDA loads this library into every process whose environment names it in
//! `CUDA_INJECTION64_PATH` and calls [`InitializeInjection`] when the process initialises CUDA, so Python, Rust and
//! any other command are measured by the same instrument. It records kernels and copies through CUPTI's activity
//! API, aggregates them per window (`aggregate`) and sends one `golow_protocol::collector::Message` per window to the
//! monitor on the socket named by `GOLOW_CUPTI_FD`. Without that variable it does nothing, and where CUPTI cannot run
//! it says why once and does nothing more.
//!
//! The monitor reads the same wire types from golow-protocol, so the two sides cannot disagree on the schema.

mod aggregate;
mod api;
mod collector;
mod pool;
mod records;
mod sampling;
mod timeline;

/// The collector's work per record and per window, for `benches/collector.rs`.
#[doc(hidden)]
pub mod bench {
    pub use crate::aggregate::Aggregator;
    pub use crate::api::Api;
    pub use crate::collector::MAX_KERNEL_NAMES;
    pub use crate::pool::{Filled, Pool};
    pub use crate::records::fold;
}

/// Called by the CUDA driver during `cuInit` in a process started with `CUDA_INJECTION64_PATH` pointing here.
/// Returns 1 (success) whatever happens: a measurement problem must never stop the process it measures.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> std::ffi::c_int {
    // A panic must not unwind into the driver.
    let _ = std::panic::catch_unwind(collector::start);
    1
}
