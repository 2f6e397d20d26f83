//! Sessions of the same implementations, B against A: per implementation (or pair of implementations named apart)
//! and metric, the ratio B/A, its interval where the metric has a spread (within one session a side, or between
//! several), and whether it is a regression — worse by more than the threshold (TorchBench's 7%) and, where noise can
//! be judged, beyond noise — unless the sessions' setups or conditions make the metric one not to judge, or one
//! session a side holds too few measured steps for its interval to be trusted.

use crate::state::ratio::{
    Interval, MIN_VERDICT_SAMPLES, Ratio, median_interval, ratio_between_sessions,
    ratio_of_intervals,
};
use crate::state::{Durations, State, WorkerState};

/// Which way is worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    Higher,
    Lower,
}

/// What a metric's figures are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Ms,
    PerSecond,
    Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The implementation, or `A's→B's` for a pair of differently named ones.
    pub worker: String,
    pub metric: &'static str,
    pub unit: Unit,
    /// The figure over A's and B's sessions (their geometric mean when there are several).
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B/A with its 95% interval; the interval is the point itself for single numbers (peaks, bytes).
    pub ratio: Option<Ratio>,
    pub worse: Worse,
    pub regression: bool,
    /// Why the row is shown but not judged (the sessions' steps or conditions differ, too few measured steps).
    pub not_judged: Option<String>,
    /// It is not judged because a session holds too few measured steps: a verdict was asked for and none can be given.
    pub too_few_steps: bool,
}

/// What a row says of B against A.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'r> {
    NotJudged(&'r str),
    Regression,
    /// No ratio to judge (a figure missing on a side, or too few steps for an interval).
    NotComparable,
    /// The ratio's interval holds 1: no difference beyond noise.
    WithinNoise,
    /// Not worse by more than the threshold (or better).
    Ok,
}

impl Row {
    pub fn verdict(&self) -> Verdict<'_> {
        match (&self.not_judged, self.regression, self.ratio) {
            (Some(why), ..) => Verdict::NotJudged(why),
            (None, true, _) => Verdict::Regression,
            (None, false, None) => Verdict::NotComparable,
            (None, false, Some(r)) if r.low < r.high && !r.beyond_noise() => Verdict::WithinNoise,
            (None, false, Some(_)) => Verdict::Ok,
        }
    }
}

/// What may not be judged, and why; set from the sessions' setups and conditions.
#[derive(Debug, Clone, Default)]
pub struct Judging {
    /// A and B did different work (training against evaluation): nothing is judged.
    pub all: Option<String>,
    /// A step of A and one of B hold different work (batch, resolution, model): per-step figures are not judged.
    pub per_step: Option<String>,
    /// The sessions ran under different conditions: no time is judged.
    pub times: Option<String>,
}

fn point(a: Option<f64>, b: Option<f64>) -> Option<Ratio> {
    let (a, b) = (a?, b?);
    (a > 0.0 && b.is_finite()).then(|| {
        let ratio = b / a;
        Ratio {
            ratio,
            low: ratio,
            high: ratio,
        }
    })
}

fn regressed(ratio: Option<Ratio>, worse: Worse, threshold: f64) -> bool {
    let Some(r) = ratio else { return false };
    match worse {
        // The whole interval beyond the threshold: worse by more than it, and beyond noise.
        Worse::Higher => r.ratio > 1.0 + threshold && r.low > 1.0,
        Worse::Lower => r.ratio < 1.0 - threshold && r.high < 1.0,
    }
}

