//! The summary JSON: the contract scripts and later features rely on (docs/summary-json.md).

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::compile::{Cache, CompileState};
use super::flops::Efficiency;
use super::kernels::{Activity, PerStep};
use super::operators::Operators;
use super::phases::{Phase, PhasesState};
use super::ratio::{Basis, Pairing};
use super::script::ScriptState;
use super::{AttachedEnd, Percentiles, ProcessEnd, State, WorkerState};
use golow_protocol::config::{GpuPolicy, Mode, Model, Schedule, SessionConfig};
use golow_protocol::event::ExitStatus;

pub const SUMMARY_VERSION: u32 = 1;

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WorkerStatus {
    Ok,
    Failed,
    Stopped,
    /// An attached process that ended during the session; how is not knowable (golow is not its parent).
    Ended,
    /// An attached process the session stopped watching; it runs on.
    Detached,
}

/// What the session ran: the built-in workers' settings only where a built-in worker ran (a `--cmd` script has its
/// own model, data and optimiser, which its worker's `script` reports).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SummaryConfig {
    #[serde(flatten)]
    pub builtin: Option<BuiltinConfig>,
    pub schedule: Schedule,
    /// `--cmd` workers: name → shell command.
    pub commands: BTreeMap<String, String>,
    /// What golow set in the `--cmd` workers' environment (`--threads`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub command_env: BTreeMap<String, String>,
    /// `golow attach`: worker name → the pid of the process it watched.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attached: BTreeMap<String, u32>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct BuiltinConfig {
    pub model: Model,
    pub dataset: String,
    pub mode: Mode,
    pub batch_size: u32,
    pub resolution: u32,
    pub device: String,
    /// cuDNN's benchmarking and TF32, as every level was told (none in recordings made before the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_policy: Option<GpuPolicy>,
}

impl From<&SessionConfig> for SummaryConfig {
    fn from(c: &SessionConfig) -> SummaryConfig {
        let builtin = c
            .workers
            .iter()
            .any(|w| !c.commands.contains_key(w) && !c.attached.contains_key(w))
            .then(|| BuiltinConfig {
                model: c.model,
                dataset: c.dataset.clone(),
                mode: c.mode,
                batch_size: c.batch_size,
                resolution: c.resolution,
                device: c.device.clone(),
                gpu_policy: c.gpu_policy,
            });
        SummaryConfig {
            builtin,
            schedule: c.schedule,
            commands: c.commands.clone(),
            command_env: c.command_env.clone(),
            attached: c.attached.clone(),
        }
    }
}

/// A `--cmd` worker's script, as golow's hook saw it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ScriptSummary {
    /// Seconds from the worker's start to its first optimiser step (imports, data loading, compilation), and that
    /// step's own duration from the start of the model's first forward pass.
    pub time_to_first_step_s: Option<f64>,
    pub first_step_ms: Option<f64>,
    /// The worker's process's optimisers; the first one's steps are the worker's `steps`.
    pub optimizers: Vec<OptimizerSummary>,
    /// Forward passes of the model before the first optimiser step (an evaluation loop's), timed past the warm-up.
    pub forward_passes: u64,
    pub forward_ms: Option<Percentiles>,
    pub forward_interval_ms: Option<Percentiles>,
    /// Every process that reported (a launcher's ranks), and how many more were not told apart.
    pub processes: Vec<ProcessSummary>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_processes: u64,
    /// `torch.get_num_threads()` in the worker's process.
    pub threads: Option<u32>,
    /// What the script reported through golow's API: the latest value of each.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "golow_protocol::nonfinite::values"
    )]
    pub scalars: BTreeMap<String, f64>,
    /// What the worker's steps are: `optimizer` steps, or `backward` passes of a script that trains with no
    /// optimiser; `null` before any.
    pub steps_counted_by: Option<String>,
    /// Where the measured steps' time went on the host; `null` without phases (an evaluation loop, an old hook).
    pub phases: Option<PhasesSummary>,
    /// Waiting on data takes a fifth of a typical step or more (its share as `phases` gives it).
    pub input_bound: bool,
    /// Forward passes per optimiser step, the median: more than one is gradient accumulation.
    pub micro_batches_per_step: Option<u32>,
    /// Steps a GradScaler skipped (infinite gradients): kept out of the step figures.
    pub skipped_steps: u64,
    /// Where samples per step came from: `report` (`golow.report(samples=…)`) or `batch dimension` (the hook's
    /// inference: each distinct batch the model took, once); `null` when neither gave any.
    #[serde(default)]
    pub samples_from: Option<String>,
    /// What golow's hook itself took of a typical step (its median), and that as a share of the step; `null`
    /// where the hook did not say (an older recording).
    #[serde(default)]
    pub hook: Option<PhaseSummary>,
}

