//! The GPU's records set on the steps that launched them, for per-step figures that count each step's own work.
//!
//! The worker stamps each step's span on the host's CLOCK_MONOTONIC; the collector sends with each window its
//! records' timeline (`Timeline`: kernels as runs of back-to-back launches, copies one by one) placed on the same
//! clock. A window arrives a second or two after the steps it saw, and may reach the fold before the step that
//! holds its last records has ended; so each record goes where its start lies, whichever came first: into the step
//! whose span holds it, before the first step (start-up: the weights' upload), in the gap after a step that ended
//! an epoch (its evaluation pass), in another gap, or, later than every step yet, held until a step comes that
//! holds it. A step is counted once the windows reach past its end, so that the steps divided by are the steps whose
//! records were counted. Step spans and held records are bounded: a record older than every span kept is counted as
//! unplaced.

use std::collections::VecDeque;

use golow_protocol::event::{CopyKind, KernelWindow, Run};

/// Steps remembered for placing records: windows come within seconds of their steps.
const MAX_SPANS: usize = 4096;
/// Records held while no step reaches them yet (a long evaluation, the end of the run).
const MAX_HELD: usize = 1 << 16;

/// What a step counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Timed: its records make the per-step figures.
    Measured,
    /// A warm-up, profiled or compiling step: a step, kept out of the figures as its times are.
    Unmeasured,
    /// An evaluation step inside a training run.
    Evaluation,
}

/// What a set of records adds up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Activity {
    pub kernel_launches: u64,
    /// Kernel busy time (two streams' overlap counted once).
    pub busy_ns: u64,
    pub h2d_bytes: u64,
    /// Kernels and copies of every kind.
    pub records: u64,
}

impl Activity {
    fn add(&mut self, other: Activity) {
        self.kernel_launches = self.kernel_launches.saturating_add(other.kernel_launches);
        self.busy_ns = self.busy_ns.saturating_add(other.busy_ns);
        self.h2d_bytes = self.h2d_bytes.saturating_add(other.h2d_bytes);
        self.records = self.records.saturating_add(other.records);
    }

    fn kernels(run: &Run) -> Activity {
        Activity {
            kernel_launches: run.count,
            busy_ns: run.amount,
            h2d_bytes: 0,
            records: run.count,
        }
    }

    fn copies(kind: CopyKind, run: &Run) -> Activity {
        Activity {
            h2d_bytes: if kind == CopyKind::HostToDevice {
                run.amount
            } else {
                0
            },
            records: run.count,
            ..Activity::default()
        }
    }
}

#[derive(Debug, Clone)]
struct Span {
    start_ns: u64,
    end_ns: u64,
    kind: StepKind,
    /// An epoch ended with it and an evaluation pass followed: the gap after it is that pass.
    evaluation_follows: bool,
    /// What was placed in it before the windows reached past its end.
    held: Activity,
}

/// Where a worker's GPU records lay: in its measured steps, and apart from them.
#[derive(Debug, Clone, Default)]
pub struct PerStep {
    spans: VecDeque<Span>,
    /// Spans from here on end after what the windows have covered: not counted yet.
    unsettled_from: usize,
    /// The first span ever was forgotten: a record before every span kept is no longer start-up.
    forgot_spans: bool,
    covered_until_ns: u64,
    /// Records later than every span, by start.
    held: Vec<(u64, Activity)>,
    timelines: u64,
    /// Measured steps without a span (a worker from before golow stamped them).
    unspanned_steps: u64,
    /// Measured steps the windows reached past, whose records make `measured`.
    pub measured_steps: u64,
    pub measured: Activity,
    /// Warm-up, profiled and compiling steps.
    pub unmeasured: Activity,
    /// Before the first step: start-up, the weights' upload.
    pub start_up: Activity,
    /// Evaluation passes: at an epoch's end, and evaluation steps of a training run.
    pub evaluation: Activity,
    /// In a gap between steps with no evaluation.
    pub between_steps: Activity,
    /// Older than every step remembered, or beyond what can be held.
    pub unplaced: Activity,
}

