//! The convolution algorithms, chosen once per shape as the session's GPU policy says, like PyTorch: with
//! benchmarking on, cuDNN runs every algorithm it has for the shape on real buffers (`cudnnFind…AlgorithmEx`) and
//! the fastest that fits the search's workspace is kept for the rest of the run, with the math type it was timed
//! with; off, its heuristics rank them without running any. Each direction's descriptor is set to its algorithm's
//! math type and the workspace asked of cuDNN for the algorithm and descriptor actually run.

use std::ffi::c_void;

use cudarc::cudnn::sys;
use cudarc::driver::sys::CUdeviceptr;

use super::descriptors::{ConvDesc, FilterDesc, LayerDescs, TensorDesc, check};
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

/// One direction's algorithm and the math type (tensor cores or not) cuDNN timed it with.
#[derive(Debug, Clone, Copy)]
pub struct Chosen<A> {
    pub algo: A,
    pub math: sys::cudnnMathType_t,
}

/// One convolution's chosen algorithms.
#[derive(Debug, Clone, Copy)]
pub struct ConvAlgos {
    pub forward: Chosen<sys::cudnnConvolutionFwdAlgo_t>,
    /// Only training steps run the backward convolutions; an evaluation step's are never searched.
    pub backward: Option<(
        Chosen<sys::cudnnConvolutionBwdDataAlgo_t>,
        Chosen<sys::cudnnConvolutionBwdFilterAlgo_t>,
    )>,
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

/// How the algorithms are chosen: the session's GPU policy as it applies to cuDNN.
#[derive(Debug, Clone, Copy)]
pub struct Choice {
    /// Time every algorithm on real buffers (`cudnnFind…AlgorithmEx`), else take the first that cuDNN's heuristics
    /// rank (`cudnnGet…Algorithm_v7`), as PyTorch does with `cudnn.benchmark` on and off.
    pub benchmark: bool,
    /// TF32 allowed on the tensor cores; else every direction runs in full f32 (`CUDNN_FMA_MATH`), as PyTorch sets
    /// for f32 convolutions without `allow_tf32`.
    pub tf32: bool,
}

impl Choice {
    /// The math type the search runs under, which a convolution descriptor must carry before it.
    pub fn search_math(self) -> sys::cudnnMathType_t {
        if self.tf32 {
            sys::cudnnMathType_t::CUDNN_DEFAULT_MATH
        } else {
            sys::cudnnMathType_t::CUDNN_FMA_MATH
        }
    }