/// The geometric mean of the sessions' figures, over those that have one.
fn geometric_mean(values: &[Option<f64>]) -> Option<f64> {
    let logs: Vec<f64> = values
        .iter()
        .flatten()
        .filter(|v| v.is_finite() && **v > 0.0)
        .map(|v| v.ln())
        .collect();
    if logs.is_empty() {
        return values.iter().flatten().copied().next();
    }
    Some((logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// How a metric is read from a worker, and judged.
enum Measure {
    /// A distribution over steps: within one session, its median's interval; between sessions, their spread.
    Spread(fn(&WorkerState) -> &Durations),
    /// Samples per second at the median time per sample, with that median's interval turned over: it orders
    /// sessions as their time per sample does, and its estimate lies inside its interval.
    Throughput,
    /// A single figure per session (a peak, a mean): judged by the threshold alone.
    Point(fn(&WorkerState) -> Option<f64>),
}

struct Metric {
    name: &'static str,
    unit: Unit,
    measure: Measure,
    worse: Worse,
    per_step: bool,
    time: bool,
}

const METRICS: [Metric; 7] = [
    Metric {
        name: "median step time (ms)",
        unit: Unit::Ms,
        measure: Measure::Spread(|w| &w.step_time),
        worse: Worse::Higher,
        per_step: true,
        time: true,
    },
    Metric {
        name: "median time per sample (ms)",
        unit: Unit::Ms,
        measure: Measure::Spread(|w| &w.sample_time),
        worse: Worse::Higher,
        per_step: false,
        time: true,
    },
    Metric {
        name: "throughput (samples/s)",
        unit: Unit::PerSecond,
        measure: Measure::Throughput,
        worse: Worse::Lower,
        per_step: false,
        time: true,
    },
    Metric {
        name: "peak host RSS",
        unit: Unit::Bytes,
        measure: Measure::Point(|w| Some(w.peak_rss_bytes as f64)),
        worse: Worse::Higher,
        per_step: false,
        time: false,
    },
    Metric {
        name: "peak GPU memory",
        unit: Unit::Bytes,
        measure: Measure::Point(|w| w.peak_gpu_memory_bytes.map(|b| b as f64)),
        worse: Worse::Higher,
        per_step: false,
        time: false,
    },
    Metric {
        name: "median H2D time (ms)",
        unit: Unit::Ms,
        measure: Measure::Spread(|w| &w.h2d),
        worse: Worse::Higher,
        per_step: true,
        time: true,
    },
    Metric {
        name: "H2D per step",
        unit: Unit::Bytes,
        measure: Measure::Point(|w| w.h2d_bytes_per_step().map(|b| b as f64)),
        worse: Worse::Higher,
        per_step: true,
        time: false,
    },
];

/// One metric of one worker in one session: its figure and, for a distribution, its median's interval and how many
/// measured steps it is drawn from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Figure {
    value: Option<f64>,
    interval: Option<Interval>,
    steps: Option<u64>,
}

impl Metric {
    fn figure(&self, w: &WorkerState) -> Figure {
        match self.measure {
            Measure::Spread(durations) => Figure {
                value: durations(w).median_ms(),
                interval: median_interval(durations(w)),
                steps: Some(durations(w).len()),
            },
            Measure::Throughput => Figure {
                value: w.throughput(),
                interval: median_interval(&w.sample_time).and_then(per_second),
                steps: Some(w.sample_time.len()),
            },
            Measure::Point(value) => Figure {
                value: value(w),
                interval: None,
                steps: None,
            },
        }
    }

    /// B/A over one session each (the spread within them) or several (the spread between them).
    fn ratio(&self, a: &[Figure], b: &[Figure]) -> Option<Ratio> {
        let values = |side: &[Figure]| side.iter().map(|f| f.value).collect::<Vec<_>>();
        match (&self.measure, a, b) {
            (Measure::Point(_), ..) => {
                point(geometric_mean(&values(a)), geometric_mean(&values(b)))
            }
            (_, [a], [b]) => ratio_of_intervals(&b.interval?, &a.interval?),
            _ => {
                let all =
                    |side: &[Figure]| side.iter().map(|f| f.value).collect::<Option<Vec<f64>>>();
                ratio_between_sessions(&all(a)?, &all(b)?)
            }
        }
    }
}

/// A median time per sample's interval as samples per second: the slowest time gives the lowest rate.
fn per_second(ms: Interval) -> Option<Interval> {
    (ms.low > 0.0).then(|| Interval {
        median: 1e3 / ms.median,
        low: 1e3 / ms.high,
        high: 1e3 / ms.low,
    })
}

/// What the verdicts need of one worker in one session: a figure per metric, a few numbers whatever the session's
/// length, so that comparing hundreds of sessions holds none of them whole.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerFigures {
    pub name: String,
    figures: [Figure; METRICS.len()],
}

impl WorkerFigures {
    pub fn of(w: &WorkerState) -> WorkerFigures {
        WorkerFigures {
            name: w.name.clone(),
            figures: std::array::from_fn(|i| METRICS[i].figure(w)),
        }
    }
}

/// Every worker's figures in one session.
pub fn figures(state: &State) -> Vec<WorkerFigures> {
    state.workers.iter().map(WorkerFigures::of).collect()
}

/// Why a ratio drawn from one session a side is not to be judged: a side whose median rests on too few measured steps
/// for its interval to leave out the extreme ones (`MIN_VERDICT_SAMPLES`). With several sessions a side the interval
/// comes from the spread between them, which a short session widens by itself.
fn too_few_steps(a: &[Figure], b: &[Figure]) -> Option<String> {
    let ([a], [b]) = (a, b) else { return None };
    let short: Vec<String> = [("A", a.steps?), ("B", b.steps?)]
        .into_iter()
        .filter(|&(_, steps)| steps < MIN_VERDICT_SAMPLES)
        .map(|(side, steps)| format!("{steps} in {side}"))
        .collect();
    (!short.is_empty()).then(|| {
        format!(
            "too few measured steps ({}; {MIN_VERDICT_SAMPLES} needed)",
            short.join(" and ")
        )
    })
}

fn rows_for(
    label: &str,
    (a, b): (&[&WorkerFigures], &[&WorkerFigures]),
    threshold: f64,
    judging: &Judging,
) -> Vec<Row> {
    METRICS
        .iter()
        .enumerate()
        .map(|(i, metric)| {
            let figures = |side: &[&WorkerFigures]| -> Vec<Figure> {
                side.iter().map(|w| w.figures[i]).collect()
            };
            let (fa, fb) = (figures(a), figures(b));
            let ratio = metric.ratio(&fa, &fb);
            let values = |side: &[Figure]| side.iter().map(|f| f.value).collect::<Vec<_>>();
            let set_apart = [
                (true, &judging.all),
                (metric.per_step, &judging.per_step),
                (metric.time, &judging.times),
            ]
            .into_iter()
            .find_map(|(applies, why)| why.clone().filter(|_| applies));
            let too_few = too_few_steps(&fa, &fb).filter(|_| set_apart.is_none());
            let not_judged = set_apart.or_else(|| too_few.clone());
            Row {
                worker: label.to_string(),
                metric: metric.name,
                unit: metric.unit,
                a: geometric_mean(&values(&fa)),
                b: geometric_mean(&values(&fb)),
                ratio,
                worse: metric.worse,
                regression: not_judged.is_none() && regressed(ratio, metric.worse, threshold),
                not_judged,
                too_few_steps: too_few.is_some(),
            }
        })
        .filter(|r| r.a.is_some() || r.b.is_some())
        .collect()
}

/// A worker of A compared with a worker of B of another name (`--pair old=new`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub a: String,
    pub b: String,
}

