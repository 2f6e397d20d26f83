//! The levels libtorch trains: a module's forward, autograd's backward and libtorch's SGD (torch::optim::SGD).

use tch::Tensor;
use tch::nn::{self, OptimizerConfig};

use super::runner::Network;
use golow_protocol::config::{Mode, WorkerConfig};

/// A model whose parameters libtorch holds: ResNet in tch, or the scripted model.
pub trait Module {
    fn forward(&self, inputs: &Tensor, train: bool) -> Tensor;
    /// Switches batch norm between batch statistics and running statistics.
    fn set_train(&mut self, train: bool);
    fn var_store(&self) -> &nn::VarStore;
}

pub struct Autograd<M> {
    module: M,
    /// Only a training run has one.
    optimiser: Option<nn::Optimizer>,
}

impl<M: Module> Autograd<M> {
    pub fn new(module: M, config: &WorkerConfig) -> Result<Autograd<M>, String> {
        let optimiser = match config.mode {
            Mode::Train => {
                let sgd = nn::Sgd {
                    momentum: config.optimiser.momentum,
                    dampening: 0.0,
                    wd: config.optimiser.weight_decay,
                    nesterov: false,
                };
                Some(
                    sgd.build(module.var_store(), config.optimiser.lr)
                        .map_err(|e| e.to_string())?,
                )
            }
            Mode::Eval => None,
        };
        Ok(Autograd { module, optimiser })
    }
}

impl<M: Module> Network for Autograd<M> {
    fn train_step(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        let optimiser = self
            .optimiser
            .as_mut()
            .expect("a training run builds its optimiser");
        let logits = self.module.forward(inputs, true);
        let loss = logits.cross_entropy_for_logits(targets);
        optimiser.zero_grad();
        loss.backward();
        optimiser.step();
        (loss, logits)
    }

    fn evaluate(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        tch::no_grad(|| {
            let logits = self.module.forward(inputs, false);
            (logits.cross_entropy_for_logits(targets), logits)
        })
    }

    fn set_train(&mut self, train: bool) {
        self.module.set_train(train);
    }
}
