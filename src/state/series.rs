//! Bounded time series: what charts draw. Old points fall off the front, so memory stays fixed however
//! long a session runs.
//!
//! Points are kept in chunks that copies of a series share: a replay keeps hundreds of copies of the state (its
//! checkpoints), and a copy costs a pointer a chunk and the newest points, not the whole window.

use std::collections::VecDeque;
use std::sync::Arc;

/// Points kept per series: at 10 readings a second, the last ~7 minutes.
pub const SERIES_CAPACITY: usize = 4096;

/// Points a shared chunk holds (4 KiB), fewer for a series that keeps fewer.
const CHUNK_POINTS: usize = 256;

#[derive(Debug, Clone)]
pub struct Series {
    /// Full chunks, oldest first, shared with every copy of the series.
    sealed: VecDeque<Arc<[(f64, f64)]>>,
    /// The newest points, fewer than a chunk.
    open: Vec<(f64, f64)>,
    /// Points of the oldest chunk that have fallen off the front.
    dropped: usize,
    chunk: usize,
    capacity: usize,
}

impl Default for Series {
    fn default() -> Self {
        Series::with_capacity(SERIES_CAPACITY)
    }
}

impl Series {
    pub fn with_capacity(capacity: usize) -> Series {
        let capacity = capacity.max(1);
        Series {
            sealed: VecDeque::new(),
            open: Vec::new(),
            dropped: 0,
            chunk: capacity.min(CHUNK_POINTS),
            capacity,
        }
    }

    /// Adds a point at `t` seconds; non-finite values are dropped (a chart cannot place them).
    pub fn push(&mut self, t: f64, value: f64) {
        if !t.is_finite() || !value.is_finite() {
            return;
        }
        if self.open.capacity() == 0 {
            self.open.reserve_exact(self.chunk);
        }
        self.open.push((t, value));
        if self.open.len() == self.chunk {
            self.sealed
                .push_back(Arc::from(std::mem::take(&mut self.open)));
        }
        // A chunk is never more than the capacity: past it, the oldest point lies in a sealed chunk.
        if self.len() > self.capacity {
            self.dropped += 1;
            if self.dropped == self.chunk {
                self.sealed.pop_front();
                self.dropped = 0;
            }
        }
    }

    pub fn last(&self) -> Option<(f64, f64)> {
        self.open
            .last()
            .or_else(|| self.sealed.back().and_then(|chunk| chunk.last()))
            .copied()
    }

    pub fn len(&self) -> usize {
        self.sealed.len() * self.chunk - self.dropped + self.open.len()
    }

    /// When points have fallen off the front, the time from which the series is complete.
    pub fn complete_from(&self) -> Option<f64> {
        (self.len() == self.capacity)
            .then(|| self.points_from(0).next().map(|(t, _)| t))
            .flatten()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The points with `from <= t <= to`, in time order.
    pub fn window(&self, from: f64, to: f64) -> Vec<(f64, f64)> {
        self.window_iter(from, to).collect()
    }

    /// The same points as `window`, without copying them.
    pub fn window_iter(&self, from: f64, to: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.points_from(self.first_at_or_after(from))
            .take_while(move |&(t, _)| t <= to)
    }

    /// The largest value among the points with `from <= t <= to`.
    pub fn max_in(&self, from: f64, to: f64) -> Option<f64> {
        self.window_iter(from, to).map(|(_, v)| v).reduce(f64::max)
    }

    /// The points in order, as the slices that hold them.
    fn slices(&self) -> impl Iterator<Item = &[(f64, f64)]> {
        let dropped = self.dropped;
        self.sealed
            .iter()
            .enumerate()
            .map(move |(i, chunk)| {
                if i == 0 {
                    &chunk[dropped..]
                } else {
                    &chunk[..]
                }
            })
            .chain([self.open.as_slice()])
    }

    /// The points from the `start`th on.
    fn points_from(&self, start: usize) -> impl Iterator<Item = (f64, f64)> + '_ {
        let mut skip = start;
        self.slices().flat_map(move |slice| {
            let skipped = skip.min(slice.len());
            skip -= skipped;
            slice[skipped..].iter().copied()
        })
    }

    /// The `i`th point.
    fn point(&self, i: usize) -> (f64, f64) {
        let at = i + self.dropped;
        match self.sealed.get(at / self.chunk) {
            Some(chunk) => chunk[at % self.chunk],
            None => self.open[at - self.sealed.len() * self.chunk],
        }
    }

    /// How many points lie before `from`: the points are in time order as they came.
    fn first_at_or_after(&self, from: f64) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = low + (high - low) / 2;
            if self.point(middle).0 < from {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
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

    /// The series against the plain bounded queue it stands for, pushed with times that repeat.
    #[test]
    fn every_capacity_keeps_what_a_bounded_queue_keeps() {
        let mut x: u64 = 7;
        let mut next = move || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as f64 / f64::from(1u32 << 31)
        };
        for capacity in [1, 2, 3, 255, 256, 257, 700, SERIES_CAPACITY] {
            let mut series = Series::with_capacity(capacity);
            let mut queue = VecDeque::new();
            let mut t = 0.0;
            for i in 0..3 * capacity + 600 {
                t += (next() * 2.0).floor();
                series.push(t, next());
                if queue.len() == capacity {
                    queue.pop_front();
                }
                queue.push_back((t, series.last().unwrap().1));
                assert_eq!(series.len(), queue.len(), "capacity {capacity}");
                assert_eq!(series.last(), queue.back().copied());
                assert_eq!(
                    series.complete_from(),
                    (queue.len() == capacity).then(|| queue[0].0)
                );
                let from = i as f64 * next();
                let to = from + next() * 300.0;
                let expected: Vec<_> = {
                    let start = queue.partition_point(|&(t, _)| t < from);
                    queue
                        .range(start..)
                        .take_while(|&&(t, _)| t <= to)
                        .copied()
                        .collect()
                };
                assert_eq!(
                    series.window(from, to),
                    expected,
                    "capacity {capacity}, {from}..{to}"
                );
            }
            let copy = series.clone();
            assert_eq!(
                copy.window(f64::MIN, f64::MAX),
                queue.iter().copied().collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_copy_shares_the_points_of_full_chunks() {
        let mut series = Series::default();
        for i in 0..SERIES_CAPACITY + 100 {
            series.push(i as f64, 1.0);
        }
        let copy = series.clone();
        assert_eq!(copy.sealed.len(), series.sealed.len());
        assert!(
            copy.sealed
                .iter()
                .zip(&series.sealed)
                .all(|(a, b)| Arc::ptr_eq(a, b))
        );
        assert!(copy.open.len() < CHUNK_POINTS);
    }

    #[test]
    fn non_finite_points_are_dropped() {
        let mut s = Series::default();
        s.push(f64::NAN, 1.0);
        s.push(1.0, f64::INFINITY);
        assert!(s.is_empty());
    }
}
