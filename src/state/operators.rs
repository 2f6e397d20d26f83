//! A worker's operator breakdown, folded from the `operators` windows of the steps it profiled: per operator its
//! calls, self and total time over the whole run, and its self time per profiled step over time; how much of the
//! profiled steps' compute time the operators' self times explain; and what looking cost, from the steps themselves:
//! the profiled steps' compute time against the others', taken in the same run (they alternate, one in `every`).

use golow_protocol::event::OperatorWindow;

use super::Durations;
use super::script::bounded;
use super::series::Series;

/// Operator names told apart per worker; later names are summed under the last window's `(other operators)`
/// (`golow_protocol::event::OTHER_OPERATORS`), so a model of endless distinct names stays bounded.
pub const MAX_OPERATOR_NAMES: usize = 256;

/// Points kept of each operator's self time per step over time.
pub const OPERATOR_SERIES_CAPACITY: usize = 512;

#[derive(Debug, Clone)]
pub struct OperatorTotals {
    pub calls: u64,
    pub self_ns: u64,
    pub total_ns: u64,
    /// Its input shapes' most frequent form in the latest window that had one.
    pub shapes: String,
    /// Self milliseconds per profiled step, per window.
    pub self_ms_per_step: Series,
}

impl Default for OperatorTotals {
    fn default() -> Self {
        OperatorTotals {
            calls: 0,
            self_ns: 0,
            total_ns: 0,
            shapes: String::new(),
            self_ms_per_step: Series::with_capacity(OPERATOR_SERIES_CAPACITY),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Operators {
    /// In no order: every reader sorts what it shows (by time, then name), and a window's names are looked up in
    /// one hash each where a tree compared each several times. At most `MAX_OPERATOR_NAMES`, so names chosen to
    /// collide cost little.
    pub by_name: foldhash::HashMap<String, OperatorTotals>,
    /// Profiled steps, and their compute time summed.
    pub steps: u64,
    pub compute_ms: f64,
    /// One step in `every` was profiled (the latest window's).
    pub every: u32,
    /// What the recorder could not tell apart, plus the calls of names beyond `MAX_OPERATOR_NAMES`.
    pub dropped: u64,
    /// Compute times of measured steps that were profiled and of those that were not.
    pub profiled_compute: Durations,
    pub unprofiled_compute: Durations,
    /// Why no (more) steps are profiled, as the worker said.
    pub off: Option<String>,
}

impl Operators {
    pub fn apply(&mut self, t: f64, window: &OperatorWindow) {
        if window.steps == 0 {
            return;
        }
        self.steps += window.steps;
        if window.compute_ms.is_finite() && window.compute_ms > 0.0 {
            self.compute_ms += window.compute_ms;
        }
        self.every = window.every;
        self.dropped = self.dropped.saturating_add(window.dropped);
        let steps = window.steps as f64;
        for op in &window.operators {
            let name = bounded(&op.name);
            let full = self.by_name.len() >= MAX_OPERATOR_NAMES;
            let totals = match self.by_name.get_mut(name) {
                Some(totals) => totals,
                None if full => {
                    self.dropped = self.dropped.saturating_add(op.calls);
                    continue;
                }
                None => self.by_name.entry(name.to_string()).or_default(),
            };
            totals.calls = totals.calls.saturating_add(op.calls);
            totals.self_ns = totals.self_ns.saturating_add(op.self_ns);
            totals.total_ns = totals.total_ns.saturating_add(op.total_ns);
            let shapes = bounded(&op.shapes);
            // The same shapes window after window: kept without a new allocation each time.
            if !shapes.is_empty() && totals.shapes != shapes {
                totals.shapes.clear();
                totals.shapes.push_str(shapes);
            }
            totals
                .self_ms_per_step
                .push(t, op.self_ns as f64 / 1e6 / steps);
        }
    }

    /// The worker profiles no (more) steps, for `reason`: the first reason said is kept.
    pub fn turned_off(&mut self, reason: &str) {
        if self.off.is_none() {
            let mut end = reason.len().min(golow_protocol::script::MAX_REASON_BYTES);
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            self.off = Some(reason[..end].to_string());
        }
    }

    /// How representative the profiled steps were: their median time against the other measured steps' median.
    pub fn profiled_against_plain(&self) -> Option<(f64, f64)> {
        let profiled = self.profiled_compute.median_ms()?;
        let plain = self.unprofiled_compute.median_ms()?;
        (plain > 0.0 && self.unprofiled_compute.len() >= 3).then_some((profiled, plain))
    }

    /// A measured step's compute time, profiled or not.
    pub fn step(&mut self, compute_ms: f64, profiled: bool) {
        if profiled {
            self.profiled_compute.record_ms(compute_ms);
        } else {
            self.unprofiled_compute.record_ms(compute_ms);
        }
    }

    /// The `n` operators with the most self time, largest first.
    pub fn top(&self, n: usize) -> Vec<(&str, &OperatorTotals)> {
        let mut all: Vec<(&str, &OperatorTotals)> =
            self.by_name.iter().map(|(k, v)| (k.as_str(), v)).collect();
        all.sort_by(|a, b| b.1.self_ns.cmp(&a.1.self_ns).then_with(|| a.0.cmp(b.0)));
        all.truncate(n);
        all
    }

    /// Per profiled step: milliseconds of `ns`, or calls.
    pub fn per_step(&self, value: u64) -> Option<f64> {
        (self.steps > 0).then(|| value as f64 / self.steps as f64)
    }

    /// A profiled step's compute time, on average.
    pub fn compute_ms_per_step(&self) -> Option<f64> {
        (self.steps > 0).then(|| self.compute_ms / self.steps as f64)
    }

    /// The share of the profiled steps' compute time the operators' self times explain.
    pub fn explained(&self) -> Option<f64> {
        // Summed as whole nanoseconds: exact, so the same in any order.
        let self_ns: u128 = self.by_name.values().map(|o| u128::from(o.self_ns)).sum();
        (self.compute_ms > 0.0).then(|| self_ns as f64 / 1e6 / self.compute_ms)
    }

    /// What looking cost: how much longer a profiled step's compute took than an unprofiled one's (medians, as a
    /// fraction), and that over the run (the profiled steps' share of the measured ones).
    pub fn overhead(&self) -> Option<(f64, f64)> {
        let profiled = self.profiled_compute.median_ms()?;
        let plain = self.unprofiled_compute.median_ms()?;
        let (looked, not) = (self.profiled_compute.len(), self.unprofiled_compute.len());
        if plain <= 0.0 || looked < 3 || not < 3 {
            return None;
        }
        let per_step = profiled / plain - 1.0;
        Some((per_step, per_step * looked as f64 / (looked + not) as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::event::{OTHER_OPERATORS, OperatorStats};

    fn op(name: &str, calls: u64, self_ms: u64, total_ms: u64) -> OperatorStats {
        OperatorStats {
            name: name.into(),
            calls,
            self_ns: self_ms * 1_000_000,
            total_ns: total_ms * 1_000_000,
            shapes: Default::default(),
        }
    }

    fn window(steps: u64, compute_ms: f64, operators: Vec<OperatorStats>) -> OperatorWindow {
        OperatorWindow {
            process: 0,
            steps,
            compute_ms,
            every: 10,
            operators,
            dropped: 0,
        }
    }

    #[test]
    fn windows_add_up_per_operator_and_per_profiled_step() {
        let mut o = Operators::default();
        o.apply(
            1.0,
            &window(
                2,
                100.0,
                vec![
                    op("aten::convolution", 20, 60, 70),
                    op("aten::add", 40, 30, 30),
                ],
            ),
        );
        o.apply(
            2.0,
            &window(
                1,
                50.0,
                vec![
                    op("aten::convolution", 10, 30, 35),
                    op("aten::relu", 10, 10, 10),
                ],
            ),
        );
        assert_eq!(o.steps, 3);
        let top = o.top(2);
        assert_eq!(
            top.iter().map(|(n, t)| (*n, t.calls)).collect::<Vec<_>>(),
            [("aten::convolution", 30), ("aten::add", 40)]
        );
        assert_eq!(o.per_step(top[0].1.self_ns), Some(30e6));
        // 90 + 30 + 10 ms of self time over 150 ms of compute.
        assert!((o.explained().unwrap() - 130.0 / 150.0).abs() < 1e-9);
        // Each window's self time per step: 60 / 2, then 30 / 1.
        let series = &o.by_name["aten::convolution"].self_ms_per_step;
        assert_eq!(series.window(0.0, 3.0), [(1.0, 30.0), (2.0, 30.0)]);
        // An empty window changes nothing.
        o.apply(3.0, &window(0, 0.0, vec![op("aten::mul", 1, 1, 1)]));
        assert!(!o.by_name.contains_key("aten::mul"));
    }

    #[test]
    fn endless_names_stay_bounded_and_long_ones_are_cut() {
        let mut o = Operators::default();
        for i in 0..1_000 {
            let name = format!("custom::op_{i}_{}", "x".repeat(200));
            o.apply(f64::from(i), &window(1, 1.0, vec![op(&name, 3, 1, 1)]));
        }
        assert_eq!(o.by_name.len(), MAX_OPERATOR_NAMES);
        assert_eq!(o.dropped, 3 * (1_000 - MAX_OPERATOR_NAMES as u64));
        assert!(o.by_name.keys().all(|k| k.len() <= 64));
        // A window's own fold of what did not fit is a name like any other: here, one too many.
        o.apply(9.0, &window(1, 1.0, vec![op(OTHER_OPERATORS, 5, 1, 1)]));
        assert_eq!(o.dropped, 3 * (1_000 - MAX_OPERATOR_NAMES as u64) + 5);
    }

    #[test]
    fn what_looking_cost_is_the_profiled_steps_against_the_others() {
        let mut o = Operators::default();
        o.apply(1.0, &window(1, 105.0, vec![op("aten::add", 1, 100, 100)]));
        assert_eq!(o.overhead(), None, "no steps yet");
        for i in 0..30 {
            o.step(100.0 + f64::from(i % 3), false);
        }
        for _ in 0..3 {
            o.step(105.0, true);
        }
        let (per_step, run) = o.overhead().unwrap();
        assert!((per_step - 105.0 / 101.0 + 1.0).abs() < 0.01, "{per_step}");
        assert!((run - per_step * 3.0 / 33.0).abs() < 1e-12, "{run}");
    }
}
