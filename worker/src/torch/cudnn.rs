//! `cudnn`: the framework-free ResNet program on cuDNN, cuBLAS and NVRTC kernels (`crate::cudnn::native`). The step
//! loop is every Rust worker's: batches arrive as libtorch CUDA tensors, copied by the runner like the others';
//! the network reads them by address and hands its loss and logits back as tensors.

use tch::{Device, Kind, Tensor};

use super::aten::plan_and_weights;
use super::runner::Network;
use crate::cudnn::native::{CudnnNet, Outputs};
use golow_protocol::config::WorkerConfig;

pub struct Cudnn {
    net: CudnnNet,
    device: Device,
    classes: i64,
}

pub fn load(config: &WorkerConfig, device: Device) -> Result<Cudnn, String> {
    let Device::Cuda(ordinal) = device else {
        return Err(format!(
            "the cudnn implementation runs on a CUDA device, not {}",
            config.device
        ));
    };
    let (plan, weights) = plan_and_weights(config)?;
    let classes = plan.classes as i64;
    Ok(Cudnn {
        net: CudnnNet::new(plan, &weights, config.optimiser, config.gpu_policy, ordinal)?,
        device,
        classes,
    })
}

/// The address of a batch tensor, checked to be what the network reads: contiguous, of `kind`, on `device`.
fn address(t: &Tensor, kind: Kind, device: Device) -> u64 {
    assert!(
        t.device() == device && t.kind() == kind && t.is_contiguous(),
        "the cudnn network takes contiguous {kind:?} tensors on {device:?}, got {:?} {:?}",
        t.kind(),
        t.device()
    );
    t.data_ptr() as u64
}

impl Cudnn {
    /// Copies of the step's loss and logits: the network's own buffers are overwritten by the next step.
    fn tensors(&self, out: Result<Outputs, String>, n: i64) -> (Tensor, Tensor) {
        let out = out.unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: both addresses hold f32 values of the given shapes on this device until the next step; the
        // tensors made over them are copied at once and dropped.
        let (loss, logits) = unsafe {
            (
                Tensor::from_blob(out.loss as *const u8, &[], &[], Kind::Float, self.device).copy(),
                Tensor::from_blob(
                    out.logits as *const u8,
                    &[n, self.classes],
                    &[self.classes, 1],
                    Kind::Float,
                    self.device,
                )
                .copy(),
            )
        };
        (loss, logits)
    }
}

impl Network for Cudnn {
    fn train_step(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        let n = inputs.size()[0];
        let out = self.net.train_step(
            address(inputs, Kind::Float, self.device),
            address(targets, Kind::Int64, self.device),
        );
        self.tensors(out, n)
    }

    fn evaluate(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        let n = inputs.size()[0];
        let out = self.net.evaluate(
            address(inputs, Kind::Float, self.device),
            address(targets, Kind::Int64, self.device),
            n as usize,
        );
        self.tensors(out, n)
    }

    /// Each program says which mode its batch norms run in.
    fn set_train(&mut self, _train: bool) {}

    fn time_operations(&mut self, on: bool) {
        self.net.time_operations(on);
    }

    fn take_operations(&mut self) -> Vec<(String, u64, u64)> {
        self.net.take_operations()
    }
}