/// A typical measured step's phases: each one's median time over the steps, and its share of the five medians'
/// sum (the shares add up to one; a slow step now and then moves neither).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PhasesSummary {
    pub data: PhaseSummary,
    pub forward: PhaseSummary,
    pub backward: PhaseSummary,
    pub optimizer: PhaseSummary,
    pub other: PhaseSummary,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct PhaseSummary {
    pub p50_ms: f64,
    pub share: f64,
}

impl PhasesSummary {
    /// Each phase by its name, in `Phase::ALL`'s order.
    pub fn each(&self) -> [(&'static str, PhaseSummary); 5] {
        let [data, forward, backward, optimizer, other] = Phase::ALL.map(Phase::name);
        [
            (data, self.data),
            (forward, self.forward),
            (backward, self.backward),
            (optimizer, self.optimizer),
            (other, self.other),
        ]
    }

    /// A typical step's phases: each one's median, and its share of their sum.
    fn of(phases: &PhasesState) -> Option<PhasesSummary> {
        let typical = phases.typical()?;
        let shares = phases.shares()?;
        let phase = |phase: Phase| PhaseSummary {
            p50_ms: typical[phase as usize],
            share: shares[phase as usize],
        };
        Some(PhasesSummary {
            data: phase(Phase::Data),
            forward: phase(Phase::Forward),
            backward: phase(Phase::Backward),
            optimizer: phase(Phase::Optimizer),
            other: phase(Phase::Other),
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OptimizerSummary {
    pub class: Option<String>,
    /// Its first parameter group's learning rate at its first step.
    pub lr: Option<f64>,
    pub steps: u64,
    pub step_time_ms: Option<Percentiles>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ProcessSummary {
    pub pid: Option<u32>,
    pub rank: Option<u32>,
    pub world_size: Option<u32>,
    /// Its first optimiser's steps, and the intervals between them past the warm-up.
    pub steps: u64,
    pub step_time_ms: Option<Percentiles>,
    pub forward_passes: u64,
}

impl ScriptSummary {
    fn from_script(s: &ScriptState) -> ScriptSummary {
        ScriptSummary {
            time_to_first_step_s: s.time_to_first_step_s,
            first_step_ms: s.first_step_ms,
            optimizers: s
                .optimizers
                .iter()
                .map(|o| OptimizerSummary {
                    class: o.class.clone(),
                    lr: o.lr,
                    steps: o.steps,
                    step_time_ms: o.interval.percentiles(),
                })
                .collect(),
            forward_passes: s.forward.passes,
            forward_ms: s.forward.duration.percentiles(),
            forward_interval_ms: s.forward.interval.percentiles(),
            processes: s
                .processes
                .iter()
                .map(|p| ProcessSummary {
                    pid: p.pid,
                    rank: p.rank,
                    world_size: p.world_size,
                    steps: p.steps,
                    step_time_ms: p.step_interval.percentiles(),
                    forward_passes: p.forward_passes,
                })
                .collect(),
            more_processes: s.more_processes,
            threads: s.primary_process().and_then(|p| p.threads),
            scalars: s.scalars.clone(),
            steps_counted_by: s.steps_counted_by().map(String::from),
            phases: PhasesSummary::of(&s.phases),
            input_bound: s.phases.input_bound().is_some(),
            micro_batches_per_step: s.phases.micro_batches_per_step(),
            skipped_steps: s.skipped_steps,
            samples_from: s.samples_from.map(|from| from.name().to_string()),
            hook: s.phases.hook_cost().map(|cost| PhaseSummary {
                p50_ms: cost.ms,
                share: cost.share,
            }),
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Loss {
    /// "nan", "inf" or "-inf" when not finite (a diverging run), as in the event schema.
    #[serde(default, with = "golow_protocol::nonfinite::optional")]
    pub first: Option<f64>,
    #[serde(default, with = "golow_protocol::nonfinite::optional")]
    pub last: Option<f64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WorkerSummary {
    #[serde(rename = "impl")]
    pub implementation: String,
    pub status: WorkerStatus,
    /// What the worker reported running on (its hello event): library → version.
    pub versions: std::collections::BTreeMap<String, String>,
    pub exit_code: Option<i32>,
    /// Set when a signal ended the worker.
    pub signal: Option<i32>,
    pub steps: u64,
    pub warmup_steps: u64,
    pub samples: u64,
    pub compute_ms: Option<Percentiles>,
    pub sample_time_ms: Option<Percentiles>,
    /// Per measured step: the timed regions (built-in), or the interval between optimiser steps (`--cmd`).
    pub step_time_ms: Option<Percentiles>,
    pub h2d_ms: Option<Percentiles>,
    pub h2d_bytes_per_step: Option<u64>,
    pub throughput_samples_per_s: Option<f64>,
    pub loss: Loss,
    pub accuracy: Option<f64>,
    pub peak_host_rss_bytes: u64,
    pub peak_gpu_mem_bytes: Option<u64>,
    /// Mean of NVML's per-process SM utilisation readings for the worker's process tree.
    pub gpu_sm_percent_mean: Option<f64>,
    /// Mean of /proc's CPU readings of the worker's process tree (100 = one core busy); absent in older summaries.
    #[serde(default)]
    pub host_cpu_percent_mean: Option<f64>,
    /// The most threads the worker's process tree held at a reading; absent in older recordings' summaries.
    #[serde(default)]
    pub peak_host_threads: Option<u32>,
    /// Shares of GPU time (HTA's definitions) from the CUPTI collector's windows; `null` without them.
    pub gpu_breakdown: Option<golow_protocol::event::Breakdown>,
    /// Kernel launches per measured step, from the collector's records set on the steps that launched them; `null`
    /// where they could not be (no collector, or a recording from before golow placed them).
    pub kernel_launches_per_step: Option<f64>,
    /// Host-to-device bytes per measured step as CUPTI measured them, to set beside the worker's own
    /// `h2d_bytes_per_step`; placed as `kernel_launches_per_step` is.
    pub cupti_h2d_bytes_per_step: Option<f64>,
    /// Milliseconds per measured step the GPU ran the worker's kernels; placed as `kernel_launches_per_step` is.
    #[serde(default)]
    pub gpu_busy_ms_per_step: Option<f64>,
    /// What the collector saw outside the measured steps; `null` where its records were not set on steps.
    #[serde(default)]
    pub cupti_outside_steps: Option<OutsideSteps>,
    /// Everything the level spent compiling (first compilation and recompilations), kept out of its step figures;
    /// `null` for levels that do not compile.
    pub compile_ms: Option<f64>,
    /// The steps after which the level has paid `compile_ms` back against eager `pytorch` in this session (median
    /// step times); `null` when it is no faster, or no eager worker ran.
    pub break_even_steps: Option<u64>,
    /// How the compile time was spent; `null` for levels that do not compile.
    pub compile: Option<CompileSummary>,
    /// Why the worker failed: its own message, else its last stderr lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What a reader of these figures must know: a `--cmd` worker that measured nothing, and why; or one that is
    /// input-bound, and what would help.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// A `--cmd` worker's script, as golow's hook saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptSummary>,
    /// A distributed `--cmd` worker's ranks, by rank (absent for a worker without ranks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankSummary>,
    /// Where its ranks arrived at each step: the skew between them and the straggler verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stragglers: Option<StragglerSummary>,
    /// The operators with the most self time per profiled step, largest first (absent when none were recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_operators: Vec<OperatorSummary>,
    /// How the operators were recorded, how much of the profiled steps they explain, and what looking cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<OperatorsSummary>,
    /// The floating-point work of a built-in level's steps and how near the device's peak it ran (absent for a
    /// `--cmd` worker, whose model golow does not know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<FlopsSummary>,
    /// Lines from the worker that golow refused (absent when none were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_errors: Option<ProtocolErrors>,
}

/// FLOPs counted two per multiply-add, from the model's architecture at the session's sizes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct FlopsSummary {
    /// Per sample of a step: the forward pass (eval), or forward and backward (train).
    pub per_sample: f64,
    pub forward_per_sample: f64,
    /// `per_sample` × `throughput_samples_per_s`, in TFLOP/s.
    pub achieved_tflops: Option<f64>,
    /// The device's dense peak for the session's math, from NVIDIA's datasheets; `null` on the CPU or a GPU not
    /// in golow's table.
    pub peak_tflops: Option<f64>,
    /// `FP32` or `TF32`, as `--tf32` set it.
    pub peak_math: Option<String>,
    /// The datasheet's part, e.g. `H100 SXM`.
    pub peak_device: Option<String>,
    /// `achieved_tflops` over `peak_tflops`.
    pub share_of_peak: Option<f64>,
}

impl From<Efficiency> for FlopsSummary {
    fn from(e: Efficiency) -> FlopsSummary {
        FlopsSummary {
            per_sample: e.model.per_sample,
            forward_per_sample: e.model.forward,
            achieved_tflops: e.achieved_tflops,
            peak_tflops: e.peak.map(|p| p.tflops),
            peak_math: e.peak.map(|p| p.math.name().to_string()),
            peak_device: e.peak.map(|p| p.device.to_string()),
            share_of_peak: e.share_of_peak(),
        }
    }
}

/// Where the CUPTI records outside a worker's measured steps lay.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OutsideSteps {
    /// Before the first step: start-up, the weights' upload.
    pub start_up: Activity,
    /// Warm-up, profiled and compiling steps.
    pub unmeasured_steps: Activity,
    /// Evaluation passes at epochs' ends, and evaluation steps of a training run.
    pub evaluation: Activity,
    pub between_steps: Activity,
    /// After the last step: the run's end.
    pub after_last_step: Activity,
    /// Older than every step golow still remembered when they arrived.
    pub unplaced: Activity,
}

impl OutsideSteps {
    fn of(p: &PerStep) -> Option<OutsideSteps> {
        p.placed().then(|| OutsideSteps {
            start_up: p.start_up,
            unmeasured_steps: p.unmeasured,
            evaluation: p.evaluation,
            between_steps: p.between_steps,
            after_last_step: p.after_last_step(),
            unplaced: p.unplaced,
        })
    }
}

/// How many of a worker's lines were refused, and why the first was.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ProtocolErrors {
    pub count: u64,
    pub first: String,
}

/// Operators named in the summary's `top_operators`.
pub const TOP_OPERATORS: usize = 10;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OperatorSummary {
    pub name: String,
    /// Per profiled step.
    pub self_ms_per_step: f64,
    pub total_ms_per_step: f64,
    pub calls_per_step: f64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shapes: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OperatorsSummary {
    pub profiled_steps: u64,
    /// One step in `every` was profiled.
    pub every: u32,
    /// A profiled step's compute time (a `--cmd` worker's: its interval), on average.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_ms_per_step: Option<f64>,
    /// The operators' self times summed over the profiled steps' compute time.
    pub explained: Option<f64>,
    /// Calls, shapes and names the recorders could not keep.
    pub dropped: u64,
    /// What looking cost, from the run itself: a profiled step's compute time over an unprofiled one's, less 1
    /// (medians), and that over the run (one step in `every`); absent with too few of either.
    pub overhead_per_profiled_step: Option<f64>,
    pub overhead: Option<f64>,
    /// How like the others the profiled steps were: a profiled step's median time (compute, or a `--cmd` step's
    /// interval) and the other measured steps' median; absent with fewer than three of those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiled_step_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unprofiled_step_ms: Option<f64>,
    /// Why no (more) steps were profiled, as the worker said (a profile past its bounds, a run too short).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<String>,
}

fn top_operators(o: &Operators) -> Vec<OperatorSummary> {
    o.top(TOP_OPERATORS)
        .into_iter()
        .filter_map(|(name, t)| {
            Some(OperatorSummary {
                name: name.to_string(),
                self_ms_per_step: o.per_step(t.self_ns)? / 1e6,
                total_ms_per_step: o.per_step(t.total_ns)? / 1e6,
                calls_per_step: o.per_step(t.calls)?,
                shapes: t.shapes.clone(),
            })
        })
        .collect()
}

fn operators(o: &Operators) -> Option<OperatorsSummary> {
    (o.steps > 0 || o.off.is_some()).then(|| {
        let overhead = o.overhead();
        let against = o.profiled_against_plain();
        OperatorsSummary {
            profiled_steps: o.steps,
            every: o.every,
            compute_ms_per_step: o.compute_ms_per_step(),
            explained: o.explained(),
            dropped: o.dropped,
            overhead_per_profiled_step: overhead.map(|(step, _)| step),
            overhead: overhead.map(|(_, run)| run),
            profiled_step_ms: against.map(|(profiled, _)| profiled),
            unprofiled_step_ms: against.map(|(_, plain)| plain),
            off: o.off.clone(),
        }
    })
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RankSummary {
    pub rank: u32,
    /// Its first optimiser's steps, and the intervals between them past the warm-up.
    pub steps: u64,
    pub step_time_ms: Option<Percentiles>,
    /// Complete steps it arrived last in.
    pub straggler_steps: u64,
    /// The highest resident memory of its process and descendants, from /proc (0 where none was read).
    #[serde(default)]
    pub peak_host_rss_bytes: u64,
    /// Its processes' highest GPU memory, from NVML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gpu_mem_bytes: Option<u64>,
    /// Where its measured steps' time went, as the worker's `script.phases`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhasesSummary>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StragglerSummary {
    /// Steps every rank arrived for, and steps given up with ranks missing.
    pub steps: u64,
    pub incomplete_steps: u64,
    /// Arrival stamps refused as impossible (before the session began, after golow heard of them, or going back).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub implausible_arrivals: u64,
    /// Per step, the last rank's arrival after the first's.
    pub skew_ms: Option<Percentiles>,
    /// The rank named a straggler at the end, over the latest steps; `null` when none is beyond noise.
    pub verdict: Option<VerdictSummary>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct VerdictSummary {
    pub rank: u32,
    /// It was last in `last` of the latest `of` steps; its median lateness over them (after the first rank) is
    /// `late_ms`; named since step `since_step`.
    pub last: u64,
    pub of: u64,
    pub late_ms: f64,
    pub since_step: u64,
}

/// A script's ranks, by rank (the latest process of each), with how often each arrived last.
fn ranks(s: &ScriptState) -> Vec<RankSummary> {
    s.ranks()
        .into_iter()
        .filter_map(|p| {
            let rank = p.rank?;
            Some(RankSummary {
                rank,
                steps: p.steps,
                step_time_ms: p.step_interval.percentiles(),
                straggler_steps: s.arrivals.last_counts.get(&rank).copied().unwrap_or(0),
                peak_host_rss_bytes: p.peak_rss_bytes,
                peak_gpu_mem_bytes: p.peak_gpu_memory_bytes,
                phases: PhasesSummary::of(&p.phases),
            })
        })
        .collect()
}

fn stragglers(s: &ScriptState) -> Option<StragglerSummary> {
    let a = &s.arrivals;
    (a.complete + a.incomplete + a.implausible > 0).then(|| StragglerSummary {
        steps: a.complete,
        incomplete_steps: a.incomplete,
        implausible_arrivals: a.implausible,
        skew_ms: a.skew.percentiles(),
        verdict: a.verdict.map(|v| VerdictSummary {
            rank: v.rank,
            last: v.last,
            of: v.of,
            late_ms: v.late_ms,
            since_step: v.since_step,
        }),
    })
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CompileSummary {
    pub first_ms: f64,
    pub recompiles: u64,
    pub recompile_ms: f64,
    /// Inductor's cache: `cold` (everything built), `warm` (everything found) or `partial`.
    pub cache: Option<Cache>,
    /// Steps past the warm-up that a compilation fell in, kept out of the statistics.
    pub excluded_steps: u64,
    /// The model was compiled before the session (AOTInductor's package), not as it ran.
    #[serde(default)]
    pub ahead_of_time: bool,
}

impl From<&CompileState> for CompileSummary {
    fn from(c: &CompileState) -> CompileSummary {
        CompileSummary {
            first_ms: c.first_ms,
            recompiles: c.recompiles,
            recompile_ms: c.recompile_ms,
            cache: c.cache(),
            excluded_steps: c.excluded_steps,
            ahead_of_time: c.ahead_of_time,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Summary {
    pub golow_summary: u32,
    pub config: Option<SummaryConfig>,
    pub workers: Vec<WorkerSummary>,
    /// The machine's conditions while the session ran; `null` when it was recorded without them.
    #[serde(default)]
    pub machine: Option<super::conditions::Conditions>,
    /// Why NVML's per-process readings could not be given to the workers (said once by the sampler); absent when
    /// they could, or when no GPU was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_processes_unavailable: Option<String>,
    /// The first worker against each of the others, as the compare view judges a pair (absent with one worker).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<ComparisonSummary>,
}

/// Two workers of the session: what they are compared by, A's median over B's with its 95% interval, and the
/// verdict in words.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ComparisonSummary {
    pub a: String,
    pub b: String,
    pub by: Basis,
    /// `null`, with `low` and `high`, while either has too few measured steps (the verdict then says which).
    pub ratio: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// The interval leaves out 1.
    pub beyond_noise: bool,
    pub verdict: String,
}

impl ComparisonSummary {
    fn of(state: &State, a: &WorkerState, b: &WorkerState) -> ComparisonSummary {
        let pairing = Pairing::of(state, a, b);
        let verdict = match &pairing.times {
            Some(times) => super::ratio::verdict(&a.name, &b.name, times),
            None => format!("no verdict — {}", pairing.too_few_steps(a, b)),
        };
        ComparisonSummary {
            a: a.name.clone(),
            b: b.name.clone(),
            by: pairing.basis,
            ratio: pairing.times.map(|r| r.ratio),
            low: pairing.times.map(|r| r.low),
            high: pairing.times.map(|r| r.high),
            beyond_noise: pairing.times.is_some_and(|r| r.beyond_noise()),
            verdict,
        }
    }
}

/// The first worker against each of the others.
fn comparisons(state: &State) -> Vec<ComparisonSummary> {
    // An attached process shows no step until a hook reports them: there is nothing of it to compare.
    let measurable: Vec<&WorkerState> = state
        .workers
        .iter()
        .filter(|w| !(state.is_attached(w) && w.steps == 0))
        .collect();
    let Some((first, others)) = measurable.split_first() else {
        return Vec::new();
    };
    others
        .iter()
        .map(|other| ComparisonSummary::of(state, first, other))
        .collect()
}

impl Summary {
    pub fn from_state(state: &State) -> Summary {
        Summary {
            golow_summary: SUMMARY_VERSION,
            config: state.session.as_ref().map(SummaryConfig::from),
            workers: state
                .workers
                .iter()
                .map(|w| WorkerSummary::from_worker(state, w))
                .collect(),
            machine: state.machine.conditions(),
            gpu_processes_unavailable: state.gpu.processes_unavailable.clone(),
            comparisons: comparisons(state),
        }
    }
}

fn status(worker: &WorkerState) -> WorkerStatus {
    match worker.attached_end {
        Some(AttachedEnd::Ended) => return WorkerStatus::Ended,
        Some(AttachedEnd::Detached) => return WorkerStatus::Detached,
        None => {}
    }
    let end = worker.process_end;
    let own = worker.exit.as_ref().map(|e| e.status);
    if end.is_some_and(|e| e.stop_requested) || own == Some(ExitStatus::Stopped) {
        return WorkerStatus::Stopped;
    }
    // A `--cmd` worker sends no exit event: its exit code alone says how it ended.
    match (end, own) {
        (Some(e), Some(ExitStatus::Ok) | None) if e.exit_code == Some(0) => WorkerStatus::Ok,
        _ => WorkerStatus::Failed,
    }
}

impl WorkerSummary {
    pub fn from_worker(state: &State, w: &WorkerState) -> WorkerSummary {
        let status = status(w);
        let error = (status == WorkerStatus::Failed).then(|| failure_reason(state, w));
        let versions = match (&w.hello, &w.script) {
            (Some(hello), _) => hello.versions.clone(),
            (None, Some(script)) => script.versions(),
            (None, None) => BTreeMap::new(),
        };
        WorkerSummary {
            implementation: w.name.clone(),
            status,
            versions,
            exit_code: w.process_end.and_then(|e| e.exit_code),
            signal: w.process_end.and_then(|e| e.signal),
            steps: w.steps,
            warmup_steps: w.warmup_steps,
            samples: w.samples,
            compute_ms: w.compute.percentiles(),
            sample_time_ms: w.sample_time.percentiles(),
            step_time_ms: w.step_time.percentiles(),
            h2d_ms: w.h2d.percentiles(),
            h2d_bytes_per_step: w.h2d_bytes_per_step(),
            throughput_samples_per_s: w.throughput(),
            loss: Loss {
                first: w.first_loss,
                last: w.last_loss(),
            },
            accuracy: w
                .last_epoch
                .as_ref()
                .and_then(|e| e.eval_accuracy.or(e.train_accuracy)),
            peak_host_rss_bytes: w.peak_rss_bytes,
            peak_gpu_mem_bytes: w.peak_gpu_memory_bytes,
            gpu_sm_percent_mean: w.gpu_sm_percent_mean(),
            host_cpu_percent_mean: w.cpu_readings.get(),
            peak_host_threads: w.peak_threads,
            gpu_breakdown: w.gpu_activity.breakdown(),
            kernel_launches_per_step: w.gpu_activity.per_step.kernel_launches(),
            cupti_h2d_bytes_per_step: w.gpu_activity.per_step.h2d_bytes(),
            gpu_busy_ms_per_step: w.gpu_activity.per_step.busy_ms(),
            cupti_outside_steps: OutsideSteps::of(&w.gpu_activity.per_step),
            compile_ms: w.compile.as_ref().map(CompileState::total_ms),
            break_even_steps: state.break_even_steps(w),
            compile: w.compile.as_ref().map(CompileSummary::from),
            error,
            notice: state.unmeasured(w).map(String::from).or_else(|| {
                let phases = &w.script.as_ref()?.phases;
                Some(phases.input_bound_notice(phases.input_bound()?))
            }),
            script: w.script.as_ref().map(ScriptSummary::from_script),
            ranks: w.script.as_ref().map(ranks).unwrap_or_default(),
            stragglers: w.script.as_ref().and_then(stragglers),
            top_operators: top_operators(&w.operators),
            operators: operators(&w.operators),
            flops: Efficiency::of_worker(state, w).map(FlopsSummary::from),
            protocol_errors: w.first_protocol_error.as_ref().map(|first| ProtocolErrors {
                count: w.protocol_errors,
                first: first.clone(),
            }),
        }
    }
}

fn failure_reason(state: &State, w: &WorkerState) -> String {
    let end = match w.process_end {
        Some(ProcessEnd {
            signal: Some(sig), ..
        }) => format!("killed by signal {sig} ({})", signal_name(sig)),
        Some(ProcessEnd {
            exit_code: Some(code),
            ..
        }) => format!("exited with code {code}"),
        // A recording cut short (golow killed, a full disk) says nothing of how the worker ended.
        None if !state.ended => "the recording ends before the worker did".to_string(),
        _ => "did not finish".to_string(),
    };
    let detail = w.exit.as_ref().and_then(|e| e.message.clone()).or_else(|| {
        (!w.stderr_tail.is_empty())
            .then(|| w.stderr_tail.iter().cloned().collect::<Vec<_>>().join("\n"))
    });
    match detail {
        Some(detail) => format!("{end}: {detail}"),
        None => end,
    }
}

/// The conventional name of a signal, for messages.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    }
}
