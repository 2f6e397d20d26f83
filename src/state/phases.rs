//! Where a `--cmd` script's steps spend their time: the phases the hook timed on the host (waiting on data, the
//! model's forward passes, backward passes, the optimiser) and the rest of each step's interval (`other`), for the
//! worker's measured steps. Also whether the script is input-bound: waiting on its data for a fifth of its steps or
//! more.

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

/// A step is input-bound when waiting on data takes at least this share of it (the median over `RECENT` steps).
const INPUT_BOUND_SHARE: f64 = 0.2;

/// The steps the verdict and the shares now are taken over.
const RECENT: usize = 20;

/// Fewer measured steps give no verdict: one slow first batch is not a pattern.
const VERDICT_MIN_STEPS: usize = 5;

/// Passes per step told apart; more count as this many.
const MAX_PASSES: u32 = 4096;

/// One step's phases in milliseconds, in the order of [`Phase::ALL`], adding up to its interval.
pub type Split = [f64; 5];

/// The phases of the worker's measured steps.
#[derive(Debug, Clone, Default)]
pub struct PhasesState {
    /// Each phase's time per step.
    pub durations: [Durations; 5],
    /// Each phase's total, and the steps' intervals': the shares of the whole run.
    totals_ms: Split,
    interval_total_ms: f64,
    /// Over time, the top of each phase stacked on those before it (data, data + forward, …, the interval): a
    /// stacked band.
    pub stacked: [Series; 5],
    /// The latest steps' phases.
    recent: VecDeque<Split>,
    /// Steps by how many forward passes (micro-batches) each ran.
    passes_per_step: BTreeMap<u32, u64>,
    /// Each measured step's share of data, to tell whether the whole run was input-bound.
    data_share: Durations,
    /// The DataLoader the steps' model took its batches from, as the hook last said.
    pub loader: Option<LoaderSetup>,
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
            self.totals_ms[i] += ms;
        }
        self.interval_total_ms += interval_ms;
        self.data_share.record_ms(split[0] / interval_ms);
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

    /// Each phase's share of the whole run's measured steps.
    pub fn shares(&self) -> Option<Split> {
        (self.interval_total_ms > 0.0).then(|| self.totals_ms.map(|ms| ms / self.interval_total_ms))
    }

    /// Each phase's share of the latest steps together.
    pub fn recent_shares(&self) -> Option<Split> {
        let mut sums = [0.0; 5];
        for split in &self.recent {
            for (sum, ms) in sums.iter_mut().zip(split) {
                *sum += ms;
            }
        }
        let total: f64 = sums.iter().sum();
        (total > 0.0).then(|| sums.map(|ms| ms / total))
    }

    /// The median share of data over the latest steps, when it makes them input-bound.
    pub fn input_bound_now(&self) -> Option<f64> {
        if self.recent.len() < VERDICT_MIN_STEPS {
            return None;
        }
        let mut shares: Vec<f64> = self
            .recent
            .iter()
            .map(|split| split[0] / split.iter().sum::<f64>())
            .collect();
        shares.sort_by(f64::total_cmp);
        let median = shares[shares.len() / 2];
        (median >= INPUT_BOUND_SHARE).then_some(median)
    }

    /// The median share of data over every measured step, when it makes the run input-bound.
    pub fn input_bound(&self) -> Option<f64> {
        if self.steps() < VERDICT_MIN_STEPS as u64 {
            return None;
        }
        // Shares are kept as if they were milliseconds: the histogram's resolution is relative.
        self.data_share
            .median_ms()
            .filter(|&share| share >= INPUT_BOUND_SHARE)
    }

    /// What golow says of an input-bound script whose data takes `share` of its steps: the verdict, and what the
    /// user can do about it with the DataLoader it has, in one line.
    pub fn input_bound_notice(&self, share: f64) -> String {
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
        format!(
            "input-bound: waiting on data takes {:.0}% of a step (median); {remedy}",
            share * 100.0
        )
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

    #[test]
    fn the_five_add_up_to_the_interval_and_their_shares_to_one() {
        let mut phases = PhasesState::default();
        phases.record(1.0, 100.0, &step_phases(30.0, 20.0, 35.0, 5.0));
        phases.record(2.0, 50.0, &step_phases(0.0, 20.0, 25.0, 5.0));
        let shares = phases.shares().unwrap();
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((shares[0] - 30.0 / 150.0).abs() < 1e-12, "{shares:?}");
        assert!(
            (shares[4] - 10.0 / 150.0).abs() < 1e-12,
            "other: {shares:?}"
        );
        let tops: Vec<f64> = phases.stacked.iter().map(|s| s.last().unwrap().1).collect();
        assert_eq!(tops, [0.0, 20.0, 45.0, 50.0, 50.0]);
        assert_eq!(phases.steps(), 2);
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
    fn input_bound_once_data_is_a_fifth_of_the_latest_steps() {
        let mut phases = PhasesState::default();
        for i in 0..VERDICT_MIN_STEPS - 1 {
            phases.record(i as f64, 100.0, &step_phases(50.0, 10.0, 10.0, 10.0));
        }
        assert_eq!(phases.input_bound_now(), None, "too few steps");
        phases.record(9.0, 100.0, &step_phases(50.0, 10.0, 10.0, 10.0));
        assert_eq!(phases.input_bound_now(), Some(0.5));
        assert!(phases.input_bound().is_some_and(|s| (s - 0.5).abs() < 1e-3));
        for i in 0..RECENT {
            phases.record(10.0 + i as f64, 100.0, &step_phases(10.0, 30.0, 40.0, 10.0));
        }
        assert_eq!(phases.input_bound_now(), None, "the latest steps are not");
        assert_eq!(phases.input_bound(), None, "nor most of the run's");
        let now = phases.recent_shares().unwrap();
        assert!((now[0] - 0.1).abs() < 1e-12, "{now:?}");
    }

    #[test]
    fn the_input_bound_remedy_is_the_one_the_scripts_dataloader_needs() {
        let mut phases = PhasesState::default();
        assert!(
            phases
                .input_bound_notice(0.5)
                .contains("more DataLoader workers (num_workers), pin_memory")
        );
        let mut said = step_phases(50.0, 10.0, 10.0, 10.0);
        said.loader = Some(LoaderSetup {
            num_workers: 0,
            pin_memory: false,
            cuda: false,
        });
        phases.loader = said.loader;
        let notice = phases.input_bound_notice(0.5);
        assert!(notice.starts_with("input-bound: waiting on data takes 50% of a step (median); its DataLoader loads each batch in the training process (num_workers=0)"), "{notice}");
        assert!(!notice.contains("pin_memory"), "not on a CPU: {notice}");
        said.loader = Some(LoaderSetup {
            num_workers: 2,
            pin_memory: false,
            cuda: true,
        });
        phases.loader = said.loader;
        let notice = phases.input_bound_notice(0.5);
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
            phases.input_bound_notice(0.5).contains("2 workers"),
            "said once, kept"
        );
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
}