/// Which of B's workers each of A's meets: its pair's, else the one of its name, unless a pair took that one.
struct Meeting<'p> {
    pairs: &'p [Pair],
}

impl Meeting<'_> {
    /// The name in B that A's `name` meets; `None` when a pair took B's worker of its name.
    fn in_b<'n>(&'n self, name: &'n str) -> Option<&'n str> {
        match self.pairs.iter().find(|p| p.a == name) {
            Some(p) => Some(&p.b),
            None => (!self.pairs.iter().any(|p| p.b == name)).then_some(name),
        }
    }

    /// How rows of A's `name` are labelled: `old→new` for a pair of two names.
    fn label(&self, name: &str) -> String {
        match self.in_b(name) {
            Some(in_b) if in_b != name => format!("{name}→{in_b}"),
            _ => name.to_string(),
        }
    }
}

/// `name` in each of a side's sessions; `None` when one lacks it.
fn side<'s>(sessions: &[&'s [WorkerFigures]], name: &str) -> Option<Vec<&'s WorkerFigures>> {
    sessions
        .iter()
        .map(|s| s.iter().find(|w| w.name == name))
        .collect()
}

/// Where an implementation that is not in every session ran: "it ran in A only", or session by session.
fn presence(a: &[&[WorkerFigures]], b: &[&[WorkerFigures]], (in_a, in_b): (&str, &str)) -> String {
    let count = |side: &[&[WorkerFigures]], name: &str| {
        side.iter()
            .filter(|s| s.iter().any(|w| w.name == name))
            .count()
    };
    match (count(a, in_a), count(b, in_b)) {
        (0, _) => "it ran in B only".into(),
        (_, 0) => "it ran in A only".into(),
        (ia, ib) => format!(
            "it ran in {ia} of A's {} sessions and {ib} of B's {}",
            a.len(),
            b.len()
        ),
    }
}

