//! The operator callbacks of `worker/csrc/operators.cpp`, exported for the Python levels (`golow_operators.py` loads
//! this library with ctypes): a global RecordFunction callback added for a profiled step and removed after it costs
//! microseconds per operator, where torch.profiler's start, stop and parsing cost a ResNet-50 step's compute three
//! times over. Every entry point returns null, or an error message the caller frees with `golow_py_free`.

#[cfg(golow_ops)]
mod exported {
    use std::ffi::c_char;

    unsafe extern "C" {
        fn golow_ops_begin() -> *mut c_char;
        fn golow_ops_end() -> *mut c_char;
        fn golow_ops_take(json: *mut *mut c_char) -> *mut c_char;
        fn golow_free_error(message: *mut c_char);
    }

    /// Starts recording the process's operators, with their input shapes.
    #[unsafe(no_mangle)]
    pub extern "C" fn golow_py_ops_begin() -> *mut c_char {
        // SAFETY: no arguments; the shim catches every C++ exception.
        unsafe { golow_ops_begin() }
    }

    /// Stops recording; what was recorded stays until taken.
    #[unsafe(no_mangle)]
    pub extern "C" fn golow_py_ops_end() -> *mut c_char {
        // SAFETY: as above.
        unsafe { golow_ops_end() }
    }

    /// Writes into `json` what was recorded since the last take, as JSON the caller frees with `golow_py_free`.
    ///
    /// # Safety
    /// `json` points at a writable pointer.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn golow_py_ops_take(json: *mut *mut c_char) -> *mut c_char {
        // SAFETY: the caller's pointer, passed on.
        unsafe { golow_ops_take(json) }
    }

    /// Frees a string this library returned.
    ///
    /// # Safety
    /// `text` came from this library and is freed once.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn golow_py_free(text: *mut c_char) {
        // SAFETY: malloc'd by the shim.
        unsafe { golow_free_error(text) }
    }
}
