//! `aoti`: the model exported with torch.export and compiled ahead of time by AOTInductor into a package, once per
//! session by Python (like the scripted model); loaded and run here by libtorch's own runtime through the shim
//! (`csrc/aoti_package.cpp`), with no Python. Evaluation only: a package has no backward pass.

use std::ffi::{CString, c_char, c_void};
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use tch::Tensor;
use torch_sys::C_tensor;

use super::runner::Network;
use crate::shim::{check, owned, result};
use golow_protocol::config::{Mode, WorkerConfig};
use golow_protocol::event::{Compile, CompileTrigger};

unsafe extern "C" {
    fn golow_aoti_load(path: *const c_char, loader: *mut *mut c_void) -> *mut c_char;
    fn golow_aoti_run(
        loader: *mut c_void,
        input: *const C_tensor,
        output: *mut *mut C_tensor,
    ) -> *mut c_char;
    fn golow_aoti_free(loader: *mut c_void);
}

/// libtorch's AOTIModelPackageLoader over the session's package.
pub struct AotiNet {
    loader: *mut c_void,
}

impl AotiNet {
    pub fn load(config: &WorkerConfig) -> Result<AotiNet, String> {
        if config.mode == Mode::Train {
            return Err("an AOTInductor package only evaluates: run aoti with --mode eval".into());
        }
        let package = &config
            .aoti
            .as_ref()
            .ok_or("the session has no AOTInductor package (config.aoti is null)")?
            .package;
        let fail =
            |e: String| format!("cannot load AOTInductor package {}: {e}", package.display());
        let path = CString::new(package.as_os_str().as_encoded_bytes())
            .map_err(|_| fail("a NUL in its path".into()))?;
        let mut loader = std::ptr::null_mut();
        // SAFETY: a NUL-terminated path; the shim writes an owned loader, freed in `drop`.
        result(unsafe { golow_aoti_load(path.as_ptr(), &mut loader) }).map_err(fail)?;
        if loader.is_null() {
            return Err(fail("libtorch returned no loader".into()));
        }
        Ok(AotiNet { loader })
    }

    fn logits(&self, inputs: &Tensor) -> Tensor {
        let mut output = std::ptr::null_mut();
        // SAFETY: the loader lives as long as self; the input outlives the call; the shim writes an owned handle.
        check(unsafe { golow_aoti_run(self.loader, inputs.as_ptr(), &mut output) });
        owned(output)
    }
}

impl Drop for AotiNet {
    fn drop(&mut self) {
        // SAFETY: created by golow_aoti_load, freed once.
        unsafe { golow_aoti_free(self.loader) }
    }
}

impl Network for AotiNet {
    fn train_step(&mut self, _inputs: &Tensor, _targets: &Tensor) -> (Tensor, Tensor) {
        unreachable!("AotiNet::load refuses a training run")
    }

    fn evaluate(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        tch::no_grad(|| {
            let logits = self.logits(inputs);
            (logits.cross_entropy_for_logits(targets), logits)
        })
    }

    /// The package was exported in evaluation mode: batch norm on running statistics, always.
    fn set_train(&mut self, _train: bool) {}
}

/// What the packager wrote beside the package.
#[derive(Deserialize)]
struct Packaging {
    ms: f64,
    #[serde(default)]
    cache_hits: u32,
    #[serde(default)]
    cache_misses: u32,
}

/// The most a packaging report can take; it is a few numbers.
const MAX_REPORT_BYTES: u64 = 64 * 1024;

/// The package's making as a compilation, before any step: this level's compile time.
pub fn packaging(path: &Path) -> Result<Compile, String> {
    let fail = |e: String| format!("cannot read the packaging report {}: {e}", path.display());
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_REPORT_BYTES).read_to_string(&mut text))
        .map_err(|e| fail(e.to_string()))?;
    let report: Packaging = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
    if !(report.ms.is_finite() && report.ms >= 0.0) {
        return Err(fail(format!("its time is {} ms", report.ms)));
    }
    Ok(Compile {
        step: None,
        phase: Mode::Eval,
        trigger: CompileTrigger::Package,
        recompile: false,
        ms: report.ms,
        cache_hits: report.cache_hits,
        cache_misses: report.cache_misses,
    })
}