    /// The math a chosen algorithm runs with: as timed or ranked, but never TF32 where the policy forbids it.
    fn math(self, found: sys::cudnnMathType_t) -> sys::cudnnMathType_t {
        if self.tf32 {
            found
        } else {
            sys::cudnnMathType_t::CUDNN_FMA_MATH
        }
    }
}

/// One candidate of a search, whichever direction's.
trait Candidate {
    type Algo: Copy;
    fn fields(&self) -> (Self::Algo, sys::cudnnStatus_t, usize, sys::cudnnMathType_t);
}

macro_rules! candidate {
    ($perf:ty, $algo:ty) => {
        impl Candidate for $perf {
            type Algo = $algo;
            fn fields(&self) -> ($algo, sys::cudnnStatus_t, usize, sys::cudnnMathType_t) {
                (self.algo, self.status, self.memory, self.mathType)
            }
        }
    };
}

candidate!(
    sys::cudnnConvolutionFwdAlgoPerf_t,
    sys::cudnnConvolutionFwdAlgo_t
);
candidate!(
    sys::cudnnConvolutionBwdDataAlgoPerf_t,
    sys::cudnnConvolutionBwdDataAlgo_t
);
candidate!(
    sys::cudnnConvolutionBwdFilterAlgoPerf_t,
    sys::cudnnConvolutionBwdFilterAlgo_t
);

/// The first of the `count` candidates cuDNN returned that ran (or would run) and fits the workspace, with the math
/// type the policy lets it use.
fn first_fit<C: Candidate>(
    candidates: &[C],
    count: i32,
    workspace: usize,
    choice: Choice,
    what: &str,
) -> Result<Chosen<C::Algo>, String> {
    candidates[..count.clamp(0, CANDIDATES as i32) as usize]
        .iter()
        .map(C::fields)
        .find(|c| c.1 == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS && c.2 <= workspace)
        .map(|c| Chosen {
            algo: c.0,
            math: choice.math(c.3),
        })
        .ok_or_else(|| format!("cuDNN found no {what} convolution algorithm for this shape"))
}

/// Chooses the algorithms of one convolution with `workspace` bytes at `scratch`, as `choice` says. `op.conv`
/// carries `choice.search_math()`.
///
/// # Safety
/// `handle` is a live cuDNN handle; every address in `op` is an allocation of its descriptor's size on the handle's
/// device, and `scratch` one of `workspace` bytes.
pub unsafe fn search(
    handle: sys::cudnnHandle_t,
    op: &SearchOperands,
    scratch: CUdeviceptr,
    workspace: usize,
    choice: Choice,
) -> Result<ConvAlgos, String> {
    let mut count = 0i32;
    let n = CANDIDATES as i32;
    let (x, w, y, conv) = (op.x.0.raw(), op.w.0.raw(), op.y.0.raw(), op.conv.raw());

    // SAFETY (every call below): as the caller promises, and each results array holds `CANDIDATES` entries.
    let mut forward = results::<sys::cudnnConvolutionFwdAlgoPerf_t>();
    let status = if choice.benchmark {
        unsafe {
            sys::cudnnFindConvolutionForwardAlgorithmEx(
                handle,
                x,
                ptr(op.x.1),
                w,
                ptr(op.w.1),
                conv,
                y,
                ptr(op.y.1),
                n,
                &mut count,
                forward.as_mut_ptr(),
                ptr(scratch),
                workspace,
            )
        }
    } else {
        unsafe {
            sys::cudnnGetConvolutionForwardAlgorithm_v7(
                handle,
                x,
                w,
                conv,
                y,
                n,
                &mut count,
                forward.as_mut_ptr(),
            )
        }
    };
    check(status, "forward algorithm search")?;
    let forward = first_fit(&forward, count, workspace, choice, "forward")?;

    let backward = match op.dw {
        None => None,
        Some(dw) => {
            // The output's buffer stands in for its gradient and the input's for the input's gradient: same shapes.
            let mut data = results::<sys::cudnnConvolutionBwdDataAlgoPerf_t>();
            let status = if choice.benchmark {
                unsafe {
                    sys::cudnnFindConvolutionBackwardDataAlgorithmEx(
                        handle,
                        w,
                        ptr(op.w.1),
                        y,
                        ptr(op.y.1),
                        conv,
                        x,
                        ptr(op.x.1),
                        n,
                        &mut count,
                        data.as_mut_ptr(),
                        ptr(scratch),
                        workspace,
                    )
                }
            } else {
                unsafe {
                    sys::cudnnGetConvolutionBackwardDataAlgorithm_v7(
                        handle,
                        w,
                        y,
                        conv,
                        x,
                        n,
                        &mut count,
                        data.as_mut_ptr(),
                    )
                }
            };
            check(status, "backward-data algorithm search")?;
            let data = first_fit(&data, count, workspace, choice, "backward-data")?;
            let mut filter = results::<sys::cudnnConvolutionBwdFilterAlgoPerf_t>();
            let status = if choice.benchmark {
                unsafe {
                    sys::cudnnFindConvolutionBackwardFilterAlgorithmEx(
                        handle,
                        x,
                        ptr(op.x.1),
                        y,
                        ptr(op.y.1),
                        conv,
                        w,
                        ptr(dw),
                        n,
                        &mut count,
                        filter.as_mut_ptr(),
                        ptr(scratch),
                        workspace,
                    )
                }
            } else {
                unsafe {
                    sys::cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                        handle,
                        x,
                        y,
                        conv,
                        w,
                        n,
                        &mut count,
                        filter.as_mut_ptr(),
                    )
                }
            };
            check(status, "backward-filter algorithm search")?;
            let filter = first_fit(&filter, count, workspace, choice, "backward-filter")?;
            Some((data, filter))
        }
    };
    Ok(ConvAlgos { forward, backward })
}

/// Sets each direction's descriptor of `layer` to its algorithm's math type, and returns the workspace the
/// algorithms need with those descriptors, as cuDNN says for each (an algorithm's needs can differ by math type).
///
/// # Safety
/// `handle` is a live cuDNN handle; `x` and `y` describe the layer's input and output.
pub unsafe fn configure(
    handle: sys::cudnnHandle_t,
    layer: &LayerDescs,
    x: &TensorDesc,
    y: &TensorDesc,
    algos: &ConvAlgos,
) -> Result<usize, String> {
    layer.forward.set_math(algos.forward.math)?;
    let mut forward = 0usize;
    // SAFETY (all three queries): descriptors set up for this layer, and a live out-pointer.
    check(
        unsafe {
            sys::cudnnGetConvolutionForwardWorkspaceSize(
                handle,
                x.raw(),
                layer.filter.raw(),
                layer.forward.raw(),
                y.raw(),
                algos.forward.algo,
                &mut forward,
            )
        },
        "forward workspace size",
    )?;
    let Some((data, filter)) = algos.backward else {
        return Ok(forward);
    };
    layer.backward_data.set_math(data.math)?;
    layer.backward_filter.set_math(filter.math)?;
    let (mut data_bytes, mut filter_bytes) = (0usize, 0usize);
    check(
        unsafe {
            sys::cudnnGetConvolutionBackwardDataWorkspaceSize(
                handle,
                layer.filter.raw(),
                y.raw(),
                layer.backward_data.raw(),
                x.raw(),
                data.algo,
                &mut data_bytes,
            )
        },
        "backward-data workspace size",
    )?;
    check(
        unsafe {
            sys::cudnnGetConvolutionBackwardFilterWorkspaceSize(
                handle,
                x.raw(),
                y.raw(),
                layer.backward_filter.raw(),
                layer.filter.raw(),
                filter.algo,
                &mut filter_bytes,
            )
        },
        "backward-filter workspace size",
    )?;
    Ok(forward.max(data_bytes).max(filter_bytes))
}
