//! Latency statistics from HDR histograms: what the summary and the panes report.

use std::sync::{Arc, OnceLock};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// p50/p90/p99/max/mean in milliseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Durations recorded in nanoseconds with three significant digits (0.1% resolution).
#[derive(Debug)]
pub struct Durations {
    counts: Counts,
    /// Every duration recorded, as recorded (clamped), in milliseconds: a histogram's sum for Prometheus.
    sum_ms: f64,
    /// Each quantile lookup walks the histogram's buckets (some 18,000 for a step of 100 ms), and the UI asks every
    /// frame: the answers are kept until the next recording. With steps coming faster than frames every frame still
    /// looks them up afresh, so the median, which is most of what is shown, is kept apart from the longer walks.
    median: OnceLock<Option<f64>>,
    cached: OnceLock<Option<Percentiles>>,
}

impl Default for Durations {
    fn default() -> Self {
        Durations {
            counts: Counts::Recording(empty_histogram()),
            sum_ms: 0.0,
            median: OnceLock::new(),
            cached: OnceLock::new(),
        }
    }
}

/// A copy keeps only the buckets that are not empty, which every further copy shares: a replay keeps hundreds of
/// copies of the state (its checkpoints), and a histogram of 100 ms steps has some 18,000 buckets (144 KiB) of which
/// a few hundred are not.
impl Clone for Durations {
    fn clone(&self) -> Self {
        Durations {
            counts: self.counts.copy(),
            sum_ms: self.sum_ms,
            median: self.median.clone(),
            cached: self.cached.clone(),
        }
    }
}

/// The histogram being recorded into, or a copy's non-empty buckets (value, count) with the histogram made from them
/// again once read; recording into a copy makes it a histogram for good.
#[derive(Debug)]
enum Counts {
    Recording(Histogram<u64>),
    Copied {
        buckets: Arc<[(u64, u64)]>,
        histogram: OnceLock<Histogram<u64>>,
    },
}

impl Counts {
    fn copy(&self) -> Counts {
        let buckets = match self {
            Counts::Recording(histogram) => histogram
                .iter_recorded()
                .map(|bucket| (bucket.value_iterated_to(), bucket.count_at_value()))
                .collect(),
            Counts::Copied { buckets, .. } => Arc::clone(buckets),
        };
        Counts::Copied {
            buckets,
            histogram: OnceLock::new(),
        }
    }

    fn histogram(&self) -> &Histogram<u64> {
        match self {
            Counts::Recording(histogram) => histogram,
            Counts::Copied { buckets, histogram } => histogram.get_or_init(|| rebuilt(buckets)),
        }
    }

    fn recording(&mut self) -> &mut Histogram<u64> {
        if let Counts::Copied { buckets, histogram } = self {
            let histogram = histogram.take().unwrap_or_else(|| rebuilt(buckets));
            *self = Counts::Recording(histogram);
        }
        match self {
            Counts::Recording(histogram) => histogram,
            Counts::Copied { .. } => unreachable!("a copy was made a recording just above"),
        }
    }
}

fn empty_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is a valid histogram precision")
}

/// A histogram holding `buckets`: each count recorded at its bucket's value lands in that bucket again, so every
/// quantile, the count, the least and the greatest are the original's.
fn rebuilt(buckets: &[(u64, u64)]) -> Histogram<u64> {
    let mut histogram = empty_histogram();
    for &(value, count) in buckets {
        // Values a histogram of this precision held, and it resizes itself: recording cannot fail.
        let _ = histogram.record_n(value, count);
    }
    histogram
}

impl Durations {
    /// Negative, NaN or absurd values (a misbehaving worker) are clamped, never a panic.
    pub fn record_ms(&mut self, ms: f64) {
        let ns = if ms.is_finite() {
            (ms * 1e6).clamp(1.0, 1e15)
        } else {
            1.0
        };
        // The histogram resizes itself; recording can only fail beyond u64 ranges, excluded by the clamp.
        let _ = self.counts.recording().record(ns as u64);
        self.sum_ms += ns / 1e6;
        self.median = OnceLock::new();
        self.cached = OnceLock::new();
    }

    pub fn len(&self) -> u64 {
        self.counts.histogram().len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.histogram().is_empty()
    }

    pub fn sum_ms(&self) -> f64 {
        self.sum_ms
    }

    /// For each of the ascending `bounds_ms`, how many durations were at most it (to the histogram's 0.1%):
    /// Prometheus's cumulative buckets, in one pass over what was recorded.
    pub fn counts_at_most_ms(&self, bounds_ms: &[f64]) -> Vec<u64> {
        let mut counts = vec![0u64; bounds_ms.len()];
        let histogram = self.counts.histogram();
        for value in histogram.iter_recorded() {
            let ms = histogram.lowest_equivalent(value.value_iterated_to()) as f64 / 1e6;
            let first = bounds_ms.partition_point(|&bound| bound < ms);
            for count in &mut counts[first..] {
                *count += value.count_at_value();
            }
        }
        counts
    }

    /// The median, in milliseconds.
    pub fn median_ms(&self) -> Option<f64> {
        *self.median.get_or_init(|| self.quantile_ms(0.5))
    }

