//! The fold: `State::apply(record)` turns the event stream into everything the summary and the UI show.
//! The same fold serves live runs, replays and headless summaries, so they agree by construction.

pub mod compile;
pub mod conditions;
pub mod flops;
pub mod kernels;
pub mod operators;
pub mod phases;
mod placement;
pub mod ranks;
pub mod ratio;
pub mod script;
mod series;
mod stats;
mod summary;

use std::collections::VecDeque;

pub use ratio::{Interval, Ratio, median_interval, ratio_of_medians, verdict};
pub use series::{SERIES_CAPACITY, Series};
pub use stats::{Durations, Percentiles};
pub use summary::{
    ComparisonSummary, FlopsSummary, ScriptSummary, Summary, SummaryConfig, WorkerStatus,
    WorkerSummary,
};

use golow_protocol::config::{Mode, SessionConfig};
use golow_protocol::event::{
    BackwardPass, Body, Epoch, Hello, OptimizerStep, Record, Step, StepPhases, Stream, WorkerExit,
};

/// Workers and GPUs a state tracks at most: a recording from elsewhere cannot make it grow without
/// bound by naming ever new ones; records about others are dropped.
pub const MAX_WORKERS: usize = 64;
pub const MAX_GPUS: usize = 64;

/// Stderr lines kept per worker, to explain a failure.
pub const STDERR_TAIL_LINES: usize = 20;

/// What a worker printed, kept for the log overlay: the latest lines, each cut to a width no terminal exceeds (the
/// recording keeps them whole).
pub const OUTPUT_TAIL_LINES: usize = 500;
pub const OUTPUT_LINE_CHARS: usize = 400;
/// The first refused line's reason is kept to this many characters (it quotes the line).
pub const MAX_PROTOCOL_ERROR_CHARS: usize = 300;

/// A worker's time series, in seconds since the session started.
#[derive(Debug, Clone, Default)]
pub struct WorkerSeries {
    pub sample_ms: Series,
    pub step_ms: Series,
    pub throughput: Series,
    pub loss: Series,
    /// Fraction of each batch classified correctly.
    pub accuracy: Series,
    /// Evaluation accuracy at the end of each epoch.
    pub eval_accuracy: Series,
    pub h2d_ms: Series,
    pub h2d_gbps: Series,
    pub cpu_percent: Series,
    pub rss_bytes: Series,
    pub gpu_memory_bytes: Series,
    pub gpu_sm_percent: Series,
}

impl WorkerSeries {
    fn all(&self) -> [&Series; 12] {
        [
            &self.sample_ms,
            &self.step_ms,
            &self.throughput,
            &self.loss,
            &self.accuracy,
            &self.eval_accuracy,
            &self.h2d_ms,
            &self.h2d_gbps,
            &self.cpu_percent,
            &self.rss_bytes,
            &self.gpu_memory_bytes,
            &self.gpu_sm_percent,
        ]
    }
}

/// One GPU's readings.
#[derive(Debug, Clone, Default)]
pub struct GpuDeviceState {
    pub index: u32,
    pub name: String,
    pub driver: String,
    /// NVML's UUID; empty where the recording has none.
    pub uuid: String,
    pub memory_total_bytes: u64,
    pub utilization: Series,
    pub memory_used_bytes: Series,
    pub power_watts: Series,
    pub sm_clock_mhz: Series,
    pub pcie_rx_bytes_per_s: Series,
    pub pcie_tx_bytes_per_s: Series,
}

impl GpuDeviceState {
    fn all(&self) -> [&Series; 6] {
        [
            &self.utilization,
            &self.memory_used_bytes,
            &self.power_watts,
            &self.sm_clock_mhz,
            &self.pcie_rx_bytes_per_s,
            &self.pcie_tx_bytes_per_s,
        ]
    }
}

#[derive(Debug, Clone, Default)]
pub struct GpuState {
    /// Why NVML cannot be used here, when it cannot.
    pub unavailable: Option<String>,
    /// Why per-process readings (memory, SM share per worker) are missing though the devices are read.
    pub processes_unavailable: Option<String>,
    pub devices: Vec<GpuDeviceState>,
}

/// How an attached worker's process left the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachedEnd {
    /// It ended; how is not knowable (golow is not its parent).
    Ended,
    /// The session stopped watching it; it runs on.
    Detached,
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessEnd {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stop_requested: bool,
}

#[derive(Debug, Clone, Default)]
pub struct WorkerState {
    pub name: String,
    pub pid: Option<u32>,
    pub hello: Option<Hello>,
    /// Every step run, warm-up included.
    pub steps: u64,
    pub warmup_steps: u64,
    /// Samples of measured (non-warm-up) steps.
    pub samples: u64,
    pub compute: Durations,
    pub sample_time: Durations,
    /// Timed regions of a built-in step, or the wall interval between a `--cmd` worker's optimiser steps.
    pub step_time: Durations,
    /// A whole step as a loop sees it, to set a `--cmd` worker beside a built-in one: the built-in's data, copy and
    /// compute; the `--cmd` worker's interval between optimiser steps.
    pub step_interval: Durations,
    pub h2d: Durations,
    pub h2d_bytes_total: u64,
    pub h2d_bytes_steps: u64,
    pub first_loss: Option<f64>,
    pub last_step: Option<Step>,
    pub last_epoch: Option<Epoch>,
    pub peak_rss_bytes: u64,
    pub peak_gpu_memory_bytes: Option<u64>,
    /// Whether the worker's host batches were pinned (from its hello).
    pub pinned: Option<bool>,
    pub series: WorkerSeries,
    pub exit: Option<WorkerExit>,
    pub process_end: Option<ProcessEnd>,
    /// How an attached worker's process left the session (`golow attach`).
    pub attached_end: Option<AttachedEnd>,
    pub stderr_tail: VecDeque<String>,
    /// Lines from the worker that were refused (not JSON, not the schema), and why the first was.
    pub protocol_errors: u64,
    pub first_protocol_error: Option<String>,
    /// Kernels, copies and the GPU time breakdown, from the CUPTI collector.
    pub gpu_activity: kernels::GpuActivity,
    /// Every per-process SM reading of the session (the series keeps only the recent ones).
    pub gpu_sm_readings: Mean,
    /// Every CPU reading of its process tree (100 = one core), and the most threads the tree held at a reading.
    pub cpu_readings: Mean,
    pub peak_threads: Option<u32>,
    /// A `--cmd` worker's script, as golow's hook sees it; `None` before it reports.
    pub script: Option<script::ScriptState>,
    /// When the worker's process started, and when it last showed progress (a step or a forward pass), in seconds
    /// since the session started.
    pub started_s: Option<f64>,
    pub last_progress_s: Option<f64>,
    /// The latest lines it printed, on either stream.
    pub output_tail: VecDeque<(Stream, String)>,
    /// What compiling cost a level that compiles; `None` for the others (and before a first compilation).
    pub compile: Option<compile::CompileState>,
    /// It ran the steps its turn granted and waits for the next turn (alternating schedule): not stalled.
    pub awaiting_turn: bool,
    /// What its profiled steps' operators cost.
    pub operators: operators::Operators,
    /// What the fold made of its latest step (a built-in step, an optimiser step, a backward pass).
    pub latest_step: Option<StepFlags>,
}

