//! Sessions of the same implementations, B against A: per implementation and metric, the ratio B/A, its interval
//! where the metric has a spread (within one session a side, or between several), and whether it is a regression —
//! worse by more than the threshold (TorchBench's 7%) and, where noise can be judged, beyond noise — unless the
//! sessions' setups or conditions make the metric one not to judge.

use super::compare::{Ratio, ratio_between_sessions, ratio_of_medians};
use super::{Durations, State, WorkerState};

/// Which way is worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    Higher,
    Lower,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub worker: String,
    pub metric: &'static str,
    /// The figure over A's and B's sessions (their geometric mean when there are several).
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B/A with its 95% interval; the interval is the point itself for single numbers (peaks, bytes).
    pub ratio: Option<Ratio>,
    pub worse: Worse,
    pub regression: bool,
    /// Why the row is shown but not judged (the sessions' steps or conditions differ).
    pub not_judged: Option<String>,
}

/// What may not be judged, and why; set from the sessions' setups and conditions.
#[derive(Debug, Clone, Default)]
pub struct Judging {
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
    /// Samples per second: B/A goes as A's per-sample time over B's, whose within-session interval it takes.
    Throughput,
    /// A single figure per session (a peak, a mean): judged by the threshold alone.
    Point(fn(&WorkerState) -> Option<f64>),
}

struct Metric {
    name: &'static str,
    measure: Measure,
    worse: Worse,
    per_step: bool,
    time: bool,
}

const METRICS: [Metric; 7] = [
    Metric {
        name: "median step time (ms)",
        measure: Measure::Spread(|w| &w.step_time),
        worse: Worse::Higher,
        per_step: true,
        time: true,
    },
    Metric {
        name: "median time per sample (ms)",
        measure: Measure::Spread(|w| &w.sample_time),
        worse: Worse::Higher,
        per_step: false,
        time: true,
    },
    Metric {
        name: "throughput (samples/s)",
        measure: Measure::Throughput,
        worse: Worse::Lower,
        per_step: false,
        time: true,
    },
    Metric {
        name: "peak host RSS (bytes)",
        measure: Measure::Point(|w| Some(w.peak_rss_bytes as f64)),
        worse: Worse::Higher,
        per_step: false,
        time: false,
    },
    Metric {
        name: "peak GPU memory (bytes)",
        measure: Measure::Point(|w| w.peak_gpu_memory_bytes.map(|b| b as f64)),
        worse: Worse::Higher,
        per_step: false,
        time: false,
    },
    Metric {
        name: "median H2D time (ms)",
        measure: Measure::Spread(|w| &w.h2d),
        worse: Worse::Higher,
        per_step: true,
        time: true,
    },
    Metric {
        name: "H2D bytes per step",
        measure: Measure::Point(|w| w.h2d_bytes_per_step().map(|b| b as f64)),
        worse: Worse::Higher,
        per_step: true,
        time: false,
    },
];

impl Metric {
    fn value(&self, w: &WorkerState) -> Option<f64> {
        match self.measure {
            Measure::Spread(durations) => durations(w).quantile_ms(0.5),
            Measure::Throughput => w.throughput(),
            Measure::Point(value) => value(w),
        }
    }

    /// B/A over one session each (the spread within them) or several (the spread between them); `va` and `vb` are
    /// each session's figure.
    fn ratio(
        &self,
        (a, va): (&[&WorkerState], &[Option<f64>]),
        (b, vb): (&[&WorkerState], &[Option<f64>]),
    ) -> Option<Ratio> {
        match (&self.measure, a, b) {
            (Measure::Point(_), ..) => point(geometric_mean(va), geometric_mean(vb)),
            (Measure::Spread(durations), [a], [b]) => ratio_of_medians(durations(b), durations(a)),
            (Measure::Throughput, [a], [b]) => ratio_of_medians(&a.sample_time, &b.sample_time)
                .map(|r| Ratio {
                    ratio: b
                        .throughput()
                        .zip(a.throughput())
                        .map_or(r.ratio, |(b, a)| b / a),
                    ..r
                }),
            _ => {
                let all = |v: &[Option<f64>]| v.iter().copied().collect::<Option<Vec<f64>>>();
                ratio_between_sessions(&all(va)?, &all(vb)?)
            }
        }
    }
}

fn rows_for(a: &[&WorkerState], b: &[&WorkerState], threshold: f64, judging: &Judging) -> Vec<Row> {
    let name = a.first().map_or_else(String::new, |w| w.name.clone());
    METRICS
        .iter()
        .map(|metric| {
            let values = |side: &[&WorkerState]| -> Vec<Option<f64>> {
                side.iter().map(|w| metric.value(w)).collect()
            };
            let (va, vb) = (values(a), values(b));
            let ratio = metric.ratio((a, &va), (b, &vb));
            let not_judged = [
                (metric.per_step, &judging.per_step),
                (metric.time, &judging.times),
            ]
            .into_iter()
            .find_map(|(applies, why)| why.clone().filter(|_| applies));
            Row {
                worker: name.clone(),
                metric: metric.name,
                a: geometric_mean(&va),
                b: geometric_mean(&vb),
                ratio,
                worse: metric.worse,
                regression: not_judged.is_none() && regressed(ratio, metric.worse, threshold),
                not_judged,
            }
        })
        .filter(|r| r.a.is_some() || r.b.is_some())
        .collect()
}

/// `name` in each of a side's sessions; `None` when one lacks it.
fn side<'s>(states: &[&'s State], name: &str) -> Option<Vec<&'s WorkerState>> {
    states.iter().map(|s| s.worker(name)).collect()
}

/// Every implementation present in every session of both sides, in the order of A's first, B's sessions against
/// A's.
pub fn compare(a: &[&State], b: &[&State], threshold: f64, judging: &Judging) -> Vec<Row> {
    let Some(first) = a.first() else {
        return Vec::new();
    };
    first
        .workers
        .iter()
        .filter_map(|w| Some((side(a, &w.name)?, side(b, &w.name)?)))
        .flat_map(|(wa, wb)| rows_for(&wa, &wb, threshold, judging))
        .collect()
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
            w.timed_ms += ms;
        }
        w.peak_rss_bytes = rss;
        w
    }

    fn state(w: WorkerState) -> State {
        State {
            workers: vec![w],
            ..State::default()
        }
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
            times: None,
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
            per_step: None,
            times: Some("conditions differ".into()),
        };
        let rows = compare(&[&a], &[&slower], 0.07, &times);
        assert_eq!(
            judged(&rows, "throughput"),
            (false, Some("conditions differ".into()))
        );
        // Memory is no time: still judged.
        assert_eq!(judged(&rows, "peak host"), (true, None));
    }
}
