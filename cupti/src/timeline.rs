//! A window's activity in time, for the monitor to set each record on the step that launched it.
//!
//! Per-window totals cannot be set on steps: a window holds parts of several steps, start-up's weights upload and
//! an epoch's evaluation, and reaches the monitor after later steps. Each record alone would be exact but unbounded
//! (tens of thousands of launches a second on a small model). So kernels are kept as runs: launches whose intervals
//! overlap or touch join one run, which is one stretch of back-to-back work on the GPU; and copies, a few per step,
//! each as their own run. Beyond a cap per window the runs with the smallest gaps between them are merged (and
//! counted): a step's boundary is where the GPU waited for the host (a batch assembled, a loss read), among the
//! window's largest gaps, so the merging blurs what lies inside a step before it blurs where a step ends.

use golow_protocol::collector::{CopyKind, CopyRuns, MemoryKind, Run, Timeline};

/// Kernel runs per window: about 40 bytes each in JSON, so a full timeline stays well inside a message beside the
/// window's kernel table.
pub const MAX_KERNEL_RUNS: usize = 1024;
/// Copy runs per window, over every direction and source.
pub const MAX_COPY_RUNS: usize = 256;

/// Records close together, on the collector's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stretch {
    start: u64,
    end: u64,
    count: u64,
    amount: u64,
}

/// Stretches in start order.
#[derive(Debug, Default)]
struct Lane(Vec<Stretch>);

impl Lane {
    /// Adds a stretch where it starts; with `join`, it swallows the stretches it overlaps or touches, and its
    /// amount (busy time) counts only what they did not already cover.
    fn insert(&mut self, new: Stretch, join: bool) {
        if !join {
            let at = self.0.partition_point(|s| s.start <= new.start);
            self.0.insert(at, new);
            return;
        }
        let first = self.0.partition_point(|s| s.end < new.start);
        let last = first + self.0[first..].partition_point(|s| s.start <= new.end);
        let mut merged = new;
        for s in &self.0[first..last] {
            let covered = s.end.min(new.end).saturating_sub(s.start.max(new.start));
            merged.amount = merged.amount.saturating_sub(covered);
        }
        for s in &self.0[first..last] {
            merged = Stretch {
                start: merged.start.min(s.start),
                end: merged.end.max(s.end),
                count: merged.count.saturating_add(s.count),
                amount: merged.amount.saturating_add(s.amount),
            };
        }
        self.0.splice(first..last, [merged]);
    }

    /// Merges the closest half of neighbouring stretches, returning how many merges it made.
    fn coarsen(&mut self) -> u64 {
        let gap = |w: &[Stretch]| w[1].start.saturating_sub(w[0].end);
        let mut gaps: Vec<u64> = self.0.windows(2).map(gap).collect();
        if gaps.is_empty() {
            return 0;
        }
        let k = gaps.len() / 2;
        let threshold = *gaps.select_nth_unstable(k).1;
        // Ties at the threshold would otherwise merge everything when all gaps are equal.
        let mut ties = k + 1 - gaps.iter().filter(|&&g| g < threshold).count();
        let before = self.0.len();
        let mut merged: Vec<Stretch> = Vec::with_capacity(before - k);
        for s in self.0.drain(..) {
            match merged.last_mut() {
                Some(last)
                    if s.start.saturating_sub(last.end) < threshold
                        || (s.start.saturating_sub(last.end) == threshold && ties > 0) =>
                {
                    if s.start.saturating_sub(last.end) == threshold {
                        ties -= 1;
                    }
                    *last = Stretch {
                        start: last.start,
                        end: last.end.max(s.end),
                        count: last.count.saturating_add(s.count),
                        amount: last.amount.saturating_add(s.amount),
                    };
                }
                _ => merged.push(s),
            }
        }
        self.0 = merged;
        (before - self.0.len()) as u64
    }

    fn runs(&self, origin: u64) -> Vec<Run> {
        let offset = |t: u64| i64::try_from(i128::from(t) - i128::from(origin)).unwrap_or(i64::MAX);
        self.0
            .iter()
            .map(|s| Run {
                start: offset(s.start),
                end: offset(s.end),
                count: s.count,
                amount: s.amount,
            })
            .collect()
    }
}

/// The timeline of one window's records, bounded by [`MAX_KERNEL_RUNS`] and [`MAX_COPY_RUNS`].
#[derive(Debug, Default)]
pub struct Builder {
    kernels: Lane,
    copies: std::collections::BTreeMap<(CopyKind, MemoryKind), Lane>,
    copy_runs: usize,
    merged: u64,
}

impl Builder {
    /// A kernel that ran over [start, end) on the collector's clock.
    pub fn kernel(&mut self, start: u64, end: u64) {
        self.kernel_run(Stretch {
            start,
            end,
            count: 1,
            amount: end.saturating_sub(start),
        });
    }

    fn kernel_run(&mut self, run: Stretch) {
        self.kernels.insert(run, true);
        if self.kernels.0.len() > MAX_KERNEL_RUNS {
            self.merged = self.merged.saturating_add(self.kernels.coarsen());
        }
    }

    pub fn copy(&mut self, kind: CopyKind, src: MemoryKind, start: u64, end: u64, bytes: u64) {
        self.copy_run(
            (kind, src),
            Stretch {
                start,
                end,
                count: 1,
                amount: bytes,
            },
        );
    }