    /// The value at quantile `q` (0..=1), in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let histogram = self.counts.histogram();
        (!histogram.is_empty()).then(|| histogram.value_at_quantile(q.clamp(0.0, 1.0)) as f64 / 1e6)
    }

    pub fn percentiles(&self) -> Option<Percentiles> {
        *self.cached.get_or_init(|| self.compute_percentiles())
    }

    fn compute_percentiles(&self) -> Option<Percentiles> {
        let histogram = self.counts.histogram();
        if histogram.is_empty() {
            return None;
        }
        // One lookup a quantile: hdrhistogram sums a single lookup's buckets eight at a time, and its lookup of
        // several walks them one by one, which costs more than three passes.
        let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1e6;
        Some(Percentiles {
            p50: self.median_ms()?,
            p90: ms(0.9),
            p99: ms(0.99),
            max: histogram.max() as f64 / 1e6,
            // The exact mean of what was recorded: the histogram's own walks every bucket again.
            mean: self.sum_ms / histogram.len() as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut d = Durations::default();
        for i in 1..=100 {
            d.record_ms(f64::from(i));
        }
        let p = d.percentiles().unwrap();
        assert!((p.p50 - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p90 - 90.0).abs() < 0.1, "{p:?}");
        assert!((p.p99 - 99.0).abs() < 0.1, "{p:?}");
        assert!((p.max - 100.0).abs() < 0.1, "{p:?}");
        assert!((p.mean - 50.5).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn the_kept_median_is_the_quantile_lookup_and_moves_with_each_recording() {
        let mut d = Durations::default();
        for ms in [3.0, 1.0, 7.5, 2.25, 9.0, 4.0] {
            d.record_ms(ms);
            assert_eq!(d.median_ms(), d.quantile_ms(0.5));
            let p = d.percentiles().unwrap();
            assert_eq!(Some(p.p90), d.quantile_ms(0.9));
            assert_eq!(Some(p.p99), d.quantile_ms(0.99));
        }
        assert!((d.median_ms().unwrap() - 3.0).abs() < 0.01);
        assert_eq!(Durations::default().median_ms(), None);
    }

    #[test]
    fn long_durations_are_not_saturated() {
        let mut d = Durations::default();
        d.record_ms(250.0);
        let p = d.percentiles().unwrap();
        assert!((p.max - 250.0).abs() < 0.5, "{p:?}");
    }

    /// Everything a copy answers, before and after more is recorded into it and into the original, is the
    /// original's; and it holds only the buckets that are not empty.
    #[test]
    fn a_copy_answers_as_the_original_and_keeps_only_what_is_not_empty() {
        let answers = |d: &Durations| {
            let quantiles: Vec<_> = (0..=200)
                .map(|i| d.quantile_ms(f64::from(i) / 200.0))
                .collect();
            let bounds = [0.01, 0.5, 1.0, 9.99, 10.0, 10.01, 50.0, 100.0, 1e4];
            (
                quantiles,
                d.percentiles(),
                d.len(),
                d.sum_ms(),
                d.counts_at_most_ms(&bounds),
            )
        };
        let mut x: u64 = 3;
        let mut next = move || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        for (spread, n) in [(0.0, 1), (0.05, 5_000), (3.0, 20_000), (1e4, 2_000)] {
            let mut original = Durations::default();
            for _ in 0..n {
                original.record_ms(10.0 + spread * next());
            }
            let mut copy = original.clone();
            let Counts::Copied { buckets, .. } = &copy.counts else {
                panic!("a copy keeps buckets")
            };
            assert!(
                buckets.len() <= n,
                "{} buckets for {n} durations",
                buckets.len()
            );
            assert_eq!(answers(&copy), answers(&original), "spread {spread}");
            let copy_of_copy = copy.clone();
            assert_eq!(answers(&copy_of_copy), answers(&original));
            for _ in 0..100 {
                let ms = 10.0 + 2.0 * spread * next();
                original.record_ms(ms);
                copy.record_ms(ms);
            }
            assert_eq!(
                answers(&copy),
                answers(&original),
                "spread {spread}, recorded on"
            );
        }
        assert_eq!(
            answers(&Durations::default().clone()),
            answers(&Durations::default())
        );
    }

    #[test]
    fn hostile_values_do_not_panic() {
        let mut d = Durations::default();
        for v in [f64::NAN, -1.0, f64::INFINITY, 1e300, 0.0] {
            d.record_ms(v);
        }
        assert_eq!(d.len(), 5);
        assert!(Durations::default().percentiles().is_none());
    }

    #[test]
    fn buckets_count_what_is_at_most_their_bound_and_the_sum_is_kept() {
        let mut d = Durations::default();
        for ms in [0.5, 1.0, 2.0, 40.0, 40.0, 900.0] {
            d.record_ms(ms);
        }
        assert_eq!(
            d.counts_at_most_ms(&[0.1, 1.0, 5.0, 50.0, 1_000.0]),
            [0, 2, 3, 5, 6]
        );
        assert_eq!(Durations::default().counts_at_most_ms(&[1.0]), [0]);
        assert!((d.sum_ms() - 983.5).abs() < 1e-9, "{}", d.sum_ms());
    }
}
