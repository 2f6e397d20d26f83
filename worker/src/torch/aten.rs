//! `aten`: the framework-free ResNet program (`crate::cudnn`) on libtorch's kernels, without autograd or modules.

use tch::{Device, Tensor};

use super::runner::Network;
use crate::cudnn::aten::AtenNet;
use crate::cudnn::plan::Plan;
use crate::cudnn::weights::{self, Weights};
use golow_protocol::config::WorkerConfig;

/// The framework-free program's plan for the session's model, data and batch, and the session's weights in its
/// layout: what both of its backends start from.
pub fn plan_and_weights(config: &WorkerConfig) -> Result<(Plan, Weights), String> {
    let plan = Plan::new(
        config.model,
        config.channels as usize,
        config.classes as usize,
        config.batch_size as usize,
        config.resolution as usize,
    )?;
    let weights = weights::load(&config.weights, &plan)?;
    Ok((plan, weights))
}

pub fn load(config: &WorkerConfig, device: Device) -> Result<AtenNet, String> {
    let (plan, weights) = plan_and_weights(config)?;
    Ok(AtenNet::new(plan, &weights, config.optimiser, device))
}

impl Network for AtenNet {
    fn train_step(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        AtenNet::train_step(self, inputs, targets)
    }

    fn evaluate(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        AtenNet::evaluate(self, inputs, targets)
    }

    /// Each program says which mode its batch norms run in.
    fn set_train(&mut self, _train: bool) {}
}