/// What the fold made of a step: whether it fell in its warm-up, was profiled, or was skipped by a GradScaler. The
/// figures keep all three out of their medians; an export says them of each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepFlags {
    pub warmup: bool,
    pub profiled: bool,
    pub skipped: bool,
}

impl StepFlags {
    /// A built-in worker's step: as the worker said.
    fn builtin(step: &Step) -> StepFlags {
        StepFlags {
            warmup: step.warmup,
            profiled: step.profiled,
            skipped: false,
        }
    }

    /// A script's step that is number `position` (from 1) of what its warm-up counts.
    fn script(position: u64, warmup: u64, profiled: bool, skipped: bool) -> StepFlags {
        StepFlags {
            warmup: position <= warmup,
            profiled,
            skipped,
        }
    }

    /// A backward pass by the hook's numbering of its process's passes.
    fn numbered_pass(pass: &BackwardPass, warmup: u64) -> StepFlags {
        StepFlags::script(pass.pass.saturating_add(1), warmup, pass.profiled, false)
    }

    /// What a step-like record says of itself, for a step the fold keeps no count of (a worker past `MAX_WORKERS`):
    /// a built-in step's own flags; a script's step numbered as the hook numbers it. `None` for other records.
    pub fn as_recorded(body: &Body, warmup: u64) -> Option<StepFlags> {
        match body {
            Body::Step(step) => Some(StepFlags::builtin(step)),
            Body::OptimizerStep(step) => Some(StepFlags::script(
                step.step.saturating_add(1),
                warmup,
                step.profiled,
                step.skipped,
            )),
            Body::BackwardPass(pass) => Some(StepFlags::numbered_pass(pass, warmup)),
            _ => None,
        }
    }
}

/// The mean of every value added, in constant memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mean {
    count: u64,
    sum: f64,
}

impl Mean {
    pub fn add(&mut self, value: f64) {
        self.count += 1;
        self.sum += value;
    }

