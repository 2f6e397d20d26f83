//! golow's CUPTI collector. CUDA loads this library into every process whose environment names it in
//! `CUDA_INJECTION64_PATH` and calls [`InitializeInjection`] when the process initialises CUDA, so Python, Rust and
//! any other command are measured by the same instrument. It records kernels and copies through CUPTI's activity
//! API, aggregates them per window ([`aggregate`]) and sends one [`window::Message`] per window to the monitor on the
//! socket named by `GOLOW_CUPTI_FD`. Without that variable it does nothing, and where CUPTI cannot run it says why
//! once and does nothing more.
//!
//! The monitor links the same crate for the wire types, so the two sides cannot disagree on the schema.

pub mod aggregate;
mod api;
mod collector;
mod records;
pub mod window;

/// The descriptor (a `SOCK_SEQPACKET` socket, one message per window) the collector writes to.
pub const FD_ENV: &str = "GOLOW_CUPTI_FD";
/// Window length in milliseconds (default 1000).
pub const WINDOW_ENV: &str = "GOLOW_CUPTI_WINDOW_MS";
/// A libcupti to load instead of searching for one.
pub const LIBRARY_ENV: &str = "GOLOW_CUPTI_LIB";
/// The largest message the collector sends; the monitor reads messages into a buffer this large.
pub const MAX_MESSAGE_BYTES: usize = 192 * 1024;

/// Called by the CUDA driver during `cuInit` in a process started with `CUDA_INJECTION64_PATH` pointing here.
/// Returns 1 (success) whatever happens: a measurement problem must never stop the process it measures.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> std::ffi::c_int {
    // A panic must not unwind into the driver.
    let _ = std::panic::catch_unwind(collector::start);
    1
}
