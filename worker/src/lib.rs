//! golow's Rust workers, a process of their own so that the `golow` monitor never links libtorch (recordings
//! replay on machines without torch): ResNet in LibTorch and TorchScript through tch ([`torch`]), and the raw cuDNN
//! implementation's GPU-free part ([`cudnn`]). A worker reads its configuration, reports on its channels
//! ([`channels`]) and knows nothing of the UI or of other workers.

pub mod channels;
pub mod cudnn;
mod shim;
pub mod torch;
