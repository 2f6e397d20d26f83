//! The fourth implementation: ResNet on raw cuDNN and cuBLAS through cudarc, with no framework. What runs without a
//! GPU is here: the shape plan (every layer's shapes, the parameter layout, the activations a step keeps) and the
//! session's weights read into that layout. The GPU kernels need an NVIDIA GPU to be written and checked against
//! `libtorch`; until then the monitor's `--impl cudnn` says why it cannot run.

pub mod aten;
pub mod plan;
pub mod program;
pub mod weights;