impl PerStep {
    /// A step of the worker's, with its span on the host's monotonic clock where the worker stamped one.
    pub fn step(&mut self, span: Option<(u64, u64)>, kind: StepKind) {
        let last_end = self.spans.back().map_or(0, |s| s.end_ns);
        let Some((start, end)) = span.filter(|&(start, end)| end >= start && end >= last_end)
        else {
            if kind == StepKind::Measured {
                self.unspanned_steps += 1;
            }
            return;
        };
        self.spans.push_back(Span {
            start_ns: start.max(last_end),
            end_ns: end,
            kind,
            evaluation_follows: false,
            held: Activity::default(),
        });
        if self.spans.len() > MAX_SPANS {
            self.forget_oldest_span();
        }
        let reached = self.held.partition_point(|&(t, _)| t < end);
        for (t, activity) in self.held.drain(..reached).collect::<Vec<_>>() {
            self.place(t, activity);
        }
        self.settle();
    }

    /// The latest step ended an epoch, and an evaluation pass followed it.
    pub fn evaluated(&mut self) {
        if let Some(last) = self.spans.back_mut() {
            last.evaluation_follows = true;
        }
    }

    /// Places a window's records, where it brought a timeline placed on the host's clock.
    pub fn window(&mut self, window: &KernelWindow) {
        let (Some(timeline), Some(origin), Some(end)) = (
            &window.timeline,
            window.monotonic_start_ns,
            window.monotonic_end_ns,
        ) else {
            return;
        };
        self.timelines += 1;
        let at = |run: &Run| u64::try_from(i128::from(origin) + i128::from(run.start)).ok();
        let kernels = timeline
            .kernels
            .iter()
            .map(|r| (at(r), Activity::kernels(r)));
        let copies = timeline
            .copies
            .iter()
            .flat_map(|c| c.runs.iter().map(|r| (at(r), Activity::copies(c.kind, r))));
        for (t, activity) in kernels.chain(copies).collect::<Vec<_>>() {
            match t {
                Some(t) => self.place(t, activity),
                None => self.unplaced.add(activity),
            }
        }
        self.covered_until_ns = self.covered_until_ns.max(end);
        self.settle();
    }

    fn place(&mut self, t: u64, activity: Activity) {
        if self.spans.back().is_none_or(|last| t >= last.end_ns) {
            if self.held.len() < MAX_HELD {
                let at = self.held.partition_point(|&(held, _)| held <= t);
                self.held.insert(at, (t, activity));
            } else {
                self.unplaced.add(activity);
            }
            return;
        }
        let i = self.spans.partition_point(|s| s.start_ns <= t);
        let Some(before) = i.checked_sub(1) else {
            if self.forgot_spans {
                self.unplaced.add(activity);
            } else {
                self.start_up.add(activity);
            }
            return;
        };
        let span = &mut self.spans[before];
        if t >= span.end_ns {
            let gap = if span.evaluation_follows {
                &mut self.evaluation
            } else {
                &mut self.between_steps
            };
            gap.add(activity);
        } else if before >= self.unsettled_from {
            span.held.add(activity);
        } else {
            let kind = span.kind;
            self.of_kind(kind).add(activity);
        }
    }

    fn of_kind(&mut self, kind: StepKind) -> &mut Activity {
        match kind {
            StepKind::Measured => &mut self.measured,
            StepKind::Unmeasured => &mut self.unmeasured,
            StepKind::Evaluation => &mut self.evaluation,
        }
    }

    /// Counts the steps the windows have reached past, with what was placed in them.
    fn settle(&mut self) {
        while let Some(span) = self
            .spans
            .get(self.unsettled_from)
            .filter(|s| s.end_ns <= self.covered_until_ns)
        {
            let (kind, held) = (span.kind, span.held);
            self.of_kind(kind).add(held);
            if kind == StepKind::Measured {
                self.measured_steps += 1;
            }
            self.unsettled_from += 1;
        }
    }

