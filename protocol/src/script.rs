//! What golow's Python hook says about a user's own script (`--cmd`). Every Python process of the command that has
//! something to report connects to the worker's socket (its path in [`SOCKET_ENV`]) and says who it is, then what
//! it sees: optimiser steps with where each one's time went (its [`StepPhases`]), forward passes of its model until
//! the first step, backward passes where no optimiser steps, and what the script reports itself through the optional
//! API. The monitor numbers the connections: an event's `process` is set by the monitor, never
//! trusted from the line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The variable naming the socket a `--cmd` worker's processes connect to. It is inherited, so that the processes a
/// launcher (`torchrun`, `mp.spawn`, `accelerate launch`) starts report too.
pub const SOCKET_ENV: &str = "GOLOW_EVENT_SOCKET";

/// The variables telling the hook to record the operators of one step in N past the warm-up (`--ops-every`; 0 or
/// unset: none), and the warm-up's steps.
pub const OPS_EVERY_ENV: &str = "GOLOW_OPS_EVERY";
pub const OPS_WARMUP_ENV: &str = "GOLOW_OPS_WARMUP";

/// The variables through which golow tells its exec interposer what every program a `--cmd` worker starts keeps.
pub use golow_exec_variables::{EXEC_KEEP_ENV, HOOK_DIR_ENV};

/// Processes of one `--cmd` worker the monitor listens to at most; later ones are refused.
pub const MAX_PROCESSES: u32 = 256;

/// Optimisers told apart per process at most; steps of later ones count as the last one's.
pub const MAX_OPTIMIZERS: u32 = 16;

/// A name the script gives (a phase, a scalar) is cut to this many bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// Why a process profiles no more steps ([`ProfilingOff`]) is cut to this many bytes.
pub const MAX_REASON_BYTES: usize = 200;

/// A process of the command, as it says hello on connecting: before its first event.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct ScriptProcess {
    #[serde(default)]
    pub process: u32,
    pub pid: u32,
    /// `RANK`, `LOCAL_RANK` and `WORLD_SIZE` from the process's environment, where a launcher set them.
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub python: String,
    pub torch: Option<String>,
    /// `torch.get_num_threads()` as the process first reported.
    pub threads: Option<u32>,
}

/// An optimiser step of a user's own command, reported by golow's Python hook.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct OptimizerStep {
    #[serde(default)]
    pub process: u32,
    /// Which of the process's optimisers, numbered in the order of their first steps.
    #[serde(default)]
    pub optimizer: u32,
    /// Counts this optimiser's steps from 0.
    pub step: u64,
    /// Wall time since this optimiser's previous step; `null` for its first.
    pub interval_ms: Option<f64>,
    /// On the process's first step only: the time from the start of its model's first forward pass to this step,
    /// which holds a compiled model's compilation; `null` when no forward pass was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_step_ms: Option<f64>,
    /// When this process's latest backward pass before this step began, on the host's monotonic clock (the same for
    /// every process of the machine): where a rank arrives at the gradients' all-reduce. `null` when no backward ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrived_ns: Option<u64>,
    /// The hook recorded the operators of this step (from the previous step to this one): kept out of the timing
    /// figures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profiled: bool,
    /// Where the interval went, on the first optimiser's steps that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<StepPhases>,
    /// A GradScaler found infinite gradients and skipped the optimiser's step: counted apart and kept out of the
    /// step figures. `step` is then the number the next step that is taken will have; the interval of that step
    /// starts here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    /// The step's loss, where the hook could read it at once (on the CPU): what `backward()` was called on,
    /// summed over the step's backward passes outside the optimiser's step, else its closure's first. A loss on a
    /// device comes later as a `scalar` named `loss`; a script that reports its own has none here.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::nonfinite::optional"
    )]
    #[schemars(schema_with = "crate::nonfinite::schema")]
    pub loss: Option<f64>,
    /// When it ended, on the host's monotonic clock (`CLOCK_MONOTONIC`, the clock of the session's
    /// `monotonic_origin_ns`): where a trace places it, whenever its line reached the monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ns: Option<u64>,
}

