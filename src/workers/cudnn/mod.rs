//! The fourth implementation: ResNet on raw cuDNN and cuBLAS through cudarc, with no framework. What runs without a
//! GPU is here: the shape plan (every layer's shapes, the parameter layout, the activations a step keeps) and the
//! session's weights read into that layout. The GPU kernels need an NVIDIA GPU to be written and checked against
//! `libtorch`, so `--impl cudnn` says why it cannot run until then.

pub mod plan;
pub mod weights;

/// Why `--impl cudnn` cannot run on this machine (checked before anything touches the driver).
pub fn unavailable(gpus: impl FnOnce() -> Result<usize, String>) -> String {
    match gpus() {
        Err(why) => format!(
            "--impl cudnn needs an NVIDIA GPU, and this machine has none ({why}); use pytorch, torchscript or libtorch"
        ),
        Ok(0) => "--impl cudnn needs an NVIDIA GPU, and the CUDA driver reports none; use pytorch, torchscript or libtorch".into(),
        Ok(_) => "--impl cudnn: its GPU kernels are not part of this build yet (see README, \"GPU status\"); use pytorch, torchscript or libtorch".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_says_what_is_missing() {
        let none = unavailable(|| Err("no NVIDIA driver (libcuda not found)".into()));
        assert!(
            none.contains("libcuda not found")
                && none.starts_with("--impl cudnn needs an NVIDIA GPU")
        );
        assert!(unavailable(|| Ok(1)).contains("not part of this build"));
    }
}