    fn forget_oldest_span(&mut self) {
        if let Some(oldest) = self.spans.pop_front() {
            if self.unsettled_from == 0 {
                self.unplaced.add(oldest.held);
            }
            self.unsettled_from = self.unsettled_from.saturating_sub(1);
            self.forgot_spans = true;
        }
    }

    /// Whether the records were set on steps: the collector sent timelines and every measured step had a span.
    pub fn placed(&self) -> bool {
        self.timelines > 0 && self.unspanned_steps == 0 && self.measured_steps > 0
    }

    fn per_step(&self, total: u64) -> Option<f64> {
        self.placed()
            .then(|| total as f64 / self.measured_steps as f64)
    }

    /// Kernel launches per measured step; `None` where the records were not set on steps.
    pub fn kernel_launches(&self) -> Option<f64> {
        self.per_step(self.measured.kernel_launches)
    }

    /// Host-to-device bytes per measured step as CUPTI measured them.
    pub fn h2d_bytes(&self) -> Option<f64> {
        self.per_step(self.measured.h2d_bytes)
    }

    /// Kernel busy milliseconds per measured step.
    pub fn busy_ms(&self) -> Option<f64> {
        self.per_step(self.measured.busy_ns).map(|ns| ns / 1e6)
    }

    /// Records later than every step so far: the run's end, or a pass its next step has not closed yet.
    pub fn after_last_step(&self) -> Activity {
        let mut after = Activity::default();
        for &(_, activity) in &self.held {
            after.add(activity);
        }
        after
    }
}

#[cfg(test)]
mod tests {
    use golow_protocol::event::{Body, Epoch, KernelWindow, Record, Step};
    use serde_json::json;

    use crate::state::State;

    /// What the worker itself counts of each measured step: the launches its model makes, the GPU time they take,
    /// and the bytes of its batch.
    const LAUNCHES: u64 = 821;
    const BUSY_NS: u64 = 61_000_000;
    const BATCH_BYTES: u64 = 196_736;
    const MS: u64 = 1_000_000;
    const SECOND: u64 = 1_000 * MS;
    /// The host's monotonic clock when the test's worker starts.
    const T0: u64 = 50 * SECOND;

    /// A record, as the monitor stamps it, of what a worker or its collector said (from JSON, as they write it).
    #[derive(Default)]
    struct Run {
        records: Vec<(u64, Body)>,
        /// Records of the GPU: (start on the host's clock, end, launches, busy ns, H2D bytes).
        gpu: Vec<(u64, u64, u64, u64, u64)>,
    }

    impl Run {
        /// A step of 100 ms from `start`: its batch copied, then its kernels in four runs of back-to-back launches.
        fn step(&mut self, n: u64, start: u64, warmup: bool) -> u64 {
            let end = start + 100 * MS;
            self.gpu
                .push((start + 2 * MS, start + 3 * MS, 0, 0, BATCH_BYTES));
            for run in 0..4 {
                let at = start + 5 * MS + run * 20 * MS;
                let launches = LAUNCHES / 4 + u64::from(run == 0) * (LAUNCHES % 4);
                self.gpu
                    .push((at, at + BUSY_NS / 4, launches, BUSY_NS / 4, 0));
            }
            let body = json!({"type": "step", "step": n, "epoch": 0, "phase": "train", "batch_size": 32,
                "data_ms": 1.0, "h2d_ms": 1.0, "h2d_bytes": BATCH_BYTES, "compute_ms": 95.0, "loss": 2.0,
                "correct": 3, "warmup": warmup, "start_ns": start, "end_ns": end});
            self.records.push((
                end,
                Body::Step(serde_json::from_value::<Step>(body).unwrap()),
            ));
            end
        }