/// Where a step's interval went on the host, as the hook timed it, in milliseconds: waiting on a DataLoader
/// (`data`), in the model's forward passes with gradients (`forward`), in backward passes (`backward`) and in
/// optimiser steps, a GradScaler's included (`optimizer`), with the passes counted. What is left of the interval is
/// the step's `other`. On a GPU these are the host's times: asynchronous work is counted where the host waits for it.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct StepPhases {
    pub data_ms: f64,
    pub forward_ms: f64,
    pub backward_ms: f64,
    pub optimizer_ms: f64,
    pub forward_passes: u32,
    pub backward_passes: u32,
    /// Samples the step went through, inferred by the hook, each distinct batch once: the DataLoader batches its
    /// model took with gradients (their first dimension, along which a DataLoader stacks samples); without a
    /// DataLoader, the batch dimension of each distinct input of its passes with gradients (the first dimension of
    /// the model's first tensor input, or the second of what a sequence-first recurrent or attention module of the
    /// model takes), a closure's or a GAN's repeated passes over one input counted once. Absent where none had one.
    /// What the script reports itself (`golow.report(samples=…)`) overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// The DataLoader whose batches the step's model took, said when it first does and whenever it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader: Option<LoaderSetup>,
    /// What golow's hook itself took of the step: its own code, timed, and each module call's dispatch of its
    /// forward hooks, counted and priced by one measurement in the process. Absent from hooks that did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_ms: Option<f64>,
}

/// How a DataLoader loads, and whether its process uses CUDA: what the remedies for an input-bound script depend on.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[schemars(deny_unknown_fields)]
pub struct LoaderSetup {
    pub num_workers: u32,
    /// Batches are copied into pinned memory (which needs an accelerator).
    pub pin_memory: bool,
    /// The process has initialised CUDA.
    pub cuda: bool,
}

/// A backward pass of a process that trains with no optimiser (its parameters updated by hand): its step. Said only
/// until an optimiser begins a step in the process.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct BackwardPass {
    #[serde(default)]
    pub process: u32,
    /// Counts from 0.
    pub pass: u64,
    /// Since the end of the previous backward pass; `null` for the first.
    pub interval_ms: Option<f64>,
    /// Where the interval went, on passes that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<StepPhases>,
    /// The hook recorded the operators of this step: kept out of the timing figures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profiled: bool,
    /// What this backward pass was called on, where it is one value the hook could read at once.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::nonfinite::optional"
    )]
    #[schemars(schema_with = "crate::nonfinite::schema")]
    pub loss: Option<f64>,
    /// When it ended, on the host's monotonic clock (`CLOCK_MONOTONIC`, the clock of the session's
    /// `monotonic_origin_ns`): where a trace places it, whenever its line reached the monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ns: Option<u64>,
}

/// An optimiser, before its first step.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Optimizer {
    #[serde(default)]
    pub process: u32,
    pub optimizer: u32,
    /// Its class, e.g. `AdamW`.
    pub class: String,
    /// The first parameter group's learning rate at its first step.
    pub lr: Option<f64>,
}

/// A forward pass of the script's model (the first module with parameters it calls outside any other), reported
/// until the process's first optimiser step: what an evaluation or inference loop is measured by.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct ForwardPass {
    #[serde(default)]
    pub process: u32,
    /// Counts from 0.
    pub pass: u64,
    /// From the call of the model to its return.
    pub ms: f64,
    /// Since the start of the previous pass; `null` for the first.
    pub interval_ms: Option<f64>,
    /// Whether autograd was recording (false under `torch.no_grad()` or `inference_mode()`).
    pub grad: bool,
    /// When it ended, on the host's monotonic clock (`CLOCK_MONOTONIC`, the clock of the session's
    /// `monotonic_origin_ns`): where a trace places it, whenever its line reached the monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ns: Option<u64>,
}

/// A number the script reported through golow's API (`golow.report(loss=…)`): `loss`, `accuracy` and `samples`
/// fill the panes; others are kept as they come.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Scalar {
    #[serde(default)]
    pub process: u32,
    pub name: String,
    /// "nan", "inf" or "-inf" when not finite ([`crate::nonfinite`]).
    #[serde(with = "crate::nonfinite::number")]
    #[schemars(schema_with = "crate::nonfinite::schema")]
    pub value: f64,
}

/// A phase the script marked through golow's API (`golow.phase("eval")`).
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Phase {
    #[serde(default)]
    pub process: u32,
    pub name: String,
}

/// The hook records no (more) operators in this process, and why: a profile that ran past its bounds (time, memory)
/// was abandoned, the profiler failed, or the process ended before any step could be profiled. Said once.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct ProfilingOff {
    #[serde(default)]
    pub process: u32,
    pub reason: String,
}
