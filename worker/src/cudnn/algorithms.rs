//! The convolution algorithms, chosen once per shape like `torch.backends.cudnn.benchmark`: cuDNN runs every
//! algorithm it has for the shape on real buffers (`cudnnFind…AlgorithmEx`) and the fastest that fits the search's
//! workspace is kept for the rest of the run.

use std::ffi::c_void;

use cudarc::cudnn::sys;
use cudarc::driver::sys::CUdeviceptr;

use super::descriptors::{ConvDesc, FilterDesc, TensorDesc, check};
use super::plan::{Conv, Shape};

/// What decides a convolution's algorithms: its geometry and its input's shape (batch size included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConvKey {
    pub kernel: usize,
    pub stride: usize,
    pub pad: usize,
    pub input: Shape,
    pub out_channels: usize,
}

impl ConvKey {
    /// `conv` at batch size `n`.
    pub fn of(conv: &Conv, n: usize) -> ConvKey {
        ConvKey {
            kernel: conv.kernel,
            stride: conv.stride,
            pad: conv.pad,
            input: Shape { n, ..conv.input },
            out_channels: conv.output.c,
        }
    }
}

/// One convolution's chosen algorithms and the workspace they need together.
#[derive(Debug, Clone, Copy)]
pub struct ConvAlgos {
    pub forward: sys::cudnnConvolutionFwdAlgo_t,
    /// Only training steps run the backward convolutions; an evaluation step's are never searched.
    pub backward: Option<(
        sys::cudnnConvolutionBwdDataAlgo_t,
        sys::cudnnConvolutionBwdFilterAlgo_t,
    )>,
    pub workspace: usize,
}

/// The operands of one convolution, as device addresses a search may read and overwrite.
pub struct SearchOperands<'a> {
    pub x: (&'a TensorDesc, CUdeviceptr),
    pub w: (&'a FilterDesc, CUdeviceptr),
    pub y: (&'a TensorDesc, CUdeviceptr),
    /// Where a weight gradient may be written (training only).
    pub dw: Option<CUdeviceptr>,
    pub conv: &'a ConvDesc,
}

/// Up to this many candidates are timed per direction (cuDNN has fewer than ten of each).
const CANDIDATES: usize = 16;

/// An array for cuDNN to write its timings into.
fn results<T>() -> [T; CANDIDATES] {
    // SAFETY: used only for cuDNN's `…AlgoPerf_t` structs: integers, floats and enums that have a zero variant.
    unsafe { std::mem::zeroed() }
}

fn ptr(p: CUdeviceptr) -> *mut c_void {
    p as *mut c_void
}

/// Searches the algorithms of one convolution with `workspace` bytes at `scratch`.
///
/// # Safety
/// `handle` is a live cuDNN handle; every address in `op` is an allocation of its descriptor's size on the handle's
/// device, and `scratch` one of `workspace` bytes.
pub unsafe fn search(
    handle: sys::cudnnHandle_t,
    op: &SearchOperands,
    scratch: CUdeviceptr,
    workspace: usize,
) -> Result<ConvAlgos, String> {
    let mut count = 0i32;
    let success = sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS;
    let fits = |status: sys::cudnnStatus_t, memory: usize| status == success && memory <= workspace;

    // SAFETY (all three searches): as the caller promises, and the results array holds `CANDIDATES` entries.
    let mut forward = results::<sys::cudnnConvolutionFwdAlgoPerf_t>();
    check(
        unsafe {
            sys::cudnnFindConvolutionForwardAlgorithmEx(
                handle,
                op.x.0.raw(),
                ptr(op.x.1),
                op.w.0.raw(),
                ptr(op.w.1),
                op.conv.raw(),
                op.y.0.raw(),
                ptr(op.y.1),
                CANDIDATES as i32,
                &mut count,
                forward.as_mut_ptr(),
                ptr(scratch),
                workspace,
            )
        },
        "forward algorithm search",
    )?;
    let forward = forward[..count.max(0) as usize]
        .iter()
        .find(|p| fits(p.status, p.memory))
        .ok_or("cuDNN found no forward convolution algorithm for this shape")?;
    let mut memory = forward.memory;

    let backward = match op.dw {
        None => None,
        Some(dw) => {
            let mut data = results::<sys::cudnnConvolutionBwdDataAlgoPerf_t>();
            // The output's buffer stands in for its gradient and the input's for the input's gradient: same shapes.
            check(
                unsafe {
                    sys::cudnnFindConvolutionBackwardDataAlgorithmEx(
                        handle,
                        op.w.0.raw(),
                        ptr(op.w.1),
                        op.y.0.raw(),
                        ptr(op.y.1),
                        op.conv.raw(),
                        op.x.0.raw(),
                        ptr(op.x.1),
                        CANDIDATES as i32,
                        &mut count,
                        data.as_mut_ptr(),
                        ptr(scratch),
                        workspace,
                    )
                },
                "backward-data algorithm search",
            )?;
            let data = data[..count.max(0) as usize]
                .iter()
                .find(|p| fits(p.status, p.memory))
                .ok_or("cuDNN found no backward-data convolution algorithm for this shape")?;
            let mut filter = results::<sys::cudnnConvolutionBwdFilterAlgoPerf_t>();
            check(
                unsafe {
                    sys::cudnnFindConvolutionBackwardFilterAlgorithmEx(
                        handle,
                        op.x.0.raw(),
                        ptr(op.x.1),
                        op.y.0.raw(),
                        ptr(op.y.1),
                        op.conv.raw(),
                        op.w.0.raw(),
                        ptr(dw),
                        CANDIDATES as i32,
                        &mut count,
                        filter.as_mut_ptr(),
                        ptr(scratch),
                        workspace,
                    )
                },
                "backward-filter algorithm search",
            )?;
            let filter = filter[..count.max(0) as usize]
                .iter()
                .find(|p| fits(p.status, p.memory))
                .ok_or("cuDNN found no backward-filter convolution algorithm for this shape")?;
            memory = memory.max(data.memory).max(filter.memory);
            Some((data.algo, filter.algo))
        }
    };
    Ok(ConvAlgos {
        forward: forward.algo,
        backward,
        workspace: memory,
    })
}
