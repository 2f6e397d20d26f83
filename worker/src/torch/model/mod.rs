//! ResNet in `tch`, laid out exactly like torchvision's (v1.5: stride on the 3×3 convolution), so that
//! parameter names match the Python definition and one weights file serves every implementation.

mod resnet;

pub use resnet::ResNet;