    /// `None` before the first value.
    pub fn get(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

impl WorkerState {
    /// The worker's mean SM utilisation over the session (NVML, per process); `None` without readings.
    pub fn gpu_sm_percent_mean(&self) -> Option<f64> {
        self.gpu_sm_readings.get()
    }

    pub fn new(name: &str) -> WorkerState {
        WorkerState {
            name: name.to_string(),
            ..Default::default()
        }
    }

    fn apply_step(&mut self, t: f64, step: &Step) {
        self.steps += 1;
        self.latest_step = Some(StepFlags::builtin(step));
        if self.first_loss.is_none() {
            self.first_loss = Some(step.loss);
        }
        let batch = f64::from(step.batch_size.max(1));
        let timed = step.h2d_ms.unwrap_or(0.0) + step.compute_ms;
        let span = step.start_ns.zip(step.end_ns);
        let trains = self
            .hello
            .as_ref()
            .is_some_and(|h| h.config.mode == Mode::Train);
        self.series.loss.push(t, step.loss);
        self.series
            .accuracy
            .push(t, f64::from(step.correct) / batch);
        let compiling = self.compile.as_ref().is_some_and(|c| c.fell_in(step.step));
        let kind = if trains && step.phase == Mode::Eval {
            kernels::StepKind::Evaluation
        } else if step.warmup || compiling || step.profiled {
            kernels::StepKind::Unmeasured
        } else {
            kernels::StepKind::Measured
        };
        self.gpu_activity.per_step.step(span, kind);
        if step.warmup {
            self.warmup_steps += 1;
        } else if let Some(compile) = self.compile.as_mut().filter(|c| c.fell_in(step.step)) {
            compile.excluded_steps += 1;
        } else if step.profiled {
            // Kept out of the timing figures: each level's recorder costs its own, and levels are compared
            // on steps nobody looked inside.
            self.operators.step(step.compute_ms, true);
        } else {
            self.samples += u64::from(step.batch_size);
            self.compute.record_ms(step.compute_ms);
            self.operators.step(step.compute_ms, false);
            self.sample_time.record_ms(timed / batch);
            self.step_time.record_ms(timed);
            self.step_interval.record_ms(step.data_ms + timed);
            self.series.sample_ms.push(t, timed / batch);
            self.series.step_ms.push(t, timed);
            if timed > 0.0 {
                self.series.throughput.push(t, batch / (timed / 1e3));
            }
            if let Some(h2d) = step.h2d_ms {
                self.h2d.record_ms(h2d);
                self.series.h2d_ms.push(t, h2d);
            }
            if let Some(bytes) = step.h2d_bytes {
                self.h2d_bytes_total = self.h2d_bytes_total.saturating_add(bytes);
                self.h2d_bytes_steps += 1;
                if let Some(ms) = step.h2d_ms.filter(|&ms| ms > 0.0) {
                    self.series
                        .h2d_gbps
                        .push(t, bytes as f64 / (ms / 1e3) / 1e9);
                }
            }
            self.gpu_activity.stepped(t, timed / 1e3);
        }
        self.last_step = Some(step.clone());
    }

    /// A `--cmd` worker's optimiser step: one of the worker's steps when it is its primary process's first
    /// optimiser's (see `script`), timed by its interval once past the warm-up; else counted where it belongs.
    fn apply_optimizer_step(
        &mut self,
        t: f64,
        step: &OptimizerStep,
        warmup: u64,
        origin_ns: Option<u64>,
    ) {
        self.last_progress_s = Some(t);
        let since_start = self.started_s.map(|start| t - start);
        let clock = origin_ns.map(|origin_ns| script::MonitorClock::at(origin_ns, t));
        let script = self.script.get_or_insert_with(Default::default);
        if script.takes_over_from_backward(step) | script.replaced_stand_in() {
            self.forget_steps();
        }
        let script = self.script.get_or_insert_with(Default::default);
        let role = script.step(step, warmup, t, since_start, clock);
        let position = match role {
            script::StepRole::Iteration => {
                self.script_step(
                    t,
                    step.interval_ms,
                    step.phases,
                    step.profiled,
                    warmup,
                    step.t_ns,
                );
                self.script_loss(t, step.loss);
                self.steps
            }
            script::StepRole::Skipped => {
                // What the script reported for a step that was not taken is not the next step's.
                script.pending_samples = 0.0;
                script.position(step)
            }
            script::StepRole::Other => script.position(step),
        };
        self.latest_step = Some(StepFlags::script(
            position,
            warmup,
            step.profiled,
            step.skipped,
        ));
    }

    /// A backward pass of a `--cmd` worker whose primary process trains without an optimiser: its step.
    fn apply_backward_pass(&mut self, t: f64, pass: &BackwardPass, warmup: u64) {
        self.last_progress_s = Some(t);
        let script = self.script.get_or_insert_with(Default::default);
        let role = script.backward_pass(pass);
        if script.replaced_stand_in() {
            self.forget_steps();
        }
        self.latest_step = match role {
            script::StepRole::Iteration => {
                let script = self.script.get_or_insert_with(Default::default);
                script.losses_by_backward |= pass.loss.is_some();
                self.script_step(
                    t,
                    pass.interval_ms,
                    pass.phases,
                    pass.profiled,
                    warmup,
                    pass.t_ns,
                );
                self.script_loss(t, pass.loss);
                Some(StepFlags::script(self.steps, warmup, pass.profiled, false))
            }
            // Another process's passes are no count of the fold's.
            _ => Some(StepFlags::numbered_pass(pass, warmup)),
        };
    }

    /// The loss the hook read from one of the worker's steps: charted as a reported one is (a script that reports
    /// its own has none from the hook).
    fn script_loss(&mut self, t: f64, loss: Option<f64>) {
        if let Some(loss) = loss.filter(|l| l.is_finite()) {
            self.first_loss.get_or_insert(loss);
            self.series.loss.push(t, loss);
        }
    }

    /// The step figures a `--cmd` worker's backward passes made while they were its steps: its primary process has
    /// an optimiser after all (its first steps come after several backward passes, as under gradient accumulation).
    fn forget_steps(&mut self) {
        self.steps = 0;
        self.warmup_steps = 0;
        self.samples = 0;
        self.sample_time = Durations::default();
        self.step_time = Durations::default();
        self.step_interval = Durations::default();
        self.series.step_ms = Series::default();
        self.series.sample_ms = Series::default();
        self.series.throughput = Series::default();
        self.operators = operators::Operators::default();
        if let Some(script) = self.script.as_mut() {
            // Those steps' losses were single backward passes' (a GAN's half, a micro-batch): not the steps' to come.
            if std::mem::take(&mut script.losses_by_backward) {
                self.first_loss = None;
                self.series.loss = Series::default();
            }
            // The DataLoader is said once: it stays.
            let loader = script.phases.loader;
            script.phases = phases::PhasesState::default();
            script.phases.loader = loader;
        }
    }

    /// One of a `--cmd` worker's steps, ending `interval_ms` after the one before: counted, and past the warm-up
    /// timed, with its phases.
    fn script_step(
        &mut self,
        t: f64,
        interval_ms: Option<f64>,
        step_phases: Option<StepPhases>,
        profiled: bool,
        warmup: u64,
        end_ns: Option<u64>,
    ) {
        let span = end_ns.zip(interval_ms).and_then(|(end, ms)| {
            let ms = Some(ms).filter(|ms| ms.is_finite() && *ms >= 0.0)?;
            Some((end.saturating_sub((ms * 1e6) as u64), end))
        });
        let kind = if self.steps < warmup || profiled {
            kernels::StepKind::Unmeasured
        } else {
            kernels::StepKind::Measured
        };
        self.gpu_activity.per_step.step(span, kind);
        let script = self.script.get_or_insert_with(Default::default);
        let samples = script.step_samples(step_phases.as_ref());
        // Said once, whenever that step falls: a warm-up step's too.
        if let Some(loader) = step_phases.and_then(|p| p.loader) {
            script.phases.loader = Some(loader);
        }
        self.steps += 1;
        if self.steps <= warmup {
            self.warmup_steps += 1;
            return;
        }
        let Some(ms) = interval_ms else { return };
        self.operators.step(ms, profiled);
        if profiled {
            // Kept out of the timing figures, as a built-in worker's profiled steps are.
            return;
        }
        if let Some(split) = &step_phases {
            script.phases.record(t, ms, split);
        }
        self.step_time.record_ms(ms);
        self.step_interval.record_ms(ms);
        self.series.step_ms.push(t, ms);
        self.gpu_activity.stepped(t, ms / 1e3);
        if samples >= 1.0 && ms.is_finite() && ms > 0.0 {
            self.samples += samples as u64;
            self.sample_time.record_ms(ms / samples);
            self.series.sample_ms.push(t, ms / samples);
            self.series.throughput.push(t, samples / (ms / 1e3));
        }
    }

    /// A forward pass of a `--cmd` worker's model before its first optimiser step: what an evaluation loop is
    /// charted by.
    fn apply_forward_pass(
        &mut self,
        t: f64,
        pass: &golow_protocol::event::ForwardPass,
        warmup: u64,
    ) {
        self.last_progress_s = Some(t);
        let script = self.script.get_or_insert_with(Default::default);
        if script.forward_pass(pass, warmup) && self.steps == 0 {
            self.series
                .step_ms
                .push(t, pass.interval_ms.unwrap_or(pass.ms));
        }
    }

    /// A number the script reported: its loss and accuracy are charted like a built-in worker's.
    fn apply_scalar(&mut self, t: f64, scalar: &golow_protocol::event::Scalar) {
        let script = self.script.get_or_insert_with(Default::default);
        if !script.scalar(scalar.process, &scalar.name, scalar.value) {
            return;
        }
        match scalar.name.as_str() {
            "loss" => {
                self.first_loss.get_or_insert(scalar.value);
                self.series.loss.push(t, scalar.value);
            }
            "accuracy" if (0.0..=1.0).contains(&scalar.value) => {
                self.series.accuracy.push(t, scalar.value);
            }
            _ => {}
        }
    }

    /// Whether what `process` says of operators is the worker's: a script's figures are its primary process's
    /// (rank 0's), and a built-in worker has one process.
    fn is_primary(&self, process: u32) -> bool {
        self.script
            .as_ref()
            .is_none_or(|s| s.primary.is_none_or(|p| p == process))
    }

    /// The latest loss: a built-in worker's last step's, or a script's last, as the hook read it or the script
    /// reported it.
    pub fn last_loss(&self) -> Option<f64> {
        match &self.last_step {
            Some(step) => Some(step.loss),
            None => self.series.loss.last().map(|(_, loss)| loss),
        }
    }

    /// Samples per second at the median time per sample: a rate that orders workers as their time per sample does
    /// (a mean beside a median could order them the other way). From the cached percentiles, which views ask for
    /// every frame anyway.
    pub fn throughput(&self) -> Option<f64> {
        self.sample_time
            .median_ms()
            .filter(|&ms| ms > 0.0)
            .map(|ms| 1e3 / ms)
    }

    /// Mean host-to-device bytes per measured step.
    pub fn h2d_bytes_per_step(&self) -> Option<u64> {
        (self.h2d_bytes_steps > 0).then(|| self.h2d_bytes_total / self.h2d_bytes_steps)
    }

    /// Where the worker's process is in its life, as status displays show it.
    pub fn activity(&self) -> Activity {
        match self.attached_end {
            Some(AttachedEnd::Ended) => return Activity::Ended,
            Some(AttachedEnd::Detached) => return Activity::Detached,
            None => {}
        }
        match (&self.process_end, self.pid) {
            (Some(end), _) if end.stop_requested => Activity::Stopped,
            (Some(end), _) if end.exit_code == Some(0) => Activity::Done,
            (Some(_), _) => Activity::Failed,
            (None, None) => Activity::Waiting,
            (None, Some(_)) => Activity::Running,
        }
    }
}

/// A worker process's state, for display (the summary's status also weighs the worker's own exit event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Not started yet (a later turn of the sequential schedule).
    Waiting,
    Running,
    Stopped,
    Done,
    Failed,
    /// An attached process that ended, how golow cannot know.
    Ended,
    /// An attached process the session stopped watching, which runs on.
    Detached,
}

impl Activity {
    /// The worker's process is no longer watched: it ended, or the session let it go.
    pub fn is_over(self) -> bool {
        !matches!(self, Activity::Waiting | Activity::Running)
    }
}

#[derive(Debug, Clone, Default)]
pub struct State {
    pub session: Option<SessionConfig>,
    pub workers: Vec<WorkerState>,
    pub gpu: GpuState,
    /// Timestamp of the latest record, in milliseconds since the session started.
    pub t_ms: f64,
    pub ended: bool,
    /// Why the session's recording stopped while the session went on.
    pub recording_failed: Option<String>,
    /// The whole machine's load while the session ran.
    pub machine: conditions::MachineLoad,
}

impl State {
    /// Seconds since the start from which every time series is complete in memory (0 while none
    /// has dropped a point): an earlier window needs the recording.
    pub fn complete_from_s(&self) -> f64 {
        let workers = self.workers.iter().flat_map(|w| w.series.all());
        let devices = self.gpu.devices.iter().flat_map(GpuDeviceState::all);
        workers
            .chain(devices)
            .filter_map(Series::complete_from)
            .fold(0.0, f64::max)
    }

