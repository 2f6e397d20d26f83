//! A `--cmd` worker's script as golow's hook sees it: the processes that reported (a launcher's ranks among them),
//! each optimiser of the worker's own process, forward passes of its model before the first step, its first step,
//! and what it reported through golow's API.
//!
//! The worker's figures (its steps, step times, the compare view's intervals) are those of one process, the
//! *primary*: rank 0, or where no launcher set ranks, the first process that trains (its first optimiser step, or a
//! backward pass counted as a step), not the first to say hello; until one trains, the first to report anything else
//! (an evaluation script's forward passes) stands in, and what it made of the figures is forgotten when a process
//! that trains replaces it. The figures are its first optimiser's steps, one per iteration, so a GAN's two optimisers are not counted twice and their intervals are never mixed;
//! every other optimiser and every other process is counted on its own.

use std::collections::BTreeMap;

use golow_protocol::event::{BackwardPass, ForwardPass, Optimizer, OptimizerStep, ScriptProcess};
use golow_protocol::script::{MAX_NAME_BYTES, MAX_OPTIMIZERS, StepPhases};

use super::Durations;
use super::phases::PhasesState;
use super::ranks::Arrivals;
use super::series::Series;

/// Processes told apart in the state; more are counted in `more_processes`.
pub const MAX_PROCESSES: usize = 64;

/// Scalar names kept; the script's later names are dropped.
pub const MAX_SCALARS: usize = 16;

/// Where a script's samples per step come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplesFrom {
    /// `golow.report(samples=…)`.
    Report,
    /// The hook's inference: the batch dimension of the model's first input.
    BatchDimension,
}

impl SamplesFrom {
    pub fn name(self) -> &'static str {
        match self {
            SamplesFrom::Report => "report",
            SamplesFrom::BatchDimension => "batch dimension",
        }
    }
}

/// One process of the command that reported.
#[derive(Debug, Clone, Default)]
pub struct ProcessState {
    pub process: u32,
    pub pid: Option<u32>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub python: Option<String>,
    pub torch: Option<String>,
    pub threads: Option<u32>,
    /// Its first optimiser's steps.
    pub steps: u64,
    pub forward_passes: u64,
    /// Intervals between its first optimiser's measured steps.
    pub step_interval: Durations,
    /// When it is one of a distributed job's ranks: its step times over time, and /proc and NVML's readings of its
    /// process and descendants.
    pub series: RankSeries,
    pub peak_rss_bytes: u64,
    pub peak_gpu_memory_bytes: Option<u64>,
    /// Where its measured steps' time went, when it is a rank (uncharted: the worker charts its primary process's).
    pub phases: PhasesState,
    /// Its latest believed arrival (start of a backward pass), on the host's monotonic clock.
    last_arrived_ns: Option<u64>,
    /// Its optimisers' classes, by index, as the hook named them.
    optimizer_classes: Vec<String>,
}

impl ProcessState {
    /// Its rank, when it is one of a distributed job's (a world of more than one).
    pub fn job_rank(&self) -> Option<u32> {
        self.rank.filter(|_| self.world_size.is_some_and(|w| w > 1))
    }
}

/// The monitor's own reading of the host's monotonic clock: the session's start on it, and now (as the record being
/// folded was stamped). A rank's arrival must lie between the two.
#[derive(Debug, Clone, Copy)]
pub struct MonitorClock {
    pub origin_ns: u64,
    pub now_ns: u64,
}

/// How far a stamp may run ahead of the monitor's reading: the rank's clock and golow's are one clock, read on
/// different CPUs, and golow stamps a record a little after it arrives.
const CLOCK_SLACK_NS: u64 = 1_000_000_000;

impl MonitorClock {
    /// The clock of a session that started at `origin_ns`, as a record stamped `t_s` seconds into it was folded.
    pub fn at(origin_ns: u64, t_s: f64) -> MonitorClock {
        MonitorClock {
            origin_ns,
            now_ns: origin_ns.saturating_add((t_s.max(0.0) * 1e9) as u64),
        }
    }

    /// Whether a process's stamp `ns` can be true: not before the session started, nor more than `slack_ns` after
    /// the monitor heard of it.
    pub fn holds(&self, ns: u64, slack_ns: u64) -> bool {
        (self.origin_ns..=self.now_ns.saturating_add(slack_ns)).contains(&ns)
    }
}

