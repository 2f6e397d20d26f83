//! Where golow finds the other programs a session runs: `golow-worker` and the CUPTI collector library, both
//! installed next to the `golow` executable.

use std::path::PathBuf;

const WORKER_FILE: &str = "golow-worker";
const COLLECTOR_FILE: &str = "libgolow_cupti.so";

fn beside_golow(file: &str) -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the golow executable: {e}"))?;
    Ok(exe.with_file_name(file))
}

/// `golow-worker`, the Rust workers.
pub fn worker() -> Result<PathBuf, String> {
    let worker = beside_golow(WORKER_FILE)?;
    if !worker.is_file() {
        return Err(format!(
            "{} is missing: golow-worker must sit next to golow (run `make build`)",
            worker.display()
        ));
    }
    Ok(worker)
}

/// The collector library CUDA loads into every worker.
pub fn collector() -> Result<PathBuf, String> {
    let library = beside_golow(COLLECTOR_FILE)?;
    if library.is_file() {
        Ok(library)
    } else {
        Err(format!(
            "{} not found: build it with `cargo build --release` (or pass --no-cupti)",
            library.display()
        ))
    }
}
