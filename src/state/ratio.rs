//! A against B: the ratio of medians with a 95% confidence interval, and whether it is beyond noise; within one
//! session from its steps, or between sessions from their spread.
//!
//! The interval of each median comes from order statistics (the distribution-free binomial interval:
//! ranks n/2 ± 1.96·√n/2), read off the HDR histogram; the ratio's interval divides the extremes
//! (low A / high B, high A / low B), which is conservative: "beyond noise" is claimed only when even that
//! interval excludes 1.

use serde::{Deserialize, Serialize};

use super::{Durations, State, WorkerState};

/// Fewer measured steps than this give no interval at all.
pub const MIN_SAMPLES: u64 = 5;

/// The fewest measured steps whose median's interval rests on neither the fastest step nor the slowest: with fewer,
/// an end of the interval is an extreme step, and one stray step (or the few a damaged recording kept) sets the
/// verdict of a comparison that rests on that interval alone.
pub const MIN_VERDICT_SAMPLES: u64 = 11;

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
    let (low_rank, high_rank) = interval_ranks(n);
    let n = n as f64;
    Some(Interval {
        median: d.median_ms()?,
        low: d.quantile_ms(low_rank as f64 / n)?,
        high: d.quantile_ms(high_rank as f64 / n)?,
    })
}

/// The ranks (from 1, the fastest) of the steps that bound the median's 95% interval over `n` steps.
fn interval_ranks(n: u64) -> (u64, u64) {
    let n = n as f64;
    let half_width = 1.96 * n.sqrt() / 2.0;
    let low = (n / 2.0 - half_width).floor().max(1.0);
    let high = (n / 2.0 + half_width).ceil().min(n);
    (low as u64, high as u64)
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
    ratio_of_intervals(&median_interval(a)?, &median_interval(b)?)
}

/// a / b from their medians' intervals: the conservative ratio of the extremes.
pub fn ratio_of_intervals(a: &Interval, b: &Interval) -> Option<Ratio> {
    if b.median <= 0.0 || b.low <= 0.0 {
        return None;
    }
    Some(Ratio {
        ratio: a.median / b.median,
        low: a.low / b.high,
        high: a.high / b.low,
    })
}

/// The 97.5% quantile of Student's t for 1 to 30 degrees of freedom; beyond, the normal's.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

fn t_975(df: f64) -> f64 {
    let df = df.floor().max(1.0) as usize;
    T_975.get(df - 1).copied().unwrap_or(1.96)
}

fn mean_and_variance(logs: &[f64]) -> (f64, Option<f64>) {
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let variance =
        (logs.len() > 1).then(|| logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0));
    (mean, variance)
}

/// B over A from one figure per session (a session's median, say), with a 95% interval from the spread *between*
/// sessions: Welch's t interval on the logarithms, so the ratio is of geometric means. With one session on a side,
/// the other side's spread stands for both. `None` without a spread to judge by (one session each) or a figure
/// that is not positive.
pub fn ratio_between_sessions(a: &[f64], b: &[f64]) -> Option<Ratio> {
    let logs = |v: &[f64]| -> Option<Vec<f64>> {
        v.iter()
            .map(|&x| (x.is_finite() && x > 0.0).then(|| x.ln()))
            .collect()
    };
    let (la, lb) = (logs(a)?, logs(b)?);
    if la.is_empty() || lb.is_empty() {
        return None;
    }
    let ((ma, va), (mb, vb)) = (mean_and_variance(&la), mean_and_variance(&lb));
    let (na, nb) = (la.len() as f64, lb.len() as f64);
    let (se, df) = match (va, vb) {
        (Some(va), Some(vb)) => {
            let (qa, qb) = (va / na, vb / nb);
            let se2 = qa + qb;
            let df = if se2 > 0.0 {
                se2 * se2 / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0))
            } else {
                na + nb - 2.0
            };
            (se2.sqrt(), df)
        }
        (Some(v), None) => ((v * (1.0 / na + 1.0 / nb)).sqrt(), na - 1.0),
        (None, Some(v)) => ((v * (1.0 / na + 1.0 / nb)).sqrt(), nb - 1.0),
        (None, None) => return None,
    };
    let (d, half) = (mb - ma, t_975(df) * se);
    Some(Ratio {
        ratio: d.exp(),
        low: (d - half).exp(),
        high: (d + half).exp(),
    })
}

