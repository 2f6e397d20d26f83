//! Device memory the cudnn backend owns: allocated once when a step is planned, freed when the network goes.

use cudarc::driver::{result, sys::CUdeviceptr};

/// One allocation on the current CUDA device.
pub struct DeviceMemory {
    ptr: CUdeviceptr,
    bytes: usize,
}

impl DeviceMemory {
    /// `bytes` of device memory, zeroed.
    pub fn zeroed(bytes: usize) -> Result<DeviceMemory, String> {
        // cuMemAlloc refuses zero bytes; a one-byte allocation keeps every buffer a valid pointer.
        let size = bytes.max(1);
        // SAFETY: a plain allocation on the current context, owned by the value returned.
        let ptr = unsafe { result::malloc_sync(size) }
            .map_err(|e| format!("cannot allocate {bytes} bytes on the GPU: {e:?}"))?;
        let memory = DeviceMemory { ptr, bytes };
        // SAFETY: `size` bytes at `ptr` were just allocated.
        unsafe { result::memset_d8_sync(ptr, 0, size) }
            .map_err(|e| format!("cuMemsetD8: {e:?}"))?;
        Ok(memory)
    }

    /// A copy of `values` on the device.
    pub fn from_host(values: &[f32]) -> Result<DeviceMemory, String> {
        let memory = DeviceMemory::zeroed(std::mem::size_of_val(values))?;
        // SAFETY: the allocation holds exactly `values`.
        unsafe { result::memcpy_htod_sync(memory.ptr, values) }
            .map_err(|e| format!("cuMemcpyHtoD: {e:?}"))?;
        Ok(memory)
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The address `elements` f32 values into the allocation.
    pub fn at(&self, elements: usize) -> CUdeviceptr {
        debug_assert!(4 * elements <= self.bytes);
        self.ptr + 4 * elements as u64
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// `count` f32 values from `offset` (in elements), after the work queued before has finished.
    pub fn read(&self, offset: usize, count: usize) -> Result<Vec<f32>, String> {
        assert!(
            4 * (offset + count) <= self.bytes,
            "read past the allocation"
        );
        let mut values = vec![0f32; count];
        // SAFETY: the range lies inside the allocation (checked above).
        unsafe { result::memcpy_dtoh_sync(&mut values, self.at(offset)) }
            .map_err(|e| format!("cuMemcpyDtoH: {e:?}"))?;
        Ok(values)
    }

    /// Overwrites the values from `offset` (in elements) with `values`, after the work queued before has finished.
    #[cfg(test)]
    pub fn write(&self, offset: usize, values: &[f32]) -> Result<(), String> {
        assert!(
            4 * offset + std::mem::size_of_val(values) <= self.bytes,
            "write past the allocation"
        );
        // SAFETY: the range lies inside the allocation (checked above).
        unsafe { result::memcpy_htod_sync(self.at(offset), values) }
            .map_err(|e| format!("cuMemcpyHtoD: {e:?}"))
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by `zeroed`, freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}
