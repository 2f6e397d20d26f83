//! Bounded time series: what charts draw. Old points fall off the front, so memory stays fixed however
//! long a session runs.

use std::collections::VecDeque;

/// Points kept per series: at 10 readings a second, the last ~7 minutes.
pub const SERIES_CAPACITY: usize = 4096;

#[derive(Debug, Clone)]
pub struct Series {
    points: VecDeque<(f64, f64)>,
    capacity: usize,
}

impl Default for Series {
    fn default() -> Self {
        Series::with_capacity(SERIES_CAPACITY)
    }
}

impl Series {
    pub fn with_capacity(capacity: usize) -> Series {
        Series {
            points: VecDeque::with_capacity(capacity.min(1024)),
            capacity: capacity.max(1),
        }
    }

    /// Adds a point at `t` seconds; non-finite values are dropped (a chart cannot place them).
    pub fn push(&mut self, t: f64, value: f64) {
        if !t.is_finite() || !value.is_finite() {
            return;
        }
        if self.points.len() == self.capacity {
            self.points.pop_front();
        }
        self.points.push_back((t, value));
    }

    pub fn last(&self) -> Option<(f64, f64)> {
        self.points.back().copied()
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// When points have fallen off the front, the time from which the series is complete.
    pub fn complete_from(&self) -> Option<f64> {
        (self.points.len() == self.capacity)
            .then(|| self.points.front().map(|&(t, _)| t))
            .flatten()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The points with `from <= t <= to`, in time order.
    pub fn window(&self, from: f64, to: f64) -> Vec<(f64, f64)> {
        self.window_iter(from, to).collect()
    }

    /// The same points as `window`, without copying them.
    pub fn window_iter(&self, from: f64, to: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
        let start = self.points.partition_point(|&(t, _)| t < from);
        self.points
            .range(start..)
            .take_while(move |&&(t, _)| t <= to)
            .copied()
    }

    /// The largest value among the points with `from <= t <= to`.
    pub fn max_in(&self, from: f64, to: f64) -> Option<f64> {
        self.window_iter(from, to).map(|(_, v)| v).reduce(f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_points_within_capacity() {
        let mut s = Series::with_capacity(3);
        for i in 0..5 {
            s.push(f64::from(i), f64::from(i * 10));
        }
        assert_eq!(s.len(), 3);
        assert_eq!(
            s.window(0.0, 10.0),
            vec![(2.0, 20.0), (3.0, 30.0), (4.0, 40.0)]
        );
        assert_eq!(s.last(), Some((4.0, 40.0)));
    }

    #[test]
    fn windows_and_maxima() {
        let mut s = Series::default();
        for i in 0..10 {
            s.push(f64::from(i), f64::from((i * 7) % 10));
        }
        assert_eq!(s.window(2.5, 4.0), vec![(3.0, 1.0), (4.0, 8.0)]);
        assert_eq!(s.max_in(0.0, 3.0), Some(7.0));
        assert_eq!(s.max_in(20.0, 30.0), None);
    }

    #[test]
    fn non_finite_points_are_dropped() {
        let mut s = Series::default();
        s.push(f64::NAN, 1.0);
        s.push(1.0, f64::INFINITY);
        assert!(s.is_empty());
    }
}
