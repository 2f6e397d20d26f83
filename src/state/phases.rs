//! Where a `--cmd` script's steps spend their time: the phases the hook timed on the host (waiting on data, the
//! model's forward passes, backward passes, the optimiser) and the rest of each step's interval (`other`), for the
//! worker's measured steps. Also whether the script is input-bound: waiting on its data for a fifth of its steps or
//! more.
//!
//! One statistic serves every figure golow prints of them (the pane, the headless line, the summary, the verdict):
//! each phase's median over the steps, and its share of a *typical step*, the five medians summed, so that the
//! shares add up to the whole and agree with the milliseconds beside them. A slow step now and then (an epoch's end,
//! a checkpoint) moves neither.

use std::collections::{BTreeMap, VecDeque};

use golow_protocol::script::{LoaderSetup, StepPhases};

use super::Durations;
use super::series::Series;

/// The phases in the order they are shown and stacked, each numbered by its place in a [`Split`] and in
/// `PhasesState::durations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Data,
    Forward,
    Backward,
    Optimizer,
    Other,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Data,
        Phase::Forward,
        Phase::Backward,
        Phase::Optimizer,
        Phase::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Data => "data",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
            Phase::Other => "other",
        }
    }
}

/// A step is input-bound when waiting on data takes at least this share of a typical one.
const INPUT_BOUND_SHARE: f64 = 0.2;

/// Waiting on data shorter than this (a typical step's) is not worth a DataLoader's worker processes: handing each
/// batch from one to the training process costs about as much.
pub const REMEDY_MIN_DATA_MS: f64 = 5.0;

/// The steps the verdict and the shares now are taken over.
const RECENT: usize = 20;

/// Fewer measured steps give no verdict: one slow first batch is not a pattern.
const VERDICT_MIN_STEPS: usize = 5;

/// Passes per step told apart; more count as this many.
const MAX_PASSES: u32 = 4096;

/// One step's phases in milliseconds, in the order of [`Phase::ALL`], adding up to its interval.
pub type Split = [f64; 5];

/// Waiting on data takes `share` of a typical step, `data_ms`: at least [`INPUT_BOUND_SHARE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputBound {
    pub share: f64,
    pub data_ms: f64,
}

impl InputBound {
    fn of(typical: Split) -> Option<InputBound> {
        let share = shares_of(typical)?[0];
        (share >= INPUT_BOUND_SHARE).then_some(InputBound {
            share,
            data_ms: typical[0],
        })
    }
}

/// A median below a microsecond is a phase the steps did not spend time in (the hook times to the microsecond; the
/// histogram keeps a nanosecond for nothing).
fn nothing_below_the_floor(ms: f64) -> f64 {
    if ms < 1e-3 { 0.0 } else { ms }
}

/// Each phase's share of `split`, adding up to one; none for a step of no time.
fn shares_of(split: Split) -> Option<Split> {
    let total: f64 = split.iter().sum();
    (total > 0.0).then(|| split.map(|ms| ms / total))
}

/// A duration as golow prints phases: microseconds below a millisecond.
pub fn milliseconds(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.0} µs", ms * 1e3)
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// The phases of the worker's measured steps.
#[derive(Debug, Clone, Default)]
pub struct PhasesState {
    /// Each phase's time per step.
    pub durations: [Durations; 5],
    /// Over time, the top of each phase stacked on those before it (data, data + forward, …, the interval): a
    /// stacked band.
    pub stacked: [Series; 5],
    /// The latest steps' phases.
    recent: VecDeque<Split>,
    /// Steps by how many forward passes (micro-batches) each ran.
    passes_per_step: BTreeMap<u32, u64>,
    /// The DataLoader the steps' model took its batches from, as the hook last said.
    pub loader: Option<LoaderSetup>,
    /// What golow's hook itself took of each step, where it said.
    pub hook: Durations,
}

/// Past this share of a typical step, what golow's hook takes is said: the step's figures carry it.
pub const HOOK_NOTICE_SHARE: f64 = 0.05;

/// What golow's hook takes of a typical step: its median, and its share of the step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HookCost {
    pub ms: f64,
    pub share: f64,
}

