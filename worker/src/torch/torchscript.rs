//! `torchscript`: the PyTorch definition, scripted once per session by Python, loaded and run from Rust:
//! `CModule` for evaluation, `TrainableCModule` for training.

use tch::nn;
use tch::{CModule, Device, Tensor, TrainableCModule};

use super::autograd::Module;
use golow_protocol::config::{Mode, WorkerConfig};

enum Scripted {
    Train(TrainableCModule),
    Eval(CModule),
}

pub struct TorchScriptNet {
    vs: nn::VarStore,
    module: Scripted,
}

impl TorchScriptNet {
    pub fn load(config: &WorkerConfig, device: Device) -> Result<TorchScriptNet, String> {
        let path = config
            .torchscript
            .as_ref()
            .ok_or("the session has no scripted model (config.torchscript is null)")?;
        let fail = |e: tch::TchError| format!("cannot load scripted model {}: {e}", path.display());
        let vs = nn::VarStore::new(device);
        let module = match config.mode {
            Mode::Train => Scripted::Train(TrainableCModule::load(path, vs.root()).map_err(fail)?),
            Mode::Eval => Scripted::Eval(CModule::load_on_device(path, device).map_err(fail)?),
        };
        Ok(TorchScriptNet { vs, module })
    }
}

impl Module for TorchScriptNet {
    fn forward(&self, inputs: &Tensor, _train: bool) -> Tensor {
        let result = match &self.module {
            Scripted::Train(m) => m.forward_ts(&[inputs]),
            Scripted::Eval(m) => m.forward_ts(&[inputs]),
        };
        result.unwrap_or_else(|e| panic!("scripted forward failed: {e}"))
    }

    fn set_train(&mut self, train: bool) {
        match (&mut self.module, train) {
            (Scripted::Train(m), true) => m.set_train(),
            (Scripted::Train(m), false) => m.set_eval(),
            (Scripted::Eval(m), _) => m.set_eval(),
        }
    }

    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
}