/// What two workers of one session are compared by.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Time per sample: two built-in levels.
    SampleTime,
    /// A whole step as a loop sees it, like with like, where a `--cmd` worker is one of the two: it has no samples,
    /// and its step is timed from one optimiser step to the next.
    StepInterval,
}

impl Basis {
    pub fn of(state: &State, a: &WorkerState, b: &WorkerState) -> Basis {
        let session = state.session.as_ref();
        let command = |w: &WorkerState| session.is_some_and(|s| s.commands.contains_key(&w.name));
        if command(a) || command(b) {
            Basis::StepInterval
        } else {
            Basis::SampleTime
        }
    }

    pub fn durations(self, w: &WorkerState) -> &Durations {
        match self {
            Basis::SampleTime => &w.sample_time,
            Basis::StepInterval => &w.step_interval,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Basis::SampleTime => "time per sample",
            Basis::StepInterval => "step interval",
        }
    }
}

/// Two workers of one session as the compare view judges them: by what, and A's median over B's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pairing {
    pub basis: Basis,
    pub times: Option<Ratio>,
}

impl Pairing {
    pub fn of(state: &State, a: &WorkerState, b: &WorkerState) -> Pairing {
        let basis = Basis::of(state, a, b);
        Pairing {
            basis,
            times: ratio_of_medians(basis.durations(a), basis.durations(b)),
        }
    }

    /// Why there is no ratio yet: the one of the two with fewer measured steps, and how many it has.
    pub fn too_few_steps(&self, a: &WorkerState, b: &WorkerState) -> String {
        let measured = |w: &WorkerState| self.basis.durations(w).len();
        let short = if measured(a) <= measured(b) { a } else { b };
        format!(
            "{} has {} measured steps, {MIN_SAMPLES} are needed",
            short.name,
            measured(short)
        )
    }
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
    fn sessions_spread_sets_the_interval() {
        // Three sessions a side, 1% apart within a side, B 20% slower: beyond noise.
        let a = [10.0, 10.1, 9.9];
        let b = [12.0, 12.1, 11.9];
        let r = ratio_between_sessions(&a, &b).unwrap();
        assert!((r.ratio - 1.2).abs() < 0.01, "{r:?}");
        assert!(r.low > 1.1 && r.high < 1.3 && r.beyond_noise(), "{r:?}");
        // The same 20% from sessions that themselves vary by ±30% is within noise.
        let noisy_a = [7.0, 10.0, 13.0];
        let noisy_b = [8.4, 12.0, 15.6];
        let r = ratio_between_sessions(&noisy_a, &noisy_b).unwrap();
        assert!(!r.beyond_noise(), "{r:?}");
        // One session on a side borrows the other side's spread; one each has none to judge by.
        assert!(ratio_between_sessions(&[12.0], &a).is_some());
        assert!(ratio_between_sessions(&[10.0], &[12.0]).is_none());
        assert!(ratio_between_sessions(&[0.0, 1.0], &a).is_none());
        // Identical sessions: a ratio of exactly 1 with no width.
        let same = ratio_between_sessions(&a, &a).unwrap();
        assert!((same.ratio - 1.0).abs() < 1e-12 && !same.beyond_noise());
    }

    #[test]
    fn a_verdict_needs_the_fewest_steps_whose_interval_leaves_out_the_extremes() {
        let interior = |n: u64| {
            let (low, high) = interval_ranks(n);
            low > 1 && high < n
        };
        assert!(!interior(MIN_VERDICT_SAMPLES - 1));
        assert!((MIN_VERDICT_SAMPLES..10_000).all(interior));
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