/// Whether a rank's arrival at `ns` can be true: within the session as the monitor's clock saw it, and not before the
/// same rank's previous arrival.
fn plausible(ns: u64, previous: Option<u64>, clock: Option<MonitorClock>) -> bool {
    clock.is_none_or(|c| c.holds(ns, CLOCK_SLACK_NS)) && previous.is_none_or(|before| ns >= before)
}

/// Points kept per rank's series: ranks are many, and a pane shows them over minutes, not the whole run.
pub const RANK_SERIES_CAPACITY: usize = 1024;

#[derive(Debug, Clone)]
pub struct RankSeries {
    pub step_ms: Series,
    pub cpu_percent: Series,
    pub rss_bytes: Series,
    pub gpu_memory_bytes: Series,
    pub gpu_sm_percent: Series,
}

impl Default for RankSeries {
    fn default() -> Self {
        let series = || Series::with_capacity(RANK_SERIES_CAPACITY);
        RankSeries {
            step_ms: series(),
            cpu_percent: series(),
            rss_bytes: series(),
            gpu_memory_bytes: series(),
            gpu_sm_percent: series(),
        }
    }
}

/// A distributed job's step time across its ranks, at each of the primary rank's measured steps: the fastest rank's
/// latest step, the median rank's and the slowest's. What the ranks pane draws for a worker while collapsed.
#[derive(Debug, Clone, Default)]
pub struct RankBand {
    pub min: Series,
    pub median: Series,
    pub max: Series,
}

/// A reading of one rank's process, as `Body::Process` and `Body::GpuProcess` bring it.
pub enum RankReading {
    Host {
        rss_bytes: u64,
        peak_rss_bytes: u64,
        cpu_percent: Option<f64>,
    },
    Gpu {
        memory_bytes: Option<u64>,
        sm_percent: Option<u32>,
    },
}

/// One optimiser of the primary process.
#[derive(Debug, Clone, Default)]
pub struct OptimizerState {
    pub class: Option<String>,
    pub lr: Option<f64>,
    pub steps: u64,
    /// Intervals between its own measured steps.
    pub interval: Durations,
}

/// Forward passes of the primary process's model, before its first optimiser step.
#[derive(Debug, Clone, Default)]
pub struct ForwardState {
    pub passes: u64,
    /// From the call of the model to its return, measured passes.
    pub duration: Durations,
    pub interval: Durations,
    /// Whether the latest pass recorded gradients.
    pub grad: Option<bool>,
}

#[derive(Debug, Clone, Default)]
pub struct ScriptState {
    pub processes: Vec<ProcessState>,
    /// Processes that reported beyond `MAX_PROCESSES`: how many, each counted once however often it reports.
    pub more_processes: u64,
    /// Which those were (at most the monitor's cap on a worker's connections).
    more_seen: std::collections::BTreeSet<u32>,
    pub primary: Option<u32>,
    /// The primary was chosen for what it does (it is rank 0, or it trains): no other process replaces it.
    primary_settled: bool,
    /// A process that stood in for the primary was replaced, and what it made of the figures is to be forgotten.
    stand_in_replaced: bool,
    pub optimizers: Vec<OptimizerState>,
    pub forward: ForwardState,
    /// The primary process's first optimiser step: seconds from the worker's start, and its own duration (from its
    /// model's first forward pass, compilation included).
    pub time_to_first_step_s: Option<f64>,
    pub first_step_ms: Option<f64>,
    pub phase: Option<String>,
    /// The latest value of each number the script reported.
    pub scalars: BTreeMap<String, f64>,
    /// Samples the script reported since its previous measured step.
    pub pending_samples: f64,
    /// Where the samples of the latest step with some came from: what the script reported, or the hook's inference
    /// from the batch dimension.
    pub samples_from: Option<SamplesFrom>,
    /// Where the ranks arrived at each step, and who was last: stragglers.
    pub arrivals: Arrivals,
    pub band: RankBand,
    /// Where the worker's measured steps' time went.
    pub phases: PhasesState,
    /// The primary process's first optimiser's steps a GradScaler skipped (infinite gradients).
    pub skipped_steps: u64,
    /// The worker's steps are the primary process's backward passes: it trains with no optimiser (so far).
    pub counted_by_backward: bool,
    /// An optimiser of the primary process began stepping: backward passes are no longer steps.
    optimizer_seen: bool,
    /// The loss chart holds losses of backward passes counted as the worker's steps.
    pub losses_by_backward: bool,
}