/// The rows for every implementation present in every session of both sides (or paired across them by `pairs`), in
/// the order of A's first, B's sessions against A's; and the implementations left out, each with why.
pub fn compare(
    a: &[&[WorkerFigures]],
    b: &[&[WorkerFigures]],
    threshold: f64,
    judging: &Judging,
    pairs: &[Pair],
) -> (Vec<Row>, Vec<String>) {
    let meeting = Meeting { pairs };
    let names = |sessions: &[&[WorkerFigures]]| {
        let mut names: Vec<String> = Vec::new();
        for w in sessions.iter().flat_map(|s| s.iter()) {
            if !names.contains(&w.name) {
                names.push(w.name.clone());
            }
        }
        names
    };
    let (in_a, in_b) = (names(a), names(b));
    let mut rows = Vec::new();
    let mut left_out = Vec::new();
    for name in &in_a {
        let label = meeting.label(name);
        let Some(partner) = meeting.in_b(name) else {
            left_out.push(format!(
                "{name} of A is not compared: B's {name} is paired by --pair"
            ));
            continue;
        };
        match (side(a, name), side(b, partner)) {
            (Some(wa), Some(wb)) => rows.extend(rows_for(&label, (&wa, &wb), threshold, judging)),
            _ => left_out.push(format!(
                "{label} is not compared: {}",
                presence(a, b, (name, partner))
            )),
        }
    }
    for name in in_b {
        if in_a.iter().any(|n| meeting.in_b(n) == Some(&name)) {
            continue;
        }
        left_out.push(if in_a.contains(&name) {
            format!("{name} of B is not compared: A's {name} is paired by --pair")
        } else {
            format!("{name} is not compared: it ran in B only")
        });
    }
    (rows, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(step_ms: f64, rss: u64) -> WorkerState {
        let mut w = WorkerState::new("libtorch");
        for i in 0..100 {
            let ms = step_ms + f64::from(i % 5) * 0.01;
            w.step_time.record_ms(ms);
            w.sample_time.record_ms(ms / 16.0);
            w.samples += 16;
        }
        w.peak_rss_bytes = rss;
        w
    }

    fn state(w: WorkerState) -> Vec<WorkerFigures> {
        figures(&State {
            workers: vec![w],
            ..State::default()
        })
    }

    fn compare(
        a: &[&Vec<WorkerFigures>],
        b: &[&Vec<WorkerFigures>],
        threshold: f64,
        judging: &Judging,
    ) -> Vec<Row> {
        let (sa, sb): (Vec<&[WorkerFigures]>, Vec<&[WorkerFigures]>) = (
            a.iter().map(|s| s.as_slice()).collect(),
            b.iter().map(|s| s.as_slice()).collect(),
        );
        let (rows, left_out) = super::compare(&sa, &sb, threshold, judging, &[]);
        assert!(left_out.is_empty(), "{left_out:?}");
        rows
    }

    #[test]
    fn same_session_has_no_regression() {
        let a = state(worker(10.0, 1 << 30));
        let rows = compare(&[&a], &[&a], 0.07, &Judging::default());
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert!(rows.iter().all(|r| !r.regression));
        assert!(
            rows.iter()
                .all(|r| r.ratio.is_some_and(|r| (r.ratio - 1.0).abs() < 1e-9))
        );
    }

    #[test]
    fn slower_and_bigger_are_regressions_small_changes_are_not() {
        let a = state(worker(10.0, 1 << 30));
        let slower = state(worker(12.0, 1 << 30));
        let rows = compare(&[&a], &[&slower], 0.07, &Judging::default());
        let regressed: Vec<_> = rows
            .iter()
            .filter(|r| r.regression)
            .map(|r| r.metric)
            .collect();
        assert_eq!(
            regressed,
            [
                "median step time (ms)",
                "median time per sample (ms)",
                "throughput (samples/s)"
            ]
        );
        let slightly = state(worker(10.5, (1 << 30) + (1 << 20)));
        assert!(
            compare(&[&a], &[&slightly], 0.07, &Judging::default())
                .iter()
                .all(|r| !r.regression)
        );
        let bigger = state(worker(10.0, 2 << 30));
        let rows = compare(&[&a], &[&bigger], 0.07, &Judging::default());
        assert!(
            rows.iter()
                .any(|r| r.metric.starts_with("peak host") && r.regression)
        );
        // Faster is never a regression.
        assert!(
            compare(&[&slower], &[&a], 0.07, &Judging::default())
                .iter()
                .all(|r| !r.regression)
        );
    }

    #[test]
    fn several_sessions_a_side_are_judged_by_their_spread() {
        let (a1, a2, a3) = (
            state(worker(10.0, 1 << 30)),
            state(worker(10.6, 1 << 30)),
            state(worker(9.4, 1 << 30)),
        );
        let (b1, b2, b3) = (
            state(worker(12.0, 1 << 30)),
            state(worker(12.7, 1 << 30)),
            state(worker(11.3, 1 << 30)),
        );
        let rows = compare(
            &[&a1, &a2, &a3],
            &[&b1, &b2, &b3],
            0.07,
            &Judging::default(),
        );
        let step = rows
            .iter()
            .find(|r| r.metric.starts_with("median step"))
            .unwrap();
        assert!(step.regression, "{step:?}");
        // Each of B's sessions against A's single one within it would be a regression too, but sessions that vary
        // as much as the difference are within noise.
        let (b4, b5) = (state(worker(7.0, 1 << 30)), state(worker(16.0, 1 << 30)));
        let rows = compare(
            &[&a1, &a2, &a3],
            &[&b1, &b4, &b5],
            0.07,
            &Judging::default(),
        );
        assert!(rows.iter().all(|r| !r.regression), "{rows:?}");
        let one_each = compare(&[&a1], &[&b5], 0.07, &Judging::default());
        assert!(one_each.iter().any(|r| r.regression));
    }

    #[test]
    fn what_is_not_to_be_judged_is_shown_and_not_judged() {
        let a = state(worker(10.0, 1 << 30));
        let slower = state(worker(20.0, 2 << 30));
        let per_step = Judging {
            per_step: Some("batch 16 vs 32".into()),
            ..Judging::default()
        };
        let rows = compare(&[&a], &[&slower], 0.07, &per_step);
        let judged = |rows: &[Row], metric: &str| {
            let row = rows.iter().find(|r| r.metric.starts_with(metric)).unwrap();
            (row.regression, row.not_judged.clone())
        };
        assert_eq!(
            judged(&rows, "median step"),
            (false, Some("batch 16 vs 32".into()))
        );
        assert_eq!(judged(&rows, "median time per sample"), (true, None));
        let times = Judging {
            times: Some("conditions differ".into()),
            ..Judging::default()
        };
        let rows = compare(&[&a], &[&slower], 0.07, &times);
        assert_eq!(
            judged(&rows, "throughput"),
            (false, Some("conditions differ".into()))
        );
        // Memory is no time: still judged.
        assert_eq!(judged(&rows, "peak host"), (true, None));
    }

    /// A worker whose steps are skewed: most at `typical_ms`, a tenth of them `outlier` times as long, so that a mean
    /// and a median disagree.
    fn skewed(typical_ms: f64, outlier: f64) -> WorkerState {
        let mut w = WorkerState::new("libtorch");
        for i in 0..60 {
            let ms = if i % 10 == 0 {
                typical_ms * outlier
            } else {
                typical_ms + f64::from(i % 7) * 0.05
            };
            w.step_time.record_ms(ms);
            w.sample_time.record_ms(ms / 8.0);
            w.samples += 8;
        }
        w
    }

    #[test]
    fn every_estimate_lies_inside_its_interval() {
        let sessions: Vec<Vec<WorkerFigures>> = [
            (10.0, 1.0),
            (10.0, 6.0),
            (11.0, 0.2),
            (9.0, 30.0),
            (12.5, 3.0),
        ]
        .into_iter()
        .map(|(ms, outlier)| state(skewed(ms, outlier)))
        .collect();
        let mut checked = 0;
        for a in &sessions {
            for b in &sessions {
                let sides = [(vec![a], vec![b]), (vec![a, b], vec![b, a, b])];
                for (sa, sb) in &sides {
                    for row in compare(sa, sb, 0.07, &Judging::default()) {
                        let Some(r) = row.ratio else { continue };
                        assert!(r.low <= r.ratio && r.ratio <= r.high, "{row:?}");
                        let (va, vb) = (row.a.unwrap(), row.b.unwrap());
                        assert!((vb / va - r.ratio).abs() <= 1e-9 * r.ratio, "{row:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 5 * 5 * 2 * 3, "{checked}");
    }

    #[test]
    fn throughput_orders_workers_as_time_per_sample_does() {
        // A's mean is dragged up by its outliers, B's median is higher: the per-sample time says A is faster, and
        // so must the throughput.
        let (a, b) = (skewed(10.0, 30.0), skewed(10.5, 1.0));
        let rows = compare(&[&state(a)], &[&state(b)], 0.07, &Judging::default());
        let ratio = |metric: &str| {
            rows.iter()
                .find(|r| r.metric.starts_with(metric))
                .unwrap()
                .ratio
                .unwrap()
                .ratio
        };
        assert!(ratio("median time per sample") > 1.0);
        assert!(ratio("throughput") < 1.0);
        assert!((ratio("median time per sample") * ratio("throughput") - 1.0).abs() < 1e-9);
    }

    #[test]
    fn work_that_differs_is_not_judged_and_a_worker_on_one_side_is_named() {
        let a = state(worker(10.0, 1 << 30));
        let slower = state(worker(20.0, 2 << 30));
        let all = Judging {
            all: Some("mode train vs eval".into()),
            ..Judging::default()
        };
        let rows = compare(&[&a], &[&slower], 0.07, &all);
        assert!(!rows.is_empty());
        assert!(
            rows.iter()
                .all(|r| !r.regression && r.not_judged.as_deref() == Some("mode train vs eval")),
            "{rows:?}"
        );
        let mut other = WorkerState::new("pytorch");
        other.peak_rss_bytes = 1;
        let both = figures(&State {
            workers: vec![worker(10.0, 1 << 30), other],
            ..State::default()
        });
        let (rows, left_out) = super::compare(&[&both], &[&a], 0.07, &Judging::default(), &[]);
        assert!(rows.iter().all(|r| r.worker == "libtorch"));
        assert_eq!(left_out, ["pytorch is not compared: it ran in A only"]);
        let (_, left_out) = super::compare(&[&a, &both], &[&both], 0.07, &Judging::default(), &[]);
        assert_eq!(
            left_out,
            ["pytorch is not compared: it ran in 1 of A's 2 sessions and 1 of B's 1"]
        );
    }

    #[test]
    fn a_ratio_whose_interval_holds_1_is_within_noise_not_ok() {
        let a = state(worker(10.0, 1 << 30));
        let rows = compare(&[&a], &[&a], 0.07, &Judging::default());
        for row in &rows {
            let expected = match row.unit {
                Unit::Bytes => Verdict::Ok,
                _ => Verdict::WithinNoise,
            };
            assert_eq!(row.verdict(), expected, "{row:?}");
        }
        // Beyond noise, but by less than the threshold: ok.
        let slightly = state(worker(10.5, 1 << 30));
        let step = compare(&[&a], &[&slightly], 0.07, &Judging::default())
            .into_iter()
            .find(|r| r.metric.starts_with("median step"))
            .unwrap();
        assert!(step.ratio.unwrap().beyond_noise(), "{step:?}");
        assert_eq!(step.verdict(), Verdict::Ok);
    }

    /// `worker`'s session cut to its first `steps` steps, as a damaged recording keeps them.
    fn cut_to(steps: u32, step_ms: f64) -> Vec<WorkerFigures> {
        let mut w = WorkerState::new("libtorch");
        for i in 0..steps {
            let ms = step_ms + f64::from(i % 5) * 0.01;
            w.step_time.record_ms(ms);
            w.sample_time.record_ms(ms / 16.0);
            w.samples += 16;
        }
        state(w)
    }

    #[test]
    fn one_session_a_side_with_too_few_steps_for_its_interval_is_not_judged() {
        let a = state(worker(10.0, 1 << 30));
        let short = cut_to(MIN_VERDICT_SAMPLES as u32 - 1, 20.0);
        let rows = compare(&[&a], &[&short], 0.07, &Judging::default());
        let times: Vec<&Row> = rows.iter().filter(|r| r.unit != Unit::Bytes).collect();
        assert!(!times.is_empty());
        for row in times {
            assert!(row.too_few_steps && !row.regression, "{row:?}");
            assert_eq!(
                row.not_judged.as_deref(),
                Some("too few measured steps (10 in B; 11 needed)")
            );
        }
        // Enough steps: the same slowdown is a regression.
        let enough = cut_to(MIN_VERDICT_SAMPLES as u32, 20.0);
        let rows = compare(&[&a], &[&enough], 0.07, &Judging::default());
        assert!(rows.iter().all(|r| !r.too_few_steps), "{rows:?}");
        assert!(rows.iter().any(|r| r.regression), "{rows:?}");
        // Several sessions a side: judged by the spread between them, which short sessions widen themselves.
        let (b1, b2) = (cut_to(6, 20.0), cut_to(6, 20.2));
        let rows = compare(&[&a, &a], &[&short, &b1, &b2], 0.07, &Judging::default());
        assert!(rows.iter().all(|r| !r.too_few_steps), "{rows:?}");
    }

    #[test]
    fn workers_of_different_names_are_compared_as_paired() {
        let named = |names: &[&str]| {
            figures(&State {
                workers: names
                    .iter()
                    .map(|n| WorkerState {
                        name: n.to_string(),
                        ..worker(10.0, 1 << 30)
                    })
                    .collect(),
                ..State::default()
            })
        };
        let (a, b) = (
            named(&["pytorch", "libtorch"]),
            named(&["compile", "libtorch"]),
        );
        let pairs = [Pair {
            a: "pytorch".into(),
            b: "compile".into(),
        }];
        let (rows, left_out) = super::compare(&[&a], &[&b], 0.07, &Judging::default(), &pairs);
        assert!(left_out.is_empty(), "{left_out:?}");
        let mut workers: Vec<&str> = rows.iter().map(|r| r.worker.as_str()).collect();
        workers.dedup();
        assert_eq!(workers, ["pytorch→compile", "libtorch"]);
        // Without the pair, neither is compared; with B's pytorch too, that one is left out and said why.
        let (_, left_out) = super::compare(&[&a], &[&b], 0.07, &Judging::default(), &[]);
        assert_eq!(
            left_out,
            [
                "pytorch is not compared: it ran in A only",
                "compile is not compared: it ran in B only"
            ]
        );
        let b_too = named(&["compile", "libtorch", "pytorch"]);
        let (rows, left_out) = super::compare(&[&a], &[&b_too], 0.07, &Judging::default(), &pairs);
        assert_eq!(
            left_out,
            ["pytorch of B is not compared: A's pytorch is paired by --pair"]
        );
        assert!(rows.iter().any(|r| r.worker == "pytorch→compile"));
    }
}
