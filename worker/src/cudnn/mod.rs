//! The framework-free ResNet: the shape plan (every layer's shapes, the parameter layout), the session's weights
//! read into that layout, the training and evaluation step as an explicit program, and its two backends: `aten`
//! (libtorch's kernels without autograd, any device) and `native` (cuDNN, cuBLAS and NVRTC kernels through cudarc,
//! an NVIDIA GPU). What needs no GPU of the latter (descriptors, kernel compilation) is tested everywhere.

pub mod algorithms;
pub mod aten;
pub mod descriptors;
pub mod kernels;
pub mod layout;
pub mod libraries;
pub mod memory;
pub mod native;
pub mod operations;
pub mod plan;
pub mod program;
pub mod weights;
