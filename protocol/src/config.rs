//! Run configuration shared by the monitor and the workers (workers read theirs from the session's `config.json`).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The built-in implementations of ResNet, from the highest level of abstraction to the lowest.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Impl {
    Pytorch,
    /// The Python worker's model under `torch.compile` (TorchDynamo + Inductor).
    Compile,
    Torchscript,
    /// The model exported with `torch.export` and compiled ahead of time by AOTInductor, run by libtorch's runtime
    /// from Rust: no Python as it runs; evaluation only.
    Aoti,
    Libtorch,
    /// The framework-free program on libtorch's kernels, without autograd or modules.
    Aten,
    /// The same program on cuDNN, cuBLAS and NVRTC kernels: no framework at all; GPU only.
    Cudnn,
}

impl Impl {
    pub const ALL: [Impl; 7] = [
        Impl::Pytorch,
        Impl::Compile,
        Impl::Torchscript,
        Impl::Aoti,
        Impl::Libtorch,
        Impl::Aten,
        Impl::Cudnn,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Impl::Pytorch => "pytorch",
            Impl::Compile => "compile",
            Impl::Torchscript => "torchscript",
            Impl::Aoti => "aoti",
            Impl::Libtorch => "libtorch",
            Impl::Aten => "aten",
            Impl::Cudnn => "cudnn",
        }
    }

    pub fn parse(s: &str) -> Result<Impl, String> {
        Impl::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| {
                let known: Vec<_> = Impl::ALL.iter().map(|i| i.name()).collect();
                format!("unknown implementation '{s}' (known: {})", known.join(", "))
            })
    }

    /// Runs only on an NVIDIA GPU.
    pub fn needs_gpu(self) -> bool {
        self == Impl::Cudnn
    }

    /// Runs under the Python interpreter (directly, or to script or package the model once per session).
    pub fn needs_python(self) -> bool {
        matches!(
            self,
            Impl::Pytorch | Impl::Compile | Impl::Torchscript | Impl::Aoti
        )
    }

    /// Its steps run in a Python worker (`worker.py`).
    pub fn is_python(self) -> bool {
        matches!(self, Impl::Pytorch | Impl::Compile)
    }

    /// Compiles the model as it runs (`torch.compile`, whose mode the session sets): its compile time is a cost of
    /// the level, reported apart from its steps.
    pub fn compiles(self) -> bool {
        self == Impl::Compile
    }

    /// Compiles with Inductor, as it runs or ahead of time: Inductor's cache matters to its compile time.
    pub fn uses_inductor(self) -> bool {
        matches!(self, Impl::Compile | Impl::Aoti)
    }

    /// Has Inductor generate C++ on this device: always ahead of time (AOTInductor's wrapper), on the CPU as it
    /// runs (`torch.compile`'s kernels; on a GPU they are Triton's).
    pub fn needs_cpp_compiler(self, on_cpu: bool) -> bool {
        self == Impl::Aoti || (self == Impl::Compile && on_cpu)
    }

    /// Only evaluates: an AOTInductor package has no backward pass.
    pub fn eval_only(self) -> bool {
        self == Impl::Aoti
    }
}

/// `torch.compile`'s mode for the `compile` level: Inductor's defaults, CUDA graphs over its kernels
/// (`reduce-overhead`, GPU only), or autotuned kernels and CUDA graphs (`max-autotune`).
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum CompileMode {
    #[default]
    Default,
    ReduceOverhead,
    MaxAutotune,
}

impl CompileMode {
    pub fn name(self) -> &'static str {
        match self {
            CompileMode::Default => "default",
            CompileMode::ReduceOverhead => "reduce-overhead",
            CompileMode::MaxAutotune => "max-autotune",
        }
    }
}

#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Resnet50,
    Resnet18,
}

impl Model {
    pub fn name(self) -> &'static str {
        match self {
            Model::Resnet50 => "resnet50",
            Model::Resnet18 => "resnet18",
        }
    }
}

/// Whether a run (or one step of it) trains the model or only evaluates it.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Train,
    Eval,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Train => "train",
            Mode::Eval => "eval",
        }
    }
}

/// How workers that share one machine take turns: `Alternate`, one step each in turn, so every implementation sees
/// the same machine state; `Parallel`, all at once, competing for the machine; `Sequential`, one whole run after the
/// other. (Said here rather than on each variant, where clap would add it to the flag's help.)
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Alternate,
    Parallel,
    Sequential,
}

impl Schedule {
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Alternate => "alternate",
            Schedule::Parallel => "parallel",
            Schedule::Sequential => "sequential",
        }
    }
}

/// The optimiser every implementation uses: SGD with momentum and weight decay, constant learning rate.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Optimiser {
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
}

/// What `--lr` defaults to. At 0.01 (golow's default before), SGD with momentum 0.9 took ResNet-50's loss at 32 px
/// from 3 to over 12 in 60 steps at batch 16, and past 100 at batch 8; a linear warm-up of 20 or 50 steps to 0.01 did
/// not stop it, and at 1e-3 the loss still rose over 100 steps at batch 8 on two seeds of three. At 3e-4 it falls over
/// the first 100 steps at batch 8, 16 and 64 (libtorch and pytorch, which agree step for step with torchscript and
/// aten; compile too at 16), and a warm-up changes nothing measurable; `the_default_learning_rate_makes_the_loss_fall`
/// holds batch 8 to it.
pub const DEFAULT_LR: f64 = 3e-4;

impl Default for Optimiser {
    fn default() -> Self {
        Optimiser {
            lr: DEFAULT_LR,
            momentum: 0.9,
            weight_decay: 5e-4,
        }
    }
}