    fn copy_run(&mut self, lane: (CopyKind, MemoryKind), run: Stretch) {
        self.copies.entry(lane).or_default().insert(run, false);
        self.copy_runs += 1;
        if self.copy_runs > MAX_COPY_RUNS
            && let Some(largest) = self.copies.values_mut().max_by_key(|l| l.0.len())
        {
            let merges = largest.coarsen();
            self.copy_runs -= merges as usize;
            self.merged = self.merged.saturating_add(merges);
        }
    }

    /// Takes in the runs of a later builder (records that arrived ahead of their window).
    pub fn absorb(&mut self, later: Builder) {
        for run in later.kernels.0 {
            self.kernel_run(run);
        }
        for (lane, runs) in later.copies {
            for run in runs.0 {
                self.copy_run(lane, run);
            }
        }
        self.merged = self.merged.saturating_add(later.merged);
    }

    /// The timeline with times from `origin`, the window's start.
    pub fn into_timeline(self, origin: u64) -> Timeline {
        Timeline {
            kernels: self.kernels.runs(origin),
            copies: self
                .copies
                .iter()
                .map(|(&(kind, src), lane)| CopyRuns {
                    kind,
                    src,
                    runs: lane.runs(origin),
                })
                .collect(),
            merged: self.merged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernels(b: &Builder) -> Vec<(u64, u64, u64, u64)> {
        b.kernels
            .0
            .iter()
            .map(|s| (s.start, s.end, s.count, s.amount))
            .collect()
    }

    #[test]
    fn back_to_back_and_overlapping_kernels_make_one_run_and_gaps_part_them() {
        let mut b = Builder::default();
        b.kernel(100, 200);
        b.kernel(200, 250);
        // Another stream, overlapping both: its time under them counts once.
        b.kernel(150, 300);
        b.kernel(400, 450);
        // Delivered out of order, before the first.
        b.kernel(10, 20);
        assert_eq!(
            kernels(&b),
            [(10, 20, 1, 10), (100, 300, 3, 200), (400, 450, 1, 50)]
        );
    }

    #[test]
    fn copies_stay_one_run_each_per_direction_and_source() {
        let mut b = Builder::default();
        b.copy(CopyKind::HostToDevice, MemoryKind::Pinned, 50, 60, 4096);
        b.copy(CopyKind::HostToDevice, MemoryKind::Pinned, 10, 70, 1024);
        b.copy(CopyKind::Memset, MemoryKind::Device, 20, 30, 8);
        let t = b.into_timeline(40);
        assert_eq!(t.copies.len(), 2);
        let h2d = &t.copies[0];
        assert_eq!(
            (h2d.kind, h2d.src),
            (CopyKind::HostToDevice, MemoryKind::Pinned)
        );
        assert_eq!(
            h2d.runs,
            [Run::from((-30, 30, 1, 1024)), Run::from((10, 20, 1, 4096))]
        );
        assert_eq!(t.merged, 0);
    }

    #[test]
    fn beyond_the_caps_the_closest_runs_merge_and_nothing_is_lost() {
        let mut b = Builder::default();
        // Steps 10 µs apart, each of 32 launches 100 ns apart and three copies: four times the kernels' cap and 1.5
        // times the copies', which must give way inside steps first.
        let steps = MAX_COPY_RUNS as u64 / 2;
        for step in 0..steps {
            let at = step * 10_000;
            for launch in 0..32 {
                b.kernel(at + launch * 100, at + launch * 100 + 50);
            }
            for copy in 0..3 {
                b.copy(
                    CopyKind::HostToDevice,
                    MemoryKind::Pinned,
                    at + copy * 20,
                    at + copy * 20 + 10,
                    1000,
                );
            }
        }
        let t = b.into_timeline(0);
        let h2d = &t.copies[0].runs;
        assert!(t.kernels.len() <= MAX_KERNEL_RUNS, "{}", t.kernels.len());
        assert!(h2d.len() <= MAX_COPY_RUNS && h2d.len() < 3 * steps as usize);
        let launches: u64 = t.kernels.iter().map(|r| r.count).sum();
        let busy: u64 = t.kernels.iter().map(|r| r.amount).sum();
        let bytes: u64 = h2d.iter().map(|r| r.amount).sum();
        assert_eq!(
            (launches, busy, bytes),
            (steps * 32, steps * 32 * 50, steps * 3000)
        );
        // Every step boundary (a gap of over 9 µs) survives the caps: no run crosses one.
        let within_a_step = |r: &Run| r.start / 10_000 == (r.end - 1) / 10_000;
        assert!(t.kernels.iter().all(within_a_step) && h2d.iter().all(within_a_step));
        let runs = (t.kernels.len() + h2d.len()) as u64;
        assert_eq!(t.merged, steps * 35 - runs);
    }

    #[test]
    fn absorbing_a_later_builder_keeps_the_caps() {
        let mut open = Builder::default();
        let mut ahead = Builder::default();
        for i in 0..(MAX_COPY_RUNS as u64) {
            open.copy(
                CopyKind::DeviceToHost,
                MemoryKind::Pageable,
                i * 10,
                i * 10 + 1,
                1,
            );
            ahead.copy(
                CopyKind::DeviceToHost,
                MemoryKind::Pageable,
                5 + i * 10,
                6 + i * 10,
                1,
            );
        }
        ahead.kernel(0, 5);
        open.absorb(ahead);
        let t = open.into_timeline(0);
        let copies: u64 = t.copies[0].runs.iter().map(|r| r.count).sum();
        assert_eq!(copies, 2 * MAX_COPY_RUNS as u64);
        assert!(t.copies[0].runs.len() <= MAX_COPY_RUNS);
        assert_eq!(t.kernels, [Run::from((0, 5, 1, 5))]);
    }
}