    /// Why a worker that ran shows no step: a `--cmd` worker whose script stepped no optimiser and ran no model golow
    /// could see. `None` once anything was measured.
    pub fn unmeasured(&self, worker: &WorkerState) -> Option<&'static str> {
        if self.is_attached(worker) {
            return (worker.steps == 0).then_some(
                "attached: no step seen; steps, phases and loss come from golow's step hook, loaded into the tree's \
                 Python processes (golow's lines say where it was and was not), from their next optimiser step on; \
                 the rest are /proc and NVML readings",
            );
        }
        let command = self
            .session
            .as_ref()
            .is_some_and(|s| s.commands.contains_key(&worker.name));
        let forward = worker.script.as_ref().map_or(0, |s| s.forward.passes);
        (command && worker.steps == 0 && forward == 0 && worker.pid.is_some()).then_some(
            "no step seen: golow counts torch.optim optimiser steps (or, with none, backward passes) and, before the \
             first, forward passes of the model (the first module with parameters the script calls)",
        )
    }

    /// Whether `worker` watches a process golow did not start (`golow attach`).
    pub fn is_attached(&self, worker: &WorkerState) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.attached.contains_key(&worker.name))
    }

    /// How long a running worker has shown no progress (no step, no forward pass, no compilation), once that is
    /// `stall_after_s` or more; `None` while it progresses, or when it is not running. A worker waiting for its turn
    /// progresses while the session does: its quiet time is the whole session's.
    pub fn stalled_for_s(&self, worker: &WorkerState) -> Option<f64> {
        // An attached process shows steps only once a hook reports them: before, its quiet is no news.
        let unhooked = self.is_attached(worker) && worker.steps == 0;
        if worker.activity() != Activity::Running
            || self.ended
            || unhooked
            || self.compiling_for_s(worker).is_some()
        {
            return None;
        }
        let limit = self
            .session
            .as_ref()
            .map_or(golow_protocol::config::DEFAULT_STALL_AFTER_S, |s| {
                s.stall_after_s
            });
        let mut last = worker.last_progress_s?;
        if worker.awaiting_turn {
            let others = self
                .workers
                .iter()
                .filter(|w| w.activity() == Activity::Running);
            if others.clone().any(|w| self.compiling_for_s(w).is_some()) {
                return None;
            }
            last = others
                .filter_map(|w| w.last_progress_s)
                .fold(last, f64::max);
        }
        let quiet = self.t_ms / 1e3 - last;
        (quiet >= limit as f64).then_some(quiet)
    }

    /// How long the compilation `worker` is in has run; `None` when it is not compiling.
    pub fn compiling_for_s(&self, worker: &WorkerState) -> Option<f64> {
        if worker.activity() != Activity::Running || self.ended {
            return None;
        }
        let since = worker.compile.as_ref()?.compiling_since_s?;
        Some((self.t_ms / 1e3 - since).max(0.0))
    }

    /// The steps after which `worker` has paid its compile time back against eager `pytorch` in this session, by
    /// their median step times; `None` when it does not compile, is no faster, or no eager worker ran.
    pub fn break_even_steps(&self, worker: &WorkerState) -> Option<u64> {
        let compile_ms = worker.compile.as_ref()?.total_ms();
        let eager = self.worker(golow_protocol::config::Impl::Pytorch.name())?;
        compile::break_even_steps(
            compile_ms,
            worker.step_time.median_ms()?,
            eager.step_time.median_ms()?,
        )
    }

    pub fn worker(&self, name: &str) -> Option<&WorkerState> {
        self.workers.iter().find(|w| w.name == name)
    }

    /// The worker called `name`, added on first sight while fewer than `MAX_WORKERS` exist.
    fn worker_mut(&mut self, name: &str) -> Option<&mut WorkerState> {
        match self.workers.iter().position(|w| w.name == name) {
            Some(i) => Some(&mut self.workers[i]),
            None if self.workers.len() < MAX_WORKERS => {
                self.workers.push(WorkerState::new(name));
                self.workers.last_mut()
            }
            None => None,
        }
    }

    pub fn apply(&mut self, record: &Record) {
        self.t_ms = self.t_ms.max(record.t_ms);
        let t = record.t_ms / 1e3;
        match &record.body {
            Body::SessionStart(config) => {
                for name in &config.workers {
                    self.worker_mut(name);
                }
                self.session = Some(config.as_ref().clone());
            }
            Body::SessionEnd => self.ended = true,
            Body::RecordingFailed { reason } => self.recording_failed = Some(reason.clone()),
            Body::MachineLoad {
                load_1m,
                busy_percent,
                steal_percent,
                others_percent,
                cpu_mhz,
            } => self.machine.apply(conditions::LoadReading {
                load_1m: *load_1m,
                busy_percent: *busy_percent,
                steal_percent: *steal_percent,
                others_percent: *others_percent,
                cpu_mhz: *cpu_mhz,
            }),
            Body::GpuUnavailable { reason } => self.gpu.unavailable = Some(reason.clone()),
            Body::GpuProcessesUnavailable { reason } => {
                self.gpu.processes_unavailable = Some(reason.clone());
            }
            Body::GpuInfo {
                index,
                name,
                memory_total_bytes,
                driver,
                uuid,
            } => {
                let Some(device) = self.gpu_device_mut(*index) else {
                    return;
                };
                device.name = name.clone();
                device.uuid = uuid.clone();
                device.driver = driver.clone();
                device.memory_total_bytes = *memory_total_bytes;
            }
            Body::GpuDevice {
                index,
                utilization_percent,
                memory_used_bytes,
                power_watts,
                sm_clock_mhz,
            } => {
                let Some(device) = self.gpu_device_mut(*index) else {
                    return;
                };
                push_some(
                    &mut device.utilization,
                    t,
                    utilization_percent.map(f64::from),
                );
                push_some(
                    &mut device.memory_used_bytes,
                    t,
                    memory_used_bytes.map(|b| b as f64),
                );
                push_some(&mut device.power_watts, t, *power_watts);
                push_some(&mut device.sm_clock_mhz, t, sm_clock_mhz.map(f64::from));
            }
            Body::GpuPcie {
                index,
                rx_bytes_per_s,
                tx_bytes_per_s,
            } => {
                let Some(device) = self.gpu_device_mut(*index) else {
                    return;
                };
                let as_f64 = |v: &Option<u64>| v.map(|b| b as f64);
                push_some(&mut device.pcie_rx_bytes_per_s, t, as_f64(rx_bytes_per_s));
                push_some(&mut device.pcie_tx_bytes_per_s, t, as_f64(tx_bytes_per_s));
            }
            body => {
                let Some(name) = &record.worker else { return };
                let warmup = self.session.as_ref().map_or(0, |s| s.warmup);
                let origin_ns = self.session.as_ref().and_then(|s| s.monotonic_origin_ns);
                if let Some(worker) = self.worker_mut(name) {
                    apply_worker_event(worker, t, body, warmup, origin_ns);
                }
            }
        }
    }

    fn gpu_device_mut(&mut self, index: u32) -> Option<&mut GpuDeviceState> {
        match self.gpu.devices.iter().position(|d| d.index == index) {
            Some(i) => Some(&mut self.gpu.devices[i]),
            None if self.gpu.devices.len() < MAX_GPUS => {
                self.gpu.devices.push(GpuDeviceState {
                    index,
                    ..Default::default()
                });
                self.gpu.devices.last_mut()
            }
            None => None,
        }
    }
}

