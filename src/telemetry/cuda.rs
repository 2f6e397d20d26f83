//! Whether this machine has NVIDIA GPUs, asked of the CUDA driver without creating a context
//! (cudarc's `CudaContext::new` panics when libcuda is absent, so presence is checked first).

use cudarc::driver::{result, sys};

/// Number of CUDA devices, or why there are none.
pub fn device_count() -> Result<usize, String> {
    // SAFETY: only asks the dynamic loader whether libcuda can be opened.
    if !unsafe { sys::is_culib_present() } {
        return Err("no NVIDIA driver (libcuda not found)".to_string());
    }
    result::init().map_err(|e| format!("CUDA driver failed to initialise: {e:?}"))?;
    let count = result::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e:?}"))?;
    Ok(count.max(0) as usize)
}