/// What one worker process needs to know; identical for every implementation of a session.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct WorkerConfig {
    pub model: Model,
    pub mode: Mode,
    /// The dataset as the user named it (for display); the bytes come from `data_dir`.
    pub dataset: String,
    /// The session's decoded data cache.
    pub data_dir: PathBuf,
    /// The session's initial weights (safetensors), loaded by every implementation.
    pub weights: PathBuf,
    /// The session's scripted model, for the `torchscript` worker.
    pub torchscript: Option<PathBuf>,
    /// The session's AOTInductor package, for the `aoti` worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aoti: Option<AotiPackage>,
    pub channels: u32,
    pub classes: u32,
    pub batch_size: u32,
    pub resolution: u32,
    /// Steps to run, warm-up included.
    pub steps: u64,
    pub warmup: u64,
    /// `cpu` or `cuda:N`.
    pub device: String,
    pub threads: u32,
    pub seed: u64,
    pub pinned: bool,
    pub optimiser: Optimiser,
    /// How the level asks cuDNN and cuBLAS to work on a GPU: the same for every level.
    #[serde(default)]
    pub gpu_policy: GpuPolicy,
    /// `torch.compile`'s mode, for the `compile` worker.
    #[serde(default)]
    pub compile_mode: CompileMode,
    /// One step in this many past the warm-up has its operators recorded; 0: none (`--no-ops`).
    #[serde(default)]
    pub ops_every: u32,
    /// golow's library of libtorch's operator callbacks (`libgolow_ops.so`), which the Python levels record their
    /// operators with; without it, they use torch.profiler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_library: Option<PathBuf>,
}

/// How every built-in level asks cuDNN and cuBLAS to work on a GPU, one policy for all so that the levels compare on
/// equal terms (docs/methodology.md). By default both are on, as performance-minded users set them.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[schemars(deny_unknown_fields)]
pub struct GpuPolicy {
    /// cuDNN times the algorithms of each convolution shape once, on real buffers, and keeps the fastest
    /// (`torch.backends.cudnn.benchmark`); off, its heuristics choose without running any.
    pub cudnn_benchmark: bool,
    /// f32 convolutions and matrix products may round their inputs to TF32 on the tensor cores; off, both compute
    /// in full f32.
    pub tf32: bool,
}

impl Default for GpuPolicy {
    fn default() -> GpuPolicy {
        GpuPolicy {
            cudnn_benchmark: true,
            tf32: true,
        }
    }
}

/// The model compiled ahead of time, once per session, and what making it cost.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct AotiPackage {
    /// The `.pt2` package `torch._inductor.aoti_compile_and_package` wrote.
    pub package: PathBuf,
    /// What the packager measured (JSON: `ms`, the time torch.export and AOTInductor took), which the worker
    /// reports as its compile time.
    pub packaging: PathBuf,
}

/// The whole session as the user asked for it, after defaults were applied.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Every worker's name: built-in implementations, then `--cmd` names (`impls` in files, as first written).
    #[serde(rename = "impls")]
    pub workers: Vec<String>,
    /// `--cmd` workers: name → the shell command.
    #[serde(default)]
    pub commands: std::collections::BTreeMap<String, String>,
    pub model: Model,
    pub dataset: String,
    pub mode: Mode,
    pub batch_size: u32,
    pub resolution: u32,
    pub steps: u64,
    pub warmup: u64,
    pub device: String,
    pub threads: u32,
    pub schedule: Schedule,
    pub seed: u64,
    pub pinned: bool,
    pub optimiser: Optimiser,
    /// What every built-in level was told of cuDNN's benchmarking and TF32; none in sessions of `--cmd` workers
    /// alone and in recordings made before golow set one policy for all levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_policy: Option<GpuPolicy>,
    /// `torch.compile`'s mode, when the `compile` level runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_mode: Option<CompileMode>,
    /// What golow set in the environment of `--cmd` workers: the thread counts `--threads` asks for
    /// (`OMP_NUM_THREADS`, `MKL_NUM_THREADS`), where golow's own environment set none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub command_env: std::collections::BTreeMap<String, String>,
    /// A running worker that reports no step (nor forward pass) for this many seconds gets a notice.
    #[serde(default = "default_stall_after_s")]
    pub stall_after_s: u64,
    /// The session's time 0 on the host's CLOCK_MONOTONIC, set by the monitor as it starts the clock its records
    /// are stamped with; it places the collector's windows among the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monotonic_origin_ns: Option<u64>,
    /// One step in this many past the warm-up has its operators recorded; 0: none (`--no-ops`, and recordings made
    /// before golow recorded operators).
    #[serde(default)]
    pub ops_every: u32,
    /// `golow attach`: each worker's name → the pid of the running process it watches, which golow did not start
    /// and never signals; empty in a session that started its workers.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub attached: std::collections::BTreeMap<String, u32>,
}

/// What `--ops-every` defaults to: one step in this many has its operators recorded (a `--cmd` script's fewer where
/// torch.profiler's cost reaches its 2% budget; benches/operators.rs).
pub const DEFAULT_OPS_EVERY: u32 = 10;

/// What `--stall-after` defaults to, and what a recording made before it had means.
pub const DEFAULT_STALL_AFTER_S: u64 = 30;

fn default_stall_after_s() -> u64 {
    DEFAULT_STALL_AFTER_S
}

/// Reads a worker's configuration file; a worker's only input besides the data cache and weights.
pub fn read_worker_config(path: &std::path::Path) -> Result<WorkerConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read worker config {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("invalid worker config {}: {e}", path.display()))
}
