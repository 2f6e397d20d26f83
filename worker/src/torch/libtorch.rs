//! `libtorch`: ResNet in Rust with `tch`, eager.

use tch::nn::{self, ModuleT};
use tch::{Device, Tensor};

use super::autograd::Module;
use super::model::ResNet;
use golow_protocol::config::WorkerConfig;

pub struct LibtorchNet {
    vs: nn::VarStore,
    model: ResNet,
}

impl LibtorchNet {
    pub fn load(config: &WorkerConfig, device: Device) -> Result<LibtorchNet, String> {
        let mut vs = nn::VarStore::new(device);
        let model = ResNet::new(
            &vs.root(),
            config.model,
            i64::from(config.channels),
            i64::from(config.classes),
        );
        vs.load(&config.weights)
            .map_err(|e| format!("cannot load weights {}: {e}", config.weights.display()))?;
        Ok(LibtorchNet { vs, model })
    }
}

impl Module for LibtorchNet {
    fn forward(&self, inputs: &Tensor, train: bool) -> Tensor {
        self.model.forward_t(inputs, train)
    }

    /// Batch-norm mode travels with every forward call here.
    fn set_train(&mut self, _train: bool) {}

    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
}

/// Writes the session's initial weights: one file, loaded by every implementation.
pub fn write_initial_weights(config: &WorkerConfig) -> Result<(), String> {
    tch::manual_seed(config.seed as i64);
    let vs = nn::VarStore::new(Device::Cpu);
    let _model = ResNet::new(
        &vs.root(),
        config.model,
        i64::from(config.channels),
        i64::from(config.classes),
    );
    vs.save(&config.weights)
        .map_err(|e| format!("cannot write weights {}: {e}", config.weights.display()))
}