        /// Collector windows of a second each, from `first`, each arriving `late_by` after its end.
        fn windows(&mut self, first: u64, last: u64, late_by: u64) {
            let mut start = first;
            while start < last {
                let end = start + SECOND;
                let inside = |&&(at, ..): &&(u64, u64, u64, u64, u64)| (start..end).contains(&at);
                let runs: Vec<_> = self.gpu.iter().filter(inside).collect();
                let offset = |t: u64| t as i64 - start as i64;
                let kernels: Vec<_> = runs
                    .iter()
                    .filter(|r| r.2 > 0)
                    .map(|&&(s, e, n, busy, _)| json!([offset(s), offset(e), n, busy]))
                    .collect();
                let copies: Vec<_> = runs
                    .iter()
                    .filter(|r| r.4 > 0)
                    .map(|&&(s, e, _, _, bytes)| json!([offset(s), offset(e), 1, bytes]))
                    .collect();
                // The window's totals, as the collector sends them beside its timeline.
                let sum = |field: fn(&(u64, u64, u64, u64, u64)) -> u64| {
                    runs.iter().map(|r| field(r)).sum::<u64>()
                };
                let (launches, busy) = (sum(|r| r.2), sum(|r| r.3));
                let h2d = (sum(|r| u64::from(r.4 > 0)), sum(|r| r.4));
                let totals = json!({"name": "k", "count": launches, "total_ns": busy, "max_ns": busy,
                    "grid": [1, 1, 1], "block": [128, 1, 1], "shapes": 1, "registers_per_thread": 32,
                    "shared_bytes": 0, "grid_histogram": [[[1, 1, 1], launches]]});
                let copied = json!({"kind": "host_to_device", "src": "pinned", "count": h2d.0, "bytes": h2d.1,
                    "total_ns": h2d.0 * MS});
                let window = json!({"window_start_ns": 0, "window_end_ns": SECOND, "kernels": [totals],
                    "copies": [copied],
                    "breakdown": {"busy": 0.5, "copy": 0.0, "idle": 0.5}, "dropped_records": 0,
                    "monotonic_start_ns": start, "monotonic_end_ns": end,
                    "timeline": {"kernels": kernels, "copies": [{"kind": "host_to_device", "src": "pinned",
                        "runs": copies}], "merged": 0}});
                let window: KernelWindow = serde_json::from_value(window).unwrap();
                self.records
                    .push((end + late_by, Body::Kernels(Box::new(window))));
                start = end;
            }
        }

        /// The state the monitor folds, in the order the records arrived.
        fn fold(mut self) -> State {
            self.records.sort_by_key(|r| r.0);
            let mut state = State::default();
            for (at, body) in self.records {
                let t = (at - T0) as f64 / 1e9;
                state.apply(&Record::new(t, Some("libtorch".into()), body));
            }
            state
        }
    }

    fn assert_within_a_percent(figure: Option<f64>, truth: u64, what: &str) {
        let figure = figure.unwrap_or_else(|| panic!("no {what} per step"));
        assert!(
            (figure - truth as f64).abs() <= 0.01 * truth as f64,
            "{what}: {figure} per step where the worker counts {truth}"
        );
    }

    fn assert_the_workers_own_counts(state: &State) {
        let per_step = &state.workers[0].gpu_activity.per_step;
        assert_within_a_percent(per_step.kernel_launches(), LAUNCHES, "launches");
        assert_within_a_percent(per_step.h2d_bytes(), BATCH_BYTES, "H2D bytes");
        assert_within_a_percent(per_step.busy_ms().map(|ms| ms * 1e6), BUSY_NS, "busy ns");
    }

    #[test]
    fn windows_arriving_after_later_steps_count_each_step_once() {
        let mut run = Run::default();
        let mut at = T0;
        for n in 0..60 {
            at = run.step(n, at, n < 3) + 2 * MS;
        }
        // Each window arrives 1.7 s after its end: some seventeen steps later.
        run.windows(T0, at + SECOND, 1_700 * MS);
        let state = run.fold();
        assert_the_workers_own_counts(&state);
        let per_step = &state.workers[0].gpu_activity.per_step;
        assert_eq!(per_step.measured_steps, 57);
        assert_eq!(per_step.unmeasured.h2d_bytes, 3 * BATCH_BYTES);
    }