fn push_some(series: &mut Series, t: f64, value: Option<f64>) {
    if let Some(v) = value {
        series.push(t, v);
    }
}

fn apply_worker_event(
    worker: &mut WorkerState,
    t: f64,
    body: &Body,
    warmup: u64,
    origin_ns: Option<u64>,
) {
    match body {
        Body::WorkerStarted { pid, .. } => {
            worker.pid = Some(*pid);
            worker.started_s = Some(t);
            worker.last_progress_s = Some(t);
        }
        Body::Hello(hello) => {
            worker.pinned = Some(hello.config.pinned && hello.device.starts_with("cuda"));
            worker.hello = Some(hello.as_ref().clone());
        }
        Body::Step(step) => {
            worker.last_progress_s = Some(t);
            worker.awaiting_turn = false;
            worker.apply_step(t, step);
        }
        Body::TurnEnd(_) => worker.awaiting_turn = true,
        Body::OptimizerStep(step) => worker.apply_optimizer_step(t, step, warmup, origin_ns),
        Body::ForwardPass(pass) => worker.apply_forward_pass(t, pass, warmup),
        Body::BackwardPass(pass) => worker.apply_backward_pass(t, pass, warmup),
        Body::Scalar(scalar) => worker.apply_scalar(t, scalar),
        Body::ScriptProcess(hello) => worker
            .script
            .get_or_insert_with(Default::default)
            .hello(hello),
        Body::Optimizer(optimizer) => worker
            .script
            .get_or_insert_with(Default::default)
            .optimizer(optimizer),
        Body::Phase(phase) => worker
            .script
            .get_or_insert_with(Default::default)
            .phase(phase.process, &phase.name),
        Body::Epoch(epoch) => {
            if epoch.complete && epoch.train_loss.is_some() && epoch.eval_loss.is_some() {
                worker.gpu_activity.per_step.evaluated();
            }
            // An accuracy is a fraction; anything else a worker reports is not one.
            let fraction = |a: Option<f64>| a.filter(|a| (0.0..=1.0).contains(a));
            let epoch = Epoch {
                train_accuracy: fraction(epoch.train_accuracy),
                eval_accuracy: fraction(epoch.eval_accuracy),
                ..epoch.clone()
            };
            if let Some(accuracy) = epoch.eval_accuracy.filter(|_| epoch.complete) {
                worker.series.eval_accuracy.push(t, accuracy);
            }
            worker.last_epoch = Some(epoch);
        }
        Body::Exit(exit) => worker.exit = Some(exit.clone()),
        Body::Compiling(compiling) => {
            worker.last_progress_s = Some(t);
            let state = worker.compile.get_or_insert_with(Default::default);
            state.begin(t, compiling);
        }
        Body::Compile(compile) => {
            worker.last_progress_s = Some(t);
            let state = worker.compile.get_or_insert_with(Default::default);
            state.apply(compile);
        }
        Body::Output { stream, line } => {
            if *stream == Stream::Stderr {
                if worker.stderr_tail.len() == STDERR_TAIL_LINES {
                    worker.stderr_tail.pop_front();
                }
                worker.stderr_tail.push_back(line.clone());
            }
            if worker.output_tail.len() == OUTPUT_TAIL_LINES {
                worker.output_tail.pop_front();
            }
            let kept = match line.char_indices().nth(OUTPUT_LINE_CHARS) {
                Some((cut, _)) => format!("{}…", &line[..cut]),
                None => line.clone(),
            };
            worker.output_tail.push_back((*stream, kept));
        }
        Body::ProtocolError { message } => {
            worker.protocol_errors += 1;
            worker
                .first_protocol_error
                .get_or_insert_with(|| message.chars().take(MAX_PROTOCOL_ERROR_CHARS).collect());
        }
        // A process that holds no memory has exited and waits for its parent to reap it: the sampler's reading
        // of it is not of a running worker, and taken as one would end every memory chart and figure at zero.
        Body::Process { rss_bytes: 0, .. } => {}
        Body::Process {
            pid,
            rss_bytes,
            peak_rss_bytes,
            cpu_percent,
            rank: Some(rank),
            ..
        } => {
            if let Some(script) = &mut worker.script {
                let reading = script::RankReading::Host {
                    rss_bytes: *rss_bytes,
                    peak_rss_bytes: *peak_rss_bytes,
                    cpu_percent: *cpu_percent,
                };
                script.rank_reading(t, *pid, *rank, &reading);
            }
        }
        Body::GpuProcess {
            pid,
            memory_bytes,
            sm_percent,
            rank: Some(rank),
            ..
        } => {
            if let Some(script) = &mut worker.script {
                let reading = script::RankReading::Gpu {
                    memory_bytes: *memory_bytes,
                    sm_percent: *sm_percent,
                };
                script.rank_reading(t, *pid, *rank, &reading);
            }
        }
        Body::Process {
            rss_bytes,
            peak_rss_bytes,
            cpu_percent,
            rank: None,
            threads,
            ..
        } => {
            worker.peak_rss_bytes = worker.peak_rss_bytes.max(*peak_rss_bytes);
            worker.series.rss_bytes.push(t, *rss_bytes as f64);
            push_some(&mut worker.series.cpu_percent, t, *cpu_percent);
            if let Some(cpu) = cpu_percent {
                worker.cpu_readings.add(*cpu);
            }
            if let Some(threads) = threads {
                worker.peak_threads = Some(worker.peak_threads.unwrap_or(0).max(*threads));
            }
        }
        Body::GpuProcess {
            memory_bytes,
            sm_percent,
            rank: None,
            ..
        } => {
            if let Some(bytes) = memory_bytes {
                worker.peak_gpu_memory_bytes =
                    Some(worker.peak_gpu_memory_bytes.unwrap_or(0).max(*bytes));
                worker.series.gpu_memory_bytes.push(t, *bytes as f64);
            }
            push_some(
                &mut worker.series.gpu_sm_percent,
                t,
                sm_percent.map(f64::from),
            );
            if let Some(sm) = sm_percent {
                worker.gpu_sm_readings.add(f64::from(*sm));
            }
        }
        Body::Kernels(window) => worker.gpu_activity.apply(window, origin_ns),
        Body::Operators(window) => {
            if worker.is_primary(window.process) {
                worker.operators.apply(t, window);
            }
        }
        Body::ProfilingOff(off) => {
            if worker.is_primary(off.process) {
                worker.operators.turned_off(&off.reason);
            }
        }
        Body::Collector(status) => worker.gpu_activity.collector = Some(status.clone()),
        Body::WorkerExited {
            exit_code,
            signal,
            stop_requested,
        } => {
            worker.process_end = Some(ProcessEnd {
                exit_code: *exit_code,
                signal: *signal,
                stop_requested: *stop_requested,
            });
        }
        Body::AttachedEnd { detached } => {
            worker.attached_end = Some(if *detached {
                AttachedEnd::Detached
            } else {
                AttachedEnd::Ended
            });
        }
        Body::RankProcess {
            pid,
            rank,
            local_rank,
            world_size,
        } => worker
            .script
            .get_or_insert_with(Default::default)
            .rank_process(*pid, *rank, *local_rank, *world_size),
        Body::SessionStart(_)
        | Body::SessionEnd
        | Body::GpuUnavailable { .. }
        | Body::GpuProcessesUnavailable { .. }
        | Body::RecordingFailed { .. }
        | Body::MachineLoad { .. }
        | Body::GpuInfo { .. }
        | Body::GpuDevice { .. }
        | Body::GpuPcie { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::config::Mode;
    use golow_protocol::event::{ExitStatus, Stream};

    #[test]
    fn a_stream_naming_endless_workers_and_gpus_stays_bounded() {
        let mut state = State::default();
        for i in 0..1000u32 {
            state.apply(&Record::new(
                f64::from(i),
                Some(format!("w{i}").into()),
                step(0, f64::NAN, false),
            ));
            state.apply(&Record::new(
                f64::from(i),
                None,
                Body::GpuDevice {
                    index: i,
                    utilization_percent: Some(u32::MAX),
                    memory_used_bytes: Some(u64::MAX),
                    power_watts: Some(f64::INFINITY),
                    sm_clock_mhz: None,
                },
            ));
        }
        assert_eq!(state.workers.len(), MAX_WORKERS);
        assert_eq!(state.gpu.devices.len(), MAX_GPUS);
        assert_eq!(state.workers[0].steps, 1);
    }

    fn step(step: u64, compute_ms: f64, warmup: bool) -> Body {
        Body::Step(Step {
            step,
            epoch: 0,
            phase: Mode::Train,
            batch_size: 10,
            data_ms: 0.1,
            h2d_ms: Some(1.0),
            h2d_bytes: Some(1000),
            compute_ms,
            loss: 2.0 - step as f64 * 0.1,
            correct: 3,
            warmup,
            profiled: false,
            start_ns: None,
            end_ns: None,
        })
    }

    fn fold(worker: &str, bodies: Vec<Body>) -> State {
        let mut state = State::default();
        for (i, body) in bodies.into_iter().enumerate() {
            state.apply(&Record::new(i as f64, Some(worker.into()), body));
        }
        state
    }

    /// Profiled steps are kept out of every median of a `--cmd` worker: its step time, its optimiser's and its
    /// process's, so that the table and the line under it give one figure.
    #[test]
    fn a_script_s_medians_leave_profiled_steps_out_everywhere() {
        let bodies = (0..40)
            .map(|i| {
                // Every other step recorded its operators, at three times the cost.
                let profiled = i % 2 == 1;
                let ms = if profiled { 30.0 } else { 10.0 };
                Body::OptimizerStep(golow_protocol::event::OptimizerStep {
                    profiled,
                    ..golow_protocol::samples::optimizer_step(i, (i > 0).then_some(ms))
                })
            })
            .collect();
        let state = fold("script", bodies);
        let summary = Summary::from_state(&state);
        let w = &summary.workers[0];
        let script = w.script.as_ref().unwrap();
        let medians = [
            w.step_time_ms.unwrap().p50,
            script.optimizers[0].step_time_ms.unwrap().p50,
            script.processes[0].step_time_ms.unwrap().p50,
        ];
        assert!(
            medians.iter().all(|m| (m - 10.0).abs() < 0.01),
            "{medians:?}"
        );
    }

    fn backward_pass(pass: u64, interval_ms: Option<f64>) -> Body {
        Body::BackwardPass(golow_protocol::event::BackwardPass {
            process: 0,
            pass,
            interval_ms,
            phases: interval_ms
                .map(|ms| golow_protocol::samples::step_phases(ms / 2.0, 1.0, 2.0, 0.0)),
            profiled: false,
            loss: None,
            t_ns: None,
        })
    }

    fn phased_step(step: u64, interval_ms: Option<f64>, skipped: bool) -> Body {
        Body::OptimizerStep(golow_protocol::event::OptimizerStep {
            phases: interval_ms
                .map(|ms| golow_protocol::samples::step_phases(1.0, ms / 4.0, ms / 4.0, 1.0)),
            skipped,
            ..golow_protocol::samples::optimizer_step(step, interval_ms)
        })
    }

    /// A script that updates its parameters by hand steps by its backward passes; one whose optimiser steps only
    /// after several (gradient accumulation) has those passes forgotten once it does.
    #[test]
    fn backward_passes_are_steps_until_an_optimiser_steps() {
        let by_hand: Vec<Body> = (0..10)
            .map(|i| backward_pass(i, (i > 0).then_some(40.0)))
            .collect();
        let state = fold("script", by_hand.clone());
        let summary = Summary::from_state(&state);
        let w = &summary.workers[0];
        let script = w.script.as_ref().unwrap();
        assert_eq!(w.steps, 10);
        assert_eq!(script.steps_counted_by.as_deref(), Some("backward"));
        let phases = script.phases.as_ref().unwrap();
        // Medians come from histograms that keep three significant digits.
        assert!((phases.data.share - 0.5).abs() < 1e-3, "{phases:?}");
        assert!(script.input_bound);
        assert!(
            w.notice
                .as_deref()
                .unwrap()
                .starts_with("input-bound: waiting on data takes 50%")
        );

        let then_an_optimiser = by_hand
            .into_iter()
            .chain((0..6).map(|i| phased_step(i, (i > 0).then_some(20.0), false)))
            .collect();
        let state = fold("script", then_an_optimiser);
        let summary = Summary::from_state(&state);
        let w = &summary.workers[0];
        let script = w.script.as_ref().unwrap();
        assert_eq!(w.steps, 6);
        assert_eq!(state.workers[0].step_time.len(), 5);
        assert!((w.step_time_ms.unwrap().p50 - 20.0).abs() < 0.01);
        assert_eq!(script.steps_counted_by.as_deref(), Some("optimizer"));
        assert_eq!(state.workers[0].script.as_ref().unwrap().phases.steps(), 5);
        assert!(!script.input_bound);
        assert_eq!(w.notice, None);
        // Backward passes after the optimiser's first step are no steps.
        let mut state = state;
        state.apply(&Record::new(
            99.0,
            Some("script".into()),
            backward_pass(10, Some(40.0)),
        ));
        assert_eq!(state.workers[0].steps, 6);
    }

    #[test]
    fn skipped_steps_are_counted_apart_and_kept_out_of_the_step_figures() {
        let bodies = vec![
            phased_step(0, None, false),
            phased_step(1, Some(10.0), false),
            phased_step(2, Some(500.0), true),
            phased_step(2, Some(10.0), false),
            phased_step(3, Some(10.0), false),
        ];
        let state = fold("script", bodies);
        let summary = Summary::from_state(&state);
        let w = &summary.workers[0];
        let script = w.script.as_ref().unwrap();
        assert_eq!((w.steps, script.skipped_steps), (4, 1));
        assert!(
            (w.step_time_ms.unwrap().max - 10.0).abs() < 0.01,
            "{:?}",
            w.step_time_ms
        );
        assert_eq!(script.optimizers[0].steps, 4);
        assert_eq!(script.micro_batches_per_step, Some(1));
        let phases = script.phases.as_ref().unwrap();
        let shares = [
            phases.data.share,
            phases.forward.share,
            phases.backward.share,
            phases.optimizer.share,
            phases.other.share,
        ];
        assert!(
            (shares.iter().sum::<f64>() - 1.0).abs() < 1e-9,
            "{shares:?}"
        );
        assert!((phases.other.p50_ms - 3.0).abs() < 0.01, "{phases:?}");
    }

    #[test]
    fn every_series_that_dropped_points_says_where_memory_starts() {
        let mut state = State::default();
        assert_eq!(state.complete_from_s(), 0.0);
        // PCIe readings only: more than a series holds.
        for i in 0..SERIES_CAPACITY as u32 + 100 {
            state.apply(&Record::new(
                f64::from(i) * 100.0,
                None,
                Body::GpuPcie {
                    index: 0,
                    rx_bytes_per_s: Some(1),
                    tx_bytes_per_s: None,
                },
            ));
        }
        assert!(state.complete_from_s() > 0.0);
    }

    fn compile_event(step: Option<u64>, recompile: bool, ms: f64) -> Body {
        Body::Compile(golow_protocol::event::Compile {
            step,
            phase: Mode::Train,
            trigger: golow_protocol::event::CompileTrigger::Dynamo,
            recompile,
            ms,
            cache_hits: 0,
            cache_misses: 2,
        })
    }

    #[test]
    fn a_step_a_compilation_fell_in_is_not_measured_and_the_compile_time_is_paid_back() {
        let mut state = State::default();
        let mut apply = |worker: &str, body: Body| {
            let t = state.t_ms + 1.0;
            state.apply(&Record::new(t, Some(worker.into()), body));
        };
        for i in 0..6 {
            apply("pytorch", step(i, 10.0, false));
        }
        // The first compilation falls in a step past the warm-up (--warmup 0), a recompilation in step 4.
        apply("compile", compile_event(Some(0), false, 3_000.0));
        apply("compile", step(0, 3_008.0, false));
        for i in 1..4 {
            apply("compile", step(i, 7.0, false));
        }
        apply("compile", compile_event(Some(4), true, 1_000.0));
        apply("compile", step(4, 1_007.0, false));
        apply("compile", step(5, 7.0, false));
        let summary = Summary::from_state(&state);
        let eager = &summary.workers[0];
        let compiled = &summary.workers[1];
        assert_eq!((eager.compile_ms, eager.break_even_steps), (None, None));
        assert!(eager.compile.is_none());
        assert_eq!(compiled.steps, 6);
        assert_eq!(compiled.samples, 40, "{compiled:?}");
        assert!((compiled.compute_ms.unwrap().max - 7.0).abs() < 0.01);
        assert_eq!(compiled.compile_ms, Some(4_000.0));
        let detail = compiled.compile.as_ref().unwrap();
        assert_eq!((detail.recompiles, detail.excluded_steps), (1, 2));
        assert_eq!(detail.cache, Some(compile::Cache::Cold));
        // Steps of 1 ms copy + 7 ms against 1 + 10: 3 ms saved a step pays 4 s back after about 1,334 steps (by the
        // histograms' medians, which keep three significant digits).
        let saved = eager.step_time_ms.unwrap().p50 - compiled.step_time_ms.unwrap().p50;
        let expected = (4_000.0 / saved).ceil() as u64;
        assert!((1_330..=1_340).contains(&expected), "{saved}");
        assert_eq!(compiled.break_even_steps, Some(expected));
    }

    /// A session-wide reading: it moves the session's clock and nothing else.
    fn tick() -> Body {
        Body::MachineLoad {
            load_1m: 1.0,
            busy_percent: 50.0,
            steal_percent: 0.0,
            others_percent: 0.0,
            cpu_mhz: None,
        }
    }

    #[test]
    fn neither_a_compiling_worker_nor_one_waiting_for_its_turn_is_stalled() {
        let mut state = State::default();
        let mut at = |s: f64, worker: &str, body: Body| {
            state.apply(&Record::new(s * 1e3, Some(worker.into()), body));
            state.clone()
        };
        let started = |pid| Body::WorkerStarted {
            pid,
            command: Vec::new(),
        };
        at(0.0, "pytorch", started(1));
        at(0.0, "compile", started(2));
        at(1.0, "pytorch", step(0, 10.0, true));
        at(
            1.0,
            "pytorch",
            Body::TurnEnd(golow_protocol::event::TurnEnd { steps_done: 1 }),
        );
        let compiling = Body::Compiling(golow_protocol::event::Compiling {
            step: Some(0),
            phase: Mode::Train,
            trigger: golow_protocol::event::CompileTrigger::Dynamo,
        });
        at(2.0, "compile", compiling);
        // 58 s into a compilation, with the default 30 s stall limit.
        let s = at(60.0, "compile", tick());
        let (pytorch, compile) = (&s.workers[0], &s.workers[1]);
        assert_eq!(s.compiling_for_s(compile), Some(58.0));
        assert_eq!(s.stalled_for_s(compile), None);
        assert_eq!(s.stalled_for_s(pytorch), None);
        at(61.0, "compile", compile_event(Some(0), false, 59_000.0));
        let s = at(62.0, "compile", step(0, 59_010.0, true));
        assert_eq!(s.compiling_for_s(&s.workers[1]), None);
        assert_eq!(s.workers[1].compile.as_ref().unwrap().first_ms, 59_000.0);
        at(
            62.0,
            "compile",
            Body::TurnEnd(golow_protocol::event::TurnEnd { steps_done: 1 }),
        );
        // Then nothing moves for 40 s: the session as a whole is stalled, the waiting worker with it.
        let s = at(102.0, "compile", tick());
        assert_eq!(s.stalled_for_s(&s.workers[0]), Some(40.0));
        assert_eq!(s.stalled_for_s(&s.workers[1]), Some(40.0));
    }

    #[test]
    fn a_compiled_level_is_not_paid_back_without_an_eager_worker_to_compare_with() {
        let state = fold(
            "compile",
            vec![
                compile_event(Some(0), false, 100.0),
                step(0, 9.0, false),
                step(1, 9.0, false),
            ],
        );
        let summary = Summary::from_state(&state);
        assert_eq!(summary.workers[0].compile_ms, Some(100.0));
        assert_eq!(summary.workers[0].break_even_steps, None);
    }

    #[test]
    fn warmup_is_counted_but_not_measured() {
        let state = fold(
            "libtorch",
            vec![
                step(0, 1000.0, true),
                step(1, 9.0, false),
                step(2, 9.0, false),
                Body::Exit(WorkerExit {
                    status: ExitStatus::Ok,
                    message: None,
                }),
                Body::WorkerExited {
                    exit_code: Some(0),
                    signal: None,
                    stop_requested: false,
                },
            ],
        );
        let summary = Summary::from_state(&state);
        let w = &summary.workers[0];
        assert_eq!((w.steps, w.warmup_steps, w.samples), (3, 1, 20));
        assert_eq!(w.status, WorkerStatus::Ok);
        let compute = w.compute_ms.unwrap();
        assert!((compute.max - 9.0).abs() < 0.01, "{compute:?}");
        // (1 ms copy + 9 ms compute) per 10 samples.
        assert!((w.sample_time_ms.unwrap().p50 - 1.0).abs() < 0.01);
        // At the median time per sample, read off a histogram of 3 significant digits.
        assert!((w.throughput_samples_per_s.unwrap() - 1000.0).abs() < 1.0);
        assert_eq!(w.h2d_bytes_per_step, Some(1000));
        assert_eq!(w.loss.first, Some(2.0));
        assert!((w.loss.last.unwrap() - 1.8).abs() < 1e-9);
        assert_eq!(w.gpu_breakdown, None);
    }

    fn kernel_window(busy: f64, monotonic_start_ns: Option<u64>) -> Body {
        Body::Kernels(Box::new(golow_protocol::event::KernelWindow {
            window_start_ns: 0,
            window_end_ns: 1_000_000_000,
            kernels: Vec::new(),
            copies: Vec::new(),
            breakdown: golow_protocol::event::Breakdown {
                busy,
                copy: 0.1,
                idle: 0.9 - busy,
            },
            dropped_records: 0,
            invalid_records: 0,
            dropped_windows: 0,
            monotonic_start_ns,
            monotonic_end_ns: monotonic_start_ns.map(|s| s + 1_000_000_000),
            timeline: None,
        }))
    }

    #[test]
    fn a_placed_window_counts_the_time_of_the_steps_the_session_measured() {
        let origin = 7_000_000_000;
        let session = golow_protocol::samples::every_body()
            .into_iter()
            .find_map(|b| match b {
                Body::SessionStart(config) => Some(config),
                _ => None,
            })
            .unwrap();
        let session = SessionConfig {
            workers: vec!["libtorch".into()],
            warmup: 1,
            monotonic_origin_ns: Some(origin),
            ..*session
        };
        let mut state = State::default();
        let at = |t_ms: f64, body: Body| Record::new(t_ms, Some("libtorch".into()), body);
        state.apply(&Record::new(
            0.0,
            None,
            Body::SessionStart(Box::new(session)),
        ));
        // A warm-up step, then two measured steps of 1 ms copy + 99 ms compute in [2.0, 2.2) s.
        state.apply(&at(1_900.0, step(0, 99.0, true)));
        state.apply(&at(2_100.0, step(1, 99.0, false)));
        state.apply(&at(2_200.0, step(2, 99.0, false)));
        state.apply(&at(
            3_500.0,
            kernel_window(0.1, Some(origin + 2_000_000_000)),
        ));
        let b = state.workers[0].gpu_activity.breakdown().unwrap();
        assert!(
            (b.busy - 0.5).abs() < 1e-6 && (b.copy - 0.5).abs() < 1e-6,
            "{b:?}"
        );
    }

    #[test]
    fn an_accuracy_that_is_no_fraction_is_not_taken() {
        let epoch = |accuracy: f64| {
            Body::Epoch(Epoch {
                epoch: 0,
                complete: true,
                train_loss: Some(1.0),
                train_accuracy: Some(accuracy),
                eval_loss: None,
                eval_accuracy: Some(accuracy),
            })
        };
        let accuracy =
            |a| Summary::from_state(&fold("libtorch", vec![epoch(a)])).workers[0].accuracy;
        assert_eq!(accuracy(0.5), Some(0.5));
        for absurd in [1e308, -0.1, f64::NAN, f64::INFINITY] {
            assert_eq!(accuracy(absurd), None, "{absurd}");
        }
    }

    #[test]
    fn kernel_windows_give_the_summary_its_gpu_breakdown() {
        let window = |busy: f64| kernel_window(busy, None);
        let state = fold("libtorch", vec![window(0.5), window(0.7)]);
        let b = Summary::from_state(&state).workers[0]
            .gpu_breakdown
            .unwrap();
        assert!(
            (b.busy - 0.6).abs() < 1e-9
                && (b.copy - 0.1).abs() < 1e-9
                && (b.idle - 0.3).abs() < 1e-9
        );
    }

    /// The sampler reads an exited worker's process before its parent reaps it, as holding nothing: the worker's
    /// memory stays what it was last seen holding.
    #[test]
    fn a_reading_of_a_process_that_has_exited_is_not_taken() {
        let process = |rss_bytes: u64| Body::Process {
            pid: 7,
            rss_bytes,
            peak_rss_bytes: 2 << 30,
            cpu_percent: Some(0.0),
            rank: None,
            threads: None,
        };
        let exited = Body::WorkerExited {
            exit_code: Some(0),
            signal: None,
            stop_requested: false,
        };
        let state = fold(
            "pytorch",
            vec![process(1 << 30), process(0), exited, process(0)],
        );
        let w = &state.workers[0];
        assert_eq!(
            w.series.rss_bytes.last().map(|(_, v)| v),
            Some(f64::from(1 << 30))
        );
        assert_eq!(w.series.cpu_percent.window_iter(0.0, 10.0).count(), 1);
        assert_eq!(w.peak_rss_bytes, 2 << 30);
    }

    #[test]
    fn a_killed_worker_is_failed_with_its_stderr() {
        let state = fold(
            "pytorch",
            vec![
                step(0, 5.0, false),
                Body::Output {
                    stream: Stream::Stderr,
                    line: "about to die".into(),
                },
                Body::WorkerExited {
                    exit_code: None,
                    signal: Some(9),
                    stop_requested: false,
                },
            ],
        );
        let w = &Summary::from_state(&state).workers[0];
        assert_eq!(w.status, WorkerStatus::Failed);
        assert_eq!(state.workers[0].activity(), Activity::Failed);
        assert_eq!(w.signal, Some(9));
        let error = w.error.as_deref().unwrap();
        assert!(
            error.contains("SIGKILL") && error.contains("about to die"),
            "{error}"
        );
    }

    #[test]
    fn a_recording_cut_short_says_so_rather_than_that_its_workers_failed_to_finish() {
        let mut state = fold("pytorch", vec![step(0, 5.0, false)]);
        let error = |state: &State| Summary::from_state(state).workers[0].error.clone();
        assert_eq!(
            error(&state).as_deref(),
            Some("the recording ends before the worker did")
        );
        state.apply(&Record::new(10.0, None, Body::SessionEnd));
        assert_eq!(error(&state).as_deref(), Some("did not finish"));
    }

    #[test]
    fn a_stop_requested_by_the_user_is_not_a_failure() {
        let state = fold(
            "pytorch",
            vec![Body::WorkerExited {
                exit_code: None,
                signal: Some(15),
                stop_requested: true,
            }],
        );
        assert_eq!(
            Summary::from_state(&state).workers[0].status,
            WorkerStatus::Stopped
        );
        assert_eq!(state.workers[0].activity(), Activity::Stopped);
    }

    #[test]
    fn stderr_tail_is_bounded() {
        let lines = (0..100)
            .map(|i| Body::Output {
                stream: Stream::Stderr,
                line: i.to_string(),
            })
            .collect();
        let state = fold("pytorch", lines);
        let tail = &state.workers[0].stderr_tail;
        assert_eq!(tail.len(), STDERR_TAIL_LINES);
        assert_eq!(tail.back().map(String::as_str), Some("99"));
    }
}