impl PhasesState {
    /// Keeps a measured step of `interval_ms` at `t`. What the hook says is checked: times that are not finite or
    /// negative count as none, and phases that add up to more than the interval (threads that overlap) are scaled
    /// down to it, so that the five always add up to the interval.
    pub fn record(&mut self, t: f64, interval_ms: f64, phases: &StepPhases) {
        if let Some(split) = self.tally(interval_ms, phases) {
            let mut top = 0.0;
            for (stacked, ms) in self.stacked.iter_mut().zip(split) {
                top += ms;
                stacked.push(t, top);
            }
        }
    }

    /// Keeps a measured step's figures, uncharted (a rank's: only the worker's phases are charted); its split, when
    /// the interval was one.
    pub fn tally(&mut self, interval_ms: f64, phases: &StepPhases) -> Option<Split> {
        if !interval_ms.is_finite() || interval_ms <= 0.0 {
            return None;
        }
        let clean = |ms: f64| if ms.is_finite() { ms.max(0.0) } else { 0.0 };
        let mut split: Split = [
            clean(phases.data_ms),
            clean(phases.forward_ms),
            clean(phases.backward_ms),
            clean(phases.optimizer_ms),
            0.0,
        ];
        let timed: f64 = split.iter().sum();
        if timed > interval_ms {
            for ms in &mut split {
                *ms *= interval_ms / timed;
            }
        }
        split[4] = (interval_ms - split[..4].iter().sum::<f64>()).max(0.0);
        for (i, &ms) in split.iter().enumerate() {
            self.durations[i].record_ms(ms);
        }
        if let Some(ms) = phases.hook_ms.filter(|ms| ms.is_finite() && *ms >= 0.0) {
            self.hook.record_ms(ms.min(interval_ms));
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(split);
        *self
            .passes_per_step
            .entry(phases.forward_passes.min(MAX_PASSES))
            .or_default() += 1;
        Some(split)
    }

    pub fn steps(&self) -> u64 {
        self.durations[0].len()
    }

    /// A typical step of the whole run: each phase's median over the measured steps.
    pub fn typical(&self) -> Option<Split> {
        let mut split = [0.0; 5];
        for (ms, durations) in split.iter_mut().zip(&self.durations) {
            *ms = nothing_below_the_floor(durations.median_ms()?);
        }
        Some(split)
    }

    /// A typical step of the latest ones: each phase's median over them.
    pub fn typical_now(&self) -> Option<Split> {
        if self.recent.is_empty() {
            return None;
        }
        let mut split = [0.0; 5];
        for (i, ms) in split.iter_mut().enumerate() {
            let mut times: Vec<f64> = self.recent.iter().map(|step| step[i]).collect();
            times.sort_by(f64::total_cmp);
            *ms = times[(times.len() - 1) / 2];
        }
        Some(split)
    }

    /// Each phase's share of a typical step of the whole run.
    pub fn shares(&self) -> Option<Split> {
        self.typical().and_then(shares_of)
    }

    /// Each phase's share of a typical step of the latest ones.
    pub fn recent_shares(&self) -> Option<Split> {
        self.typical_now().and_then(shares_of)
    }

    /// What golow's hook takes of a typical step, where it said.
    pub fn hook_cost(&self) -> Option<HookCost> {
        let ms = nothing_below_the_floor(self.hook.median_ms()?);
        let step: f64 = self.typical()?.iter().sum();
        (step > 0.0).then_some(HookCost {
            ms,
            share: ms / step,
        })
    }

    /// Whether a typical step of the latest ones is input-bound.
    pub fn input_bound_now(&self) -> Option<InputBound> {
        if self.recent.len() < VERDICT_MIN_STEPS {
            return None;
        }
        InputBound::of(self.typical_now()?)
    }

    /// Whether a typical step of the whole run is input-bound.
    pub fn input_bound(&self) -> Option<InputBound> {
        if self.steps() < VERDICT_MIN_STEPS as u64 {
            return None;
        }
        InputBound::of(self.typical()?)
    }

    /// What golow says of an input-bound script: the verdict, and what the user can do about it with the
    /// DataLoader it has, in one line; no remedy where the wait is too short for one to pay off.
    pub fn input_bound_notice(&self, bound: InputBound) -> String {
        let verdict = format!(
            "input-bound: waiting on data takes {:.0}% of a typical step ({})",
            bound.share * 100.0,
            milliseconds(bound.data_ms)
        );
        if bound.data_ms < REMEDY_MIN_DATA_MS {
            return format!(
                "{verdict}; too short a wait for DataLoader workers to shorten: handing them each batch costs about \
                 as much"
            );
        }
        let remedy = match self.loader {
            None => "more DataLoader workers (num_workers), pin_memory=True on a GPU or a cheaper transform would \
                     shorten it"
                .to_string(),
            Some(loader) => {
                let mut remedy = if loader.num_workers == 0 {
                    "its DataLoader loads each batch in the training process (num_workers=0): worker processes \
                     (num_workers=4, say) or a cheaper transform would prepare the next batches meanwhile"
                        .to_string()
                } else {
                    format!(
                        "its DataLoader's {} workers do not keep up: more of them (num_workers) or a cheaper \
                         transform would shorten it",
                        loader.num_workers
                    )
                };
                if loader.cuda && !loader.pin_memory {
                    remedy.push_str("; pin_memory=True would speed its copies to the GPU");
                }
                remedy
            }
        };
        format!("{verdict}; {remedy}")
    }

    /// Forward passes per step, the median: more than one is gradient accumulation.
    pub fn micro_batches_per_step(&self) -> Option<u32> {
        let steps: u64 = self.passes_per_step.values().sum();
        let mut seen = 0;
        for (&passes, &count) in &self.passes_per_step {
            seen += count;
            if seen * 2 >= steps {
                return Some(passes);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::samples::step_phases;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-2 * b.abs().max(1e-3)
    }

    #[test]
    fn a_typical_steps_shares_add_up_to_one_and_agree_with_its_milliseconds() {
        let mut phases = PhasesState::default();
        for i in 0..9 {
            phases.record(f64::from(i), 100.0, &step_phases(30.0, 20.0, 35.0, 5.0));
        }
        let typical = phases.typical().unwrap();
        let shares = phases.shares().unwrap();
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let total: f64 = typical.iter().sum();
        for (share, ms) in shares.iter().zip(typical) {
            assert!((share - ms / total).abs() < 1e-12, "{shares:?} {typical:?}");
        }
        assert!(
            close(typical[0], 30.0) && close(typical[4], 10.0),
            "{typical:?}"
        );
        let tops: Vec<f64> = phases.stacked.iter().map(|s| s.last().unwrap().1).collect();
        assert_eq!(tops, [30.0, 50.0, 85.0, 90.0, 100.0]);
        assert_eq!(phases.steps(), 9);
    }

    #[test]
    fn a_slow_step_now_and_then_moves_neither_the_shares_nor_the_verdict() {
        // 65 ms steps, and an epoch's end now and then that waits 3 s on its data: the share of data stays what a
        // typical step spends on it (a total over total made it most of the run).
        let mut phases = PhasesState::default();
        for i in 0..40 {
            let (interval, data) = if i % 10 == 9 {
                (3134.0, 3100.0)
            } else {
                (65.0, 1.0)
            };
            phases.record(f64::from(i), interval, &step_phases(data, 20.0, 30.0, 4.0));
        }
        let shares = phases.shares().unwrap();
        assert!(close(shares[0], 1.0 / 65.0), "{shares:?}");
        assert_eq!(phases.input_bound(), None);
        assert_eq!(phases.input_bound_now(), None);
    }

    #[test]
    fn what_a_hostile_hook_says_is_bounded_by_the_interval() {
        let mut phases = PhasesState::default();
        phases.record(1.0, 10.0, &step_phases(f64::NAN, -5.0, 40.0, 40.0));
        let shares = phases.shares().unwrap();
        assert_eq!(shares, [0.0, 0.0, 0.5, 0.5, 0.0]);
        phases.record(2.0, f64::INFINITY, &step_phases(1.0, 1.0, 1.0, 1.0));
        phases.record(3.0, -1.0, &step_phases(1.0, 1.0, 1.0, 1.0));
        assert_eq!(phases.steps(), 1);
    }

    #[test]
    fn input_bound_once_data_is_a_fifth_of_a_typical_step_of_the_latest_ones() {
        let mut phases = PhasesState::default();
        for i in 0..VERDICT_MIN_STEPS - 1 {
            phases.record(i as f64, 100.0, &step_phases(50.0, 10.0, 10.0, 10.0));
        }
        assert_eq!(phases.input_bound_now(), None, "too few steps");
        phases.record(9.0, 100.0, &step_phases(50.0, 10.0, 10.0, 10.0));
        let now = phases.input_bound_now().unwrap();
        assert!(close(now.share, 0.5) && close(now.data_ms, 50.0), "{now:?}");
        let whole = phases.input_bound().unwrap();
        assert!(
            close(whole.share, phases.shares().unwrap()[0]),
            "the share the summary prints"
        );
        for i in 0..RECENT {
            phases.record(10.0 + i as f64, 100.0, &step_phases(10.0, 30.0, 40.0, 10.0));
        }
        assert_eq!(phases.input_bound_now(), None, "the latest steps are not");
        assert_eq!(phases.input_bound(), None, "nor most of the run's");
        let now = phases.recent_shares().unwrap();
        assert!(close(now[0], 0.1), "{now:?}");
    }

    #[test]
    fn the_input_bound_remedy_is_the_one_the_scripts_dataloader_needs_and_only_for_a_long_wait() {
        let long = InputBound {
            share: 0.5,
            data_ms: 40.0,
        };
        let mut phases = PhasesState::default();
        assert!(
            phases
                .input_bound_notice(long)
                .contains("more DataLoader workers (num_workers), pin_memory")
        );
        let mut said = step_phases(50.0, 10.0, 10.0, 10.0);
        said.loader = Some(LoaderSetup {
            num_workers: 0,
            pin_memory: false,
            cuda: false,
        });
        phases.loader = said.loader;
        let notice = phases.input_bound_notice(long);
        assert!(notice.starts_with("input-bound: waiting on data takes 50% of a typical step (40.0 ms); its DataLoader loads each batch in the training process (num_workers=0)"), "{notice}");
        assert!(!notice.contains("pin_memory"), "not on a CPU: {notice}");
        said.loader = Some(LoaderSetup {
            num_workers: 2,
            pin_memory: false,
            cuda: true,
        });
        phases.loader = said.loader;
        let notice = phases.input_bound_notice(long);
        assert!(
            notice.contains("its DataLoader's 2 workers do not keep up"),
            "{notice}"
        );
        assert!(
            notice.ends_with("; pin_memory=True would speed its copies to the GPU"),
            "{notice}"
        );
        said.loader = None;
        phases.record(3.0, 100.0, &said);
        assert!(
            phases.input_bound_notice(long).contains("2 workers"),
            "said once, kept"
        );
        // Half a millisecond of a millisecond's step: worker processes would cost more than they save.
        let short = InputBound {
            share: 0.3,
            data_ms: 0.5,
        };
        let notice = phases.input_bound_notice(short);
        assert!(
            notice.starts_with(
                "input-bound: waiting on data takes 30% of a typical step (500 µs); too short"
            ),
            "{notice}"
        );
        assert!(!notice.contains("num_workers"), "{notice}");
    }

    #[test]
    fn micro_batches_are_the_median_of_forward_passes_per_step() {
        let mut phases = PhasesState::default();
        assert_eq!(phases.micro_batches_per_step(), None);
        for passes in [4, 4, 1, 4, 9] {
            let mut split = step_phases(1.0, 1.0, 1.0, 1.0);
            split.forward_passes = passes;
            phases.record(1.0, 10.0, &split);
        }
        assert_eq!(phases.micro_batches_per_step(), Some(4));
    }

    #[test]
    fn durations_below_a_millisecond_print_in_microseconds() {
        assert_eq!(milliseconds(0.5), "500 µs");
        assert_eq!(milliseconds(0.0), "0 µs");
        assert_eq!(milliseconds(1.24), "1.2 ms");
        assert_eq!(milliseconds(3134.0), "3134 ms");
    }
}
