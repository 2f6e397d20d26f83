//! Two sessions of the same implementations, B against A: per implementation and metric, the ratio
//! B/A, its interval where the metric has a spread, and whether it is a regression — worse by more
//! than the threshold (TorchBench's 7%) and, where noise can be judged, beyond noise.

use super::compare::{Ratio, ratio_of_medians};
use super::{State, WorkerState};

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
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B/A with its 95% interval; the interval is the point itself for single numbers (peaks, bytes).
    pub ratio: Option<Ratio>,
    pub worse: Worse,
    pub regression: bool,
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

fn rows_for(a: &WorkerState, b: &WorkerState, threshold: f64) -> Vec<Row> {
    let median = |w: &WorkerState| w.step_time.quantile_ms(0.5);
    let h2d = |w: &WorkerState| w.h2d.quantile_ms(0.5);
    // Throughput is samples over time: B's over A's goes as A's per-sample time over B's, whose
    // interval it takes.
    let throughput = ratio_of_medians(&a.sample_time, &b.sample_time).map(|r| Ratio {
        ratio: b
            .throughput()
            .zip(a.throughput())
            .map_or(r.ratio, |(b, a)| b / a),
        ..r
    });
    let peak_gpu = |w: &WorkerState| w.peak_gpu_memory_bytes.map(|b| b as f64);
    let bytes = |w: &WorkerState| w.h2d_bytes_per_step().map(|b| b as f64);
    let row = |metric, va, vb, ratio, worse| Row {
        worker: a.name.clone(),
        metric,
        a: va,
        b: vb,
        ratio,
        worse,
        regression: regressed(ratio, worse, threshold),
    };
    let rows = [
        row(
            "median step time (ms)",
            median(a),
            median(b),
            ratio_of_medians(&b.step_time, &a.step_time),
            Worse::Higher,
        ),
        row(
            "throughput (samples/s)",
            a.throughput(),
            b.throughput(),
            throughput,
            Worse::Lower,
        ),
        row(
            "peak host RSS (bytes)",
            Some(a.peak_rss_bytes as f64),
            Some(b.peak_rss_bytes as f64),
            point(Some(a.peak_rss_bytes as f64), Some(b.peak_rss_bytes as f64)),
            Worse::Higher,
        ),
        row(
            "peak GPU memory (bytes)",
            peak_gpu(a),
            peak_gpu(b),
            point(peak_gpu(a), peak_gpu(b)),
            Worse::Higher,
        ),
        row(
            "median H2D time (ms)",
            h2d(a),
            h2d(b),
            ratio_of_medians(&b.h2d, &a.h2d),
            Worse::Higher,
        ),
        row(
            "H2D bytes per step",
            bytes(a),
            bytes(b),
            point(bytes(a), bytes(b)),
            Worse::Higher,
        ),
    ];
    rows.into_iter()
        .filter(|r| r.a.is_some() || r.b.is_some())
        .collect()
}

/// Every implementation present in both sessions, in A's order.
pub fn compare(a: &State, b: &State, threshold: f64) -> Vec<Row> {
    a.workers
        .iter()
        .filter_map(|wa| Some((wa, b.worker(&wa.name)?)))
        .flat_map(|(wa, wb)| rows_for(wa, wb, threshold))
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
        let rows = compare(&a, &a, 0.07);
        assert_eq!(rows.len(), 3, "{rows:?}");
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
        let rows = compare(&a, &slower, 0.07);
        let regressed: Vec<_> = rows
            .iter()
            .filter(|r| r.regression)
            .map(|r| r.metric)
            .collect();
        assert_eq!(
            regressed,
            ["median step time (ms)", "throughput (samples/s)"]
        );
        let slightly = state(worker(10.5, (1 << 30) + (1 << 20)));
        assert!(compare(&a, &slightly, 0.07).iter().all(|r| !r.regression));
        let bigger = state(worker(10.0, 2 << 30));
        let rows = compare(&a, &bigger, 0.07);
        assert!(
            rows.iter()
                .any(|r| r.metric.starts_with("peak host") && r.regression)
        );
        // Faster is never a regression.
        assert!(compare(&slower, &a, 0.07).iter().all(|r| !r.regression));
    }
}
