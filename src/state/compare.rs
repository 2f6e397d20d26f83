//! A against B: the ratio of medians with a 95% confidence interval, and whether it is beyond noise.
//!
//! The interval of each median comes from order statistics (the distribution-free binomial interval:
//! ranks n/2 ± 1.96·√n/2), read off the HDR histogram; the ratio's interval divides the extremes
//! (low A / high B, high A / low B), which is conservative: "beyond noise" is claimed only when even that
//! interval excludes 1.

use super::Durations;

/// Fewer measured steps than this give no interval at all.
pub const MIN_SAMPLES: u64 = 5;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

/// The median of `d` with its 95% confidence interval.
pub fn median_interval(d: &Durations) -> Option<Interval> {
    let n = d.len();
    if n < MIN_SAMPLES {
        return None;
    }
    let n = n as f64;
    let half_width = 1.96 * n.sqrt() / 2.0;
    let low_rank = ((n / 2.0 - half_width).floor()).max(1.0);
    let high_rank = ((n / 2.0 + half_width).ceil()).min(n);
    Some(Interval {
        median: d.quantile_ms(0.5)?,
        low: d.quantile_ms(low_rank / n)?,
        high: d.quantile_ms(high_rank / n)?,
    })
}

/// median(A) / median(B) with a conservative 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

impl Ratio {
    pub fn beyond_noise(&self) -> bool {
        self.low > 1.0 || self.high < 1.0
    }
}

pub fn ratio_of_medians(a: &Durations, b: &Durations) -> Option<Ratio> {
    let (a, b) = (median_interval(a)?, median_interval(b)?);
    if b.median <= 0.0 || b.low <= 0.0 {
        return None;
    }
    Some(Ratio {
        ratio: a.median / b.median,
        low: a.low / b.high,
        high: a.high / b.low,
    })
}

/// A plain sentence on which of two is faster, from the ratio of their times (A / B).
pub fn verdict(a: &str, b: &str, times: &Ratio) -> String {
    let (faster, slower, factor) = if times.ratio <= 1.0 {
        (a, b, 1.0 / times.ratio)
    } else {
        (b, a, times.ratio)
    };
    if times.beyond_noise() {
        format!("{faster} {factor:.2}× faster than {slower}, beyond noise")
    } else {
        format!("{a} and {b} within noise ({factor:.2}×)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn durations(values: impl IntoIterator<Item = f64>) -> Durations {
        let mut d = Durations::default();
        for v in values {
            d.record_ms(v);
        }
        d
    }

    #[test]
    fn clearly_different_medians_are_beyond_noise() {
        let fast = durations((0..200).map(|i| 10.0 + f64::from(i % 10) * 0.1));
        let slow = durations((0..200).map(|i| 13.0 + f64::from(i % 10) * 0.1));
        let r = ratio_of_medians(&slow, &fast).unwrap();
        assert!((r.ratio - 1.29).abs() < 0.02, "{r:?}");
        assert!(r.low <= r.ratio && r.ratio <= r.high);
        assert!(r.beyond_noise());
        assert_eq!(
            verdict("pytorch", "libtorch", &r),
            "libtorch 1.29× faster than pytorch, beyond noise"
        );
    }

    #[test]
    fn overlapping_spreads_are_within_noise() {
        let a = durations((0..50).map(|i| 10.0 + f64::from(i % 10)));
        let b = durations((0..50).map(|i| 10.2 + f64::from((i + 3) % 10)));
        let r = ratio_of_medians(&a, &b).unwrap();
        assert!(!r.beyond_noise(), "{r:?}");
        assert!(verdict("a", "b", &r).contains("within noise"));
    }

    #[test]
    fn too_few_samples_give_no_interval() {
        let a = durations([1.0, 2.0]);
        assert!(median_interval(&a).is_none());
        assert!(ratio_of_medians(&a, &durations((0..10).map(f64::from))).is_none());
    }

    #[test]
    fn the_interval_narrows_with_more_samples() {
        let spread = |n: u32| {
            let i = median_interval(&durations((0..n).map(|k| f64::from(k % 100)))).unwrap();
            i.high - i.low
        };
        assert!(spread(10_000) < spread(100));
    }
}