    #[test]
    fn the_weights_upload_and_an_epochs_evaluation_are_counted_apart() {
        let mut run = Run::default();
        // The weights go up half a second before the first step; two epochs of 25 steps, each with an
        // evaluation pass of 40 batches after it.
        let weights = 44_700_000;
        run.gpu.push((T0 - 500 * MS, T0 - 480 * MS, 0, 0, weights));
        let (mut at, mut evaluated) = (T0, 0);
        for epoch in 0..2 {
            for n in 0..25 {
                at = run.step(epoch * 25 + n, at, epoch == 0 && n < 2) + MS;
            }
            for batch in 0..40 {
                let start = at + batch * 10 * MS;
                run.gpu.push((start, start + MS, 0, 0, BATCH_BYTES));
                run.gpu
                    .push((start + 2 * MS, start + 8 * MS, 120, 6 * MS, 0));
                evaluated += 120;
            }
            at += 400 * MS;
            let eval = Epoch {
                epoch,
                complete: true,
                train_loss: Some(2.0),
                train_accuracy: Some(0.1),
                eval_loss: Some(2.1),
                eval_accuracy: Some(0.1),
            };
            run.records.push((at, Body::Epoch(eval)));
        }
        // Windows arrive 2.5 s late: after the next epoch's first steps.
        run.windows(T0 - SECOND, at + SECOND, 2_500 * MS);
        let state = run.fold();
        assert_the_workers_own_counts(&state);
        let per_step = &state.workers[0].gpu_activity.per_step;
        assert_eq!(per_step.start_up.h2d_bytes, weights);
        // The last epoch's evaluation follows the last step: no step has closed it.
        assert_eq!(per_step.evaluation.kernel_launches, evaluated / 2);
        assert_eq!(per_step.evaluation.h2d_bytes, 40 * BATCH_BYTES);
        assert_eq!(per_step.after_last_step().kernel_launches, evaluated / 2);
        assert_eq!(per_step.unplaced, super::Activity::default());
    }

    #[test]
    fn a_recording_without_spans_or_timelines_has_no_per_step_figures() {
        let mut run = Run::default();
        let mut at = T0;
        for n in 0..20 {
            at = run.step(n, at, n < 2) + MS;
        }
        run.windows(T0, at + SECOND, 1_500 * MS);
        for (_, body) in &mut run.records {
            match body {
                Body::Step(step) => (step.start_ns, step.end_ns) = (None, None),
                Body::Kernels(window) => window.timeline = None,
                _ => {}
            }
        }
        let state = run.fold();
        let per_step = &state.workers[0].gpu_activity.per_step;
        assert_eq!(per_step.kernel_launches(), None);
        assert_eq!(per_step.h2d_bytes(), None);
        assert!(state.workers[0].gpu_activity.windows >= 3);
    }

    #[test]
    fn steps_and_held_records_stay_bounded() {
        let mut per_step = super::PerStep::default();
        for i in 0..(super::MAX_SPANS as u64 + 10) {
            per_step.step(Some((i * 10, i * 10 + 5)), super::StepKind::Measured);
        }
        assert_eq!(per_step.spans.len(), super::MAX_SPANS);
        let far = golow_protocol::event::Run::from((0, 1, 1, 1));
        let window = |start: u64| KernelWindow {
            timeline: Some(golow_protocol::event::Timeline {
                kernels: vec![far; 1000],
                ..Default::default()
            }),
            monotonic_start_ns: Some(start),
            monotonic_end_ns: Some(start + 1),
            ..golow_protocol::samples::kernel_window(Vec::new())
        };
        // Before every span kept: unplaced; after every span: held, up to a bound.
        per_step.window(&window(0));
        assert_eq!(per_step.unplaced.kernel_launches, 1000);
        for _ in 0..(super::MAX_HELD / 1000 + 2) {
            per_step.window(&window(u64::MAX / 2));
        }
        assert_eq!(per_step.held.len(), super::MAX_HELD);
        assert!(per_step.unplaced.kernel_launches > 1000);
    }
}
