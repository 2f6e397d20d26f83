//! The Rust side of the C++ shims (`csrc/`): their errors become panics with libtorch's message, as tch's own
//! calls do (the worker reports them), and the tensors they return become owned tch tensors.

use std::ffi::{CStr, c_char};

use tch::Tensor;
use torch_sys::C_tensor;

unsafe extern "C" {
    fn golow_free_error(message: *mut c_char);
}

/// libtorch's message when `error` is not null.
pub fn result(error: *mut c_char) -> Result<(), String> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: a NUL-terminated string from the shim, freed once here.
    Err(unsafe {
        let message = CStr::from_ptr(error).to_string_lossy().into_owned();
        golow_free_error(error);
        message
    })
}

/// Panics with libtorch's message when `error` is not null.
pub fn check(error: *mut c_char) {
    if let Err(message) = result(error) {
        panic!("libtorch: {message}");
    }
}

/// Takes ownership of a tensor handle the shim returned.
pub fn owned(handle: *mut C_tensor) -> Tensor {
    assert!(!handle.is_null(), "libtorch returned no tensor");
    // SAFETY: a handle created with `new at::Tensor` by the shim and owned by nobody else.
    unsafe { Tensor::from_ptr(handle) }
}