/// A name from the script, cut to `MAX_NAME_BYTES` at a character boundary.
pub fn bounded(name: &str) -> &str {
    let mut end = name.len().min(MAX_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// What an optimiser step (or a backward pass) means for the worker's figures.
pub enum StepRole {
    /// The primary process's first optimiser: a worker's step.
    Iteration,
    /// The primary process's first optimiser's step, skipped by a GradScaler: counted apart, not timed.
    Skipped,
    /// Counted on its own (another optimiser, another process).
    Other,
}

impl ScriptState {
    fn process_mut(&mut self, process: u32) -> Option<&mut ProcessState> {
        match self.processes.iter().position(|p| p.process == process) {
            Some(i) => Some(&mut self.processes[i]),
            None if self.processes.len() < MAX_PROCESSES => {
                self.processes.push(ProcessState {
                    process,
                    ..Default::default()
                });
                self.processes.last_mut()
            }
            None => {
                // The monitor listens to no more of a worker's processes than that in all.
                let beyond = golow_protocol::script::MAX_PROCESSES as usize - MAX_PROCESSES;
                if self.more_seen.len() < beyond && self.more_seen.insert(process) {
                    self.more_processes += 1;
                }
                None
            }
        }
    }

    /// Whether `process` is the primary one, choosing it as it may be: rank 0 at its first event, else the first
    /// process that `trains`; until one does, the first eligible process to report stands in.
    fn is_primary(&mut self, process: u32, trains: bool) -> bool {
        if !self.primary_settled {
            let rank = self
                .processes
                .iter()
                .find(|p| p.process == process)
                .and_then(|p| p.rank);
            let eligible = rank.is_none_or(|r| r == 0);
            if rank == Some(0) || (trains && eligible) {
                self.settle_primary(process);
            } else if self.primary.is_none() && eligible {
                self.primary = Some(process);
            }
        }
        self.primary == Some(process)
    }

    /// Makes `process` the primary for good, forgetting what a process that stood in made of its figures.
    fn settle_primary(&mut self, process: u32) {
        if self.primary.is_some_and(|stand_in| stand_in != process) {
            self.forward = ForwardState::default();
            self.scalars.clear();
            self.phase = None;
            self.pending_samples = 0.0;
            self.samples_from = None;
            self.stand_in_replaced = true;
        }
        self.primary = Some(process);
        self.primary_settled = true;
    }

    /// Whether a process that stood in for the primary was replaced since the last call: the worker's figures that
    /// its events made (its forward passes charted, the numbers it reported) are to be forgotten.
    pub fn replaced_stand_in(&mut self) -> bool {
        std::mem::take(&mut self.stand_in_replaced)
    }

    pub fn hello(&mut self, hello: &ScriptProcess) {
        // A process /proc found as a rank before its hook spoke (an attached job's) is the hook's from now on.
        let found = golow_protocol::script::MAX_PROCESSES;
        self.processes
            .retain(|p| p.process < found || p.pid != Some(hello.pid));
        if let Some(p) = self.process_mut(hello.process) {
            p.pid = Some(hello.pid);
            p.rank = hello.rank;
            p.local_rank = hello.local_rank;
            p.world_size = hello.world_size;
            p.python = Some(bounded(&hello.python).to_string());
            p.torch = hello
                .torch
                .as_deref()
                .map(|torch| bounded(torch).to_string());
            p.threads = hello.threads;
        }
    }

    /// A rank's process that /proc found (an attached job's, with no hook to say hello): read as that rank from now
    /// on. Numbered past every number the monitor gives a hook's connection, one number per rank, so that a restarted
    /// rank's process replaces the one before.
    pub fn rank_process(
        &mut self,
        pid: u32,
        rank: u32,
        local_rank: Option<u32>,
        world_size: Option<u32>,
    ) {
        if rank >= super::ranks::MAX_RANKS {
            return;
        }
        let process = golow_protocol::script::MAX_PROCESSES + rank;
        let hooked = self
            .processes
            .iter()
            .any(|p| p.process < golow_protocol::script::MAX_PROCESSES && p.pid == Some(pid));
        if hooked {
            return;
        }
        if let Some(p) = self.process_mut(process) {
            p.pid = Some(pid);
            p.rank = Some(rank);
            p.local_rank = local_rank;
            p.world_size = world_size;
        }
    }

    /// An optimiser, said at its first step: its process trains.
    pub fn optimizer(&mut self, optimizer: &Optimizer) {
        if let Some(p) = self.process_mut(optimizer.process) {
            let classes = &mut p.optimizer_classes;
            // Numbered 0, 1, 2… as the hook announces them; a number past the next is none it announced.
            if optimizer.optimizer as usize == classes.len()
                && classes.len() < MAX_OPTIMIZERS as usize
            {
                classes.push(bounded(&optimizer.class).to_string());
            }
        }
        if !self.is_primary(optimizer.process, true) {
            return;
        }
        if let Some(o) = self.optimizer_mut(optimizer.optimizer) {
            o.class = Some(bounded(&optimizer.class).to_string());
            o.lr = optimizer.lr.filter(|lr| lr.is_finite());
        }
    }

    /// The hook numbers a process's optimisers 0, 1, 2… in the order of their first steps: a number past the next
    /// one (or past the cap) is no optimiser the hook announced, and is refused rather than filled in with empty ones.
    fn optimizer_mut(&mut self, index: u32) -> Option<&mut OptimizerState> {
        let index = usize::try_from(index).ok()?;
        if index == self.optimizers.len() && index < MAX_OPTIMIZERS as usize {
            self.optimizers.push(OptimizerState::default());
        }
        self.optimizers.get_mut(index)
    }

    /// Counts a step where it belongs, and says whether it is one of the worker's. `warmup` steps of each optimiser
    /// are counted but not timed; `t` is the session's time, `since_start_s` the time since the worker started;
    /// `clock`, where the session has one, is what a rank's arrival is checked against.
    pub fn step(
        &mut self,
        step: &OptimizerStep,
        warmup: u64,
        t: f64,
        since_start_s: Option<f64>,
        clock: Option<MonitorClock>,
    ) -> StepRole {
        let primary = self.is_primary(step.process, true);
        let lead = step.optimizer == 0;
        if step.skipped {
            if !(primary && lead) {
                return StepRole::Other;
            }
            self.skipped_steps += 1;
            return StepRole::Skipped;
        }
        let mut arrival = None;
        let mut measured = false;
        if let Some(p) = self.process_mut(step.process).filter(|_| lead) {
            p.steps += 1;
            if let Some(ms) = step
                .interval_ms
                .filter(|_| p.steps > warmup && !step.profiled)
            {
                p.step_interval.record_ms(ms);
                p.series.step_ms.push(t, ms);
                // Only a rank's are read (the worker keeps its primary process's own).
                if let (Some(phases), Some(_)) = (&step.phases, p.job_rank()) {
                    p.phases.tally(ms, phases);
                }
                measured = true;
            }
            if let (Some(rank), Some(world), Some(ns)) = (p.rank, p.world_size, step.arrived_ns) {
                arrival = Some(plausible(ns, p.last_arrived_ns, clock).then(|| {
                    p.last_arrived_ns = Some(ns);
                    (rank, world, ns, p.step_interval.median_ms())
                }));
            }
        }
        match arrival {
            Some(Some((rank, world, ns, step_ms))) => {
                self.arrivals.arrive(rank, world, step.step, ns, step_ms, t);
            }
            Some(None) => self.arrivals.implausible += 1,
            None => {}
        }
        if !primary {
            return StepRole::Other;
        }
        if measured {
            self.widen_band(t);
        }
        if let Some(ms) = step.first_step_ms {
            self.first_step_ms = Some(ms);
        }
        if self.time_to_first_step_s.is_none() {
            self.time_to_first_step_s = since_start_s;
        }
        if let Some(o) = self.optimizer_mut(step.optimizer) {
            o.steps += 1;
            if let Some(ms) = step
                .interval_ms
                .filter(|_| o.steps > warmup && !step.profiled)
            {
                o.interval.record_ms(ms);
            }
        }
        if lead {
            StepRole::Iteration
        } else {
            StepRole::Other
        }
    }

    /// Whether `step` is the primary process's first word of an optimiser after its backward passes were counted as
    /// the worker's steps: those counts are then to be forgotten, and the optimiser's steps counted from here. True
    /// once.
    pub fn takes_over_from_backward(&mut self, step: &OptimizerStep) -> bool {
        if !self.is_primary(step.process, true) {
            return false;
        }
        self.optimizer_seen = true;
        std::mem::take(&mut self.counted_by_backward)
    }

    /// A backward pass: one of the worker's steps while its primary process has not stepped an optimiser.
    pub fn backward_pass(&mut self, pass: &BackwardPass) -> StepRole {
        if !self.is_primary(pass.process, true) || self.optimizer_seen {
            return StepRole::Other;
        }
        self.counted_by_backward = true;
        StepRole::Iteration
    }

    /// Which of its optimiser's steps `step` is, from 1 (a skipped one: the step it held back), as the fold counts
    /// them for the figures its warm-up is kept out of: each process's first optimiser by its process, the primary
    /// process's other optimisers by theirs; the hook's own numbering where the fold keeps no count.
    pub fn position(&self, step: &OptimizerStep) -> u64 {
        let taken = if step.optimizer == 0 {
            self.processes
                .iter()
                .find(|p| p.process == step.process)
                .map(|p| p.steps)
        } else if self.primary == Some(step.process) {
            let index = usize::try_from(step.optimizer).ok();
            index.and_then(|i| self.optimizers.get(i)).map(|o| o.steps)
        } else {
            None
        };
        match taken {
            Some(taken) => taken + u64::from(step.skipped),
            None => step.step.saturating_add(1),
        }
    }

    /// The class of optimiser `index` of `process`, as the hook named it.
    pub fn optimizer_class(&self, process: u32, index: u32) -> Option<&str> {
        let p = self.processes.iter().find(|p| p.process == process)?;
        p.optimizer_classes
            .get(usize::try_from(index).ok()?)
            .map(String::as_str)
    }

    /// The band at `t`, from each rank's latest step time, when the job has ranks.
    fn widen_band(&mut self, t: f64) {
        let mut latest: Vec<f64> = self
            .ranks()
            .iter()
            .filter_map(|p| p.series.step_ms.last().map(|(_, ms)| ms))
            .collect();
        if latest.len() < 2 {
            return;
        }
        latest.sort_by(f64::total_cmp);
        self.band.min.push(t, latest[0]);
        self.band.median.push(t, latest[latest.len() / 2]);
        self.band.max.push(t, latest[latest.len() - 1]);
    }

    /// A distributed job's ranks, by rank: for each rank, the latest process that said it is that rank (a rank
    /// restarted by its launcher replaces the one before). Empty without a world of two or more.
    pub fn ranks(&self) -> Vec<&ProcessState> {
        let mut by_rank: BTreeMap<u32, &ProcessState> = BTreeMap::new();
        for p in &self.processes {
            if let Some(rank) = p.job_rank() {
                by_rank.insert(rank, p);
            }
        }
        by_rank.into_values().collect()
    }

    /// Each rank's median step time so far, fastest first (ranks without a measured step left out).
    pub fn rank_step_medians(&self) -> Vec<f64> {
        let mut medians: Vec<f64> = self
            .ranks()
            .iter()
            .filter_map(|p| p.step_interval.median_ms())
            .collect();
        medians.sort_by(f64::total_cmp);
        medians
    }

    /// Keeps a reading of rank `rank`'s process `pid`: of the processes that said they are that rank, the latest with
    /// that pid.
    pub fn rank_reading(&mut self, t: f64, pid: u32, rank: u32, reading: &RankReading) {
        let Some(p) = self
            .processes
            .iter_mut()
            .rev()
            .find(|p| p.pid == Some(pid) && p.rank == Some(rank))
        else {
            return;
        };
        match *reading {
            RankReading::Host {
                rss_bytes,
                peak_rss_bytes,
                cpu_percent,
            } => {
                p.peak_rss_bytes = p.peak_rss_bytes.max(peak_rss_bytes);
                p.series.rss_bytes.push(t, rss_bytes as f64);
                if let Some(cpu) = cpu_percent {
                    p.series.cpu_percent.push(t, cpu);
                }
            }
            RankReading::Gpu {
                memory_bytes,
                sm_percent,
            } => {
                if let Some(bytes) = memory_bytes {
                    p.peak_gpu_memory_bytes = Some(p.peak_gpu_memory_bytes.unwrap_or(0).max(bytes));
                    p.series.gpu_memory_bytes.push(t, bytes as f64);
                }
                if let Some(sm) = sm_percent {
                    p.series.gpu_sm_percent.push(t, f64::from(sm));
                }
            }
        }
    }

    /// Counts a forward pass; true when it is one of the worker's (the primary process's, past the warm-up).
    pub fn forward_pass(&mut self, pass: &ForwardPass, warmup: u64) -> bool {
        if let Some(p) = self.process_mut(pass.process) {
            p.forward_passes += 1;
        }
        if !self.is_primary(pass.process, false) {
            return false;
        }
        let forward = &mut self.forward;
        forward.passes += 1;
        forward.grad = Some(pass.grad);
        if forward.passes <= warmup {
            return false;
        }
        forward.duration.record_ms(pass.ms);
        if let Some(ms) = pass.interval_ms {
            forward.interval.record_ms(ms);
        }
        true
    }

    /// Keeps a reported number; false for another process's, or a name beyond `MAX_SCALARS`.
    pub fn scalar(&mut self, process: u32, name: &str, value: f64) -> bool {
        if !value.is_finite() || !self.is_primary(process, false) {
            return false;
        }
        let name = bounded(name);
        if !self.scalars.contains_key(name) && self.scalars.len() >= MAX_SCALARS {
            return false;
        }
        if name == "samples" && value > 0.0 {
            self.pending_samples += value;
        }
        self.scalars.insert(name.to_string(), value);
        true
    }

    pub fn phase(&mut self, process: u32, name: &str) {
        if self.is_primary(process, false) {
            self.phase = Some(bounded(name).to_string());
        }
    }

    /// The samples of a step past the warm-up: those the script reported since the step before, else those the hook
    /// inferred from the batch dimension; zero when neither.
    pub fn step_samples(&mut self, phases: Option<&StepPhases>) -> f64 {
        let reported = std::mem::take(&mut self.pending_samples);
        if reported >= 1.0 {
            self.samples_from = Some(SamplesFrom::Report);
            return reported;
        }
        match phases.and_then(|p| p.samples).filter(|&n| n > 0) {
            Some(n) => {
                self.samples_from = Some(SamplesFrom::BatchDimension);
                n as f64
            }
            None => 0.0,
        }
    }

    /// Where the worker's measured steps' time went, once it has any.
    pub fn measured_phases(&self) -> Option<&PhasesState> {
        (self.phases.steps() > 0).then_some(&self.phases)
    }

    /// What the worker's steps are, once it has any: `backward` passes where the primary process trains with no
    /// optimiser, else `optimizer` steps.
    pub fn steps_counted_by(&self) -> Option<&'static str> {
        if self.counted_by_backward {
            Some("backward")
        } else {
            self.optimizer_seen.then_some("optimizer")
        }
    }

    /// The primary process, as it said hello.
    pub fn primary_process(&self) -> Option<&ProcessState> {
        let primary = self.primary?;
        self.processes.iter().find(|p| p.process == primary)
    }

    /// What the primary process runs on: `python` and `torch` → versions.
    pub fn versions(&self) -> BTreeMap<String, String> {
        let Some(p) = self.primary_process().or(self.processes.first()) else {
            return BTreeMap::new();
        };
        [("python", &p.python), ("torch", &p.torch)]
            .into_iter()
            .filter_map(|(name, v)| Some((name.to_string(), v.clone()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(process: u32, rank: Option<u32>) -> ScriptProcess {
        ScriptProcess {
            process,
            pid: 100 + process,
            rank,
            local_rank: rank,
            world_size: rank.map(|_| 2),
            python: "3.11.7".into(),
            torch: Some("2.11.0".into()),
            threads: Some(1),
        }
    }

    fn step(process: u32, optimizer: u32, step: u64, interval: Option<f64>) -> OptimizerStep {
        OptimizerStep {
            process,
            optimizer,
            ..golow_protocol::samples::optimizer_step(step, interval)
        }
    }

    #[test]
    fn a_rank_found_in_proc_and_its_hook_are_one_process_in_either_order() {
        let found = |script: &mut ScriptState, pid| script.rank_process(pid, 1, Some(1), Some(2));
        let said = |script: &mut ScriptState, pid| {
            script.hello(&ScriptProcess {
                pid,
                ..hello(0, Some(1))
            })
        };
        let mut found_first = ScriptState::default();
        found(&mut found_first, 42);
        said(&mut found_first, 42);
        let mut said_first = ScriptState::default();
        said(&mut said_first, 42);
        found(&mut said_first, 42);
        for script in [&found_first, &said_first] {
            let pids: Vec<_> = script
                .processes
                .iter()
                .map(|p| (p.process, p.pid))
                .collect();
            assert_eq!(pids, [(0, Some(42))]);
        }
        // Another process found as a rank stays beside the hook's.
        found(&mut said_first, 43);
        assert_eq!(said_first.processes.len(), 2);
    }

    #[test]
    fn rank_zero_is_primary_even_when_another_rank_reports_first() {
        let mut s = ScriptState::default();
        s.hello(&hello(0, Some(1)));
        s.hello(&hello(1, Some(0)));
        assert!(matches!(
            s.step(&step(0, 0, 0, None), 0, 0.0, None, None),
            StepRole::Other
        ));
        assert!(matches!(
            s.step(&step(1, 0, 0, None), 0, 0.0, Some(3.0), None),
            StepRole::Iteration
        ));
        assert_eq!(s.primary, Some(1));
        assert_eq!(
            s.processes.iter().map(|p| p.steps).collect::<Vec<_>>(),
            [1, 1]
        );
        assert_eq!(s.time_to_first_step_s, Some(3.0));
    }

    fn forward(process: u32, pass: u64) -> ForwardPass {
        ForwardPass {
            process,
            pass,
            ms: 2.0,
            interval_ms: (pass > 0).then_some(3.0),
            grad: false,
            t_ns: None,
        }
    }

    /// A decoy that says hello, runs its model and reports before the trainer: the trainer is the primary, and what
    /// the decoy made of the figures is forgotten once, when the trainer replaces it.
    #[test]
    fn the_process_that_trains_is_primary_not_the_first_to_report() {
        let mut s = ScriptState::default();
        s.hello(&hello(0, None));
        for pass in 0..5 {
            assert!(s.forward_pass(&forward(0, pass), 0), "the decoy stands in");
        }
        s.phase(0, "decoy");
        assert!(s.scalar(0, "accuracy", 0.5));
        s.hello(&hello(1, None));
        assert!(!s.forward_pass(&forward(1, 0), 0));
        assert!(!s.replaced_stand_in());
        for i in 0..300 {
            let role = s.step(&step(1, 0, i, (i > 0).then_some(10.0)), 0, 0.0, None, None);
            assert!(matches!(role, StepRole::Iteration), "step {i}");
        }
        assert_eq!(s.primary, Some(1));
        assert!(s.replaced_stand_in());
        assert!(!s.replaced_stand_in(), "said once");
        assert_eq!((s.forward.passes, s.phase.as_deref()), (0, None));
        assert!(s.scalars.is_empty());
        assert!(!s.forward_pass(&forward(0, 5), 0));
        assert!(matches!(
            s.step(&step(0, 0, 0, None), 0, 0.0, None, None),
            StepRole::Other
        ));
        assert_eq!(s.optimizers[0].steps, 300);
        assert_eq!(
            s.processes.iter().map(|p| p.steps).collect::<Vec<_>>(),
            [1, 300]
        );
    }

    #[test]
    fn an_evaluation_script_is_measured_by_its_first_process_to_report() {
        let mut s = ScriptState::default();
        s.hello(&hello(0, None));
        s.hello(&hello(1, None));
        assert!(!s.forward_pass(&forward(0, 0), 1), "within the warm-up");
        assert!(s.forward_pass(&forward(0, 1), 1));
        assert!(!s.forward_pass(&forward(1, 0), 0));
        assert_eq!((s.primary, s.forward.passes), (Some(0), 2));
        // A backward pass is training: its process is the primary from then on.
        let backward = BackwardPass {
            process: 1,
            pass: 0,
            interval_ms: None,
            phases: None,
            profiled: false,
            loss: None,
            t_ns: None,
        };
        assert!(matches!(s.backward_pass(&backward), StepRole::Iteration));
        assert_eq!(s.primary, Some(1));
        assert!(s.replaced_stand_in());
    }

    #[test]
    fn a_second_optimiser_is_counted_on_its_own() {
        let mut s = ScriptState::default();
        for i in 0..30u64 {
            let interval = (i > 0).then_some(10.0);
            assert!(matches!(
                s.step(&step(0, 0, i, interval), 2, i as f64, None, None),
                StepRole::Iteration
            ));
            assert!(matches!(
                s.step(&step(0, 1, i, interval), 2, i as f64, None, None),
                StepRole::Other
            ));
        }
        assert_eq!(s.optimizers.len(), 2);
        assert!(
            s.optimizers
                .iter()
                .all(|o| o.steps == 30 && o.interval.len() == 28)
        );
        assert_eq!(s.processes[0].steps, 30);
    }

    /// 70 processes, each reporting 51 times: 6 past the cap, not 6 × 51 events.
    #[test]
    fn samples_the_script_reports_override_those_inferred_from_the_batch_dimension() {
        let mut s = ScriptState::default();
        s.hello(&hello(0, None));
        let mut phases = golow_protocol::samples::step_phases(1.0, 1.0, 1.0, 1.0);
        assert_eq!(s.step_samples(Some(&phases)), 0.0, "neither");
        assert_eq!(s.samples_from, None);
        phases.samples = Some(32);
        assert_eq!(s.step_samples(Some(&phases)), 32.0);
        assert_eq!(s.samples_from, Some(SamplesFrom::BatchDimension));
        assert!(s.scalar(0, "samples", 10.0));
        assert_eq!(s.step_samples(Some(&phases)), 10.0);
        assert_eq!(s.samples_from, Some(SamplesFrom::Report));
        assert_eq!(s.step_samples(None), 0.0, "a report counts once");
    }

    #[test]
    fn processes_past_the_cap_are_counted_once_each() {
        let mut s = ScriptState::default();
        for _ in 0..51 {
            for p in 0..70 {
                s.hello(&hello(p, None));
            }
        }
        assert_eq!(s.processes.len(), MAX_PROCESSES);
        assert_eq!(s.more_processes, 70 - MAX_PROCESSES as u64);
    }

    #[test]
    fn names_and_processes_stay_bounded() {
        let mut s = ScriptState::default();
        for p in 0..1000 {
            s.hello(&hello(p, None));
        }
        assert_eq!(s.processes.len(), MAX_PROCESSES);
        assert_eq!(
            s.more_processes,
            u64::from(golow_protocol::script::MAX_PROCESSES) - MAX_PROCESSES as u64,
            "the monitor listens to no more connections than that"
        );
        for i in 0..100 {
            s.scalar(0, &format!("{i}{}", "é".repeat(100)), 1.0);
        }
        assert_eq!(s.scalars.len(), MAX_SCALARS);
        assert!(s.scalars.keys().all(|k| k.len() <= MAX_NAME_BYTES));
        assert!(!s.scalar(0, "loss", f64::NAN));
        // A number past the next optimiser is none the hook announced: no empty optimisers fill the gap.
        s.step(&step(0, u32::MAX, 0, None), 0, 0.0, None, None);
        s.step(&step(0, 1000, 0, None), 0, 0.0, None, None);
        assert!(s.optimizers.is_empty());
        for index in 0..100 {
            s.step(&step(0, index, 0, None), 0, 0.0, None, None);
        }
        assert_eq!(s.optimizers.len(), MAX_OPTIMIZERS as usize);
        assert!(s.optimizers.iter().all(|o| o.steps == 1));
    }

    /// Arrival stamps a monitor could not have seen (0, 2^64−1, a rank going back) are refused and counted: they
    /// would otherwise name a rank 1.8e13 ms late a straggler.
    #[test]
    fn impossible_arrival_stamps_are_refused() {
        let origin_ns = 5_000_000_000_000;
        let mut s = ScriptState::default();
        s.hello(&hello(0, Some(0)));
        s.hello(&hello(1, Some(1)));
        let at = |i: u64| origin_ns + i * 100_000_000;
        for i in 0..30u64 {
            let t = i as f64 * 0.1 + 0.05;
            let clock = Some(MonitorClock {
                origin_ns,
                now_ns: origin_ns + (t * 1e9) as u64,
            });
            let arrived = |process: u32, ns: u64| OptimizerStep {
                arrived_ns: Some(ns),
                ..step(process, 0, i, Some(100.0))
            };
            s.step(&arrived(0, at(i)), 0, t, None, clock);
            // Rank 1 arrives 1 ms after rank 0, but for three steps stamps what cannot be.
            let bad = match i {
                10 => Some(0),
                20 => Some(u64::MAX),
                25 => Some(at(3)),
                _ => None,
            };
            s.step(
                &arrived(1, bad.unwrap_or(at(i) + 1_000_000)),
                0,
                t,
                None,
                clock,
            );
        }
        assert_eq!(s.arrivals.implausible, 3);
        assert_eq!(s.arrivals.complete, 27);
        let late = s.arrivals.skew.percentiles().unwrap().max;
        assert!(late < 1.1, "{late} ms");
        // Without the monitor's clock (a recording made before golow kept one) only going back is caught.
        let mut unclocked = ScriptState::default();
        unclocked.hello(&hello(0, Some(0)));
        for (i, ns) in [(0, 10), (1, 5), (2, 20)] {
            let stamped = OptimizerStep {
                arrived_ns: Some(ns),
                ..step(0, 0, i, Some(1.0))
            };
            unclocked.step(&stamped, 0, 0.0, None, None);
        }
        assert_eq!(unclocked.arrivals.implausible, 1);
    }
}
