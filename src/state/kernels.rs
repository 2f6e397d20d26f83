//! A worker's GPU activity over the session, folded from the collector's windows: kernel totals by
//! name, copies by kind and source, and the busy/copy/idle breakdown weighted by window length.

use std::collections::BTreeMap;

use crate::event::{Breakdown, CopyKind, KernelWindow, MemoryKind};

/// Kernel names kept per worker: whatever the windows say, the table stays bounded.
pub const MAX_KERNEL_NAMES: usize = 256;
/// Distinct grids kept per kernel.
const MAX_GRIDS: usize = 16;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelTotals {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// The launch shape of the window in which the kernel ran most often.
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers_per_thread: u16,
    pub shared_bytes: u32,
    /// The most distinct (grid, block) shapes any window saw.
    pub shapes: u32,
    /// Launches per grid, most frequent first.
    pub grids: Vec<([u32; 3], u64)>,
    most_in_a_window: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CopyTotals {
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, Default)]
pub struct GpuActivity {
    pub kernels: BTreeMap<String, KernelTotals>,
    pub copies: BTreeMap<(CopyKind, MemoryKind), CopyTotals>,
    pub dropped_records: u64,
    pub windows: u64,
    busy_ns: f64,
    copy_ns: f64,
    window_ns: f64,
}

impl GpuActivity {
    pub fn apply(&mut self, window: &KernelWindow) {
        self.windows += 1;
        self.dropped_records = self.dropped_records.saturating_add(window.dropped_records);
        let len = window.window_end_ns.saturating_sub(window.window_start_ns) as f64;
        let b = &window.breakdown;
        if [b.busy, b.copy]
            .iter()
            .all(|f| f.is_finite() && (0.0..=1.0).contains(f))
        {
            self.busy_ns += b.busy * len;
            self.copy_ns += b.copy * len;
            self.window_ns += len;
        }
        for k in &window.kernels {
            if !self.kernels.contains_key(&k.name) && self.kernels.len() >= MAX_KERNEL_NAMES {
                continue;
            }
            let t = self.kernels.entry(k.name.clone()).or_default();
            t.count = t.count.saturating_add(k.count);
            t.total_ns = t.total_ns.saturating_add(k.total_ns);
            t.max_ns = t.max_ns.max(k.max_ns);
            t.shapes = t.shapes.max(k.shapes);
            if k.count > t.most_in_a_window {
                t.most_in_a_window = k.count;
                (t.grid, t.block) = (k.grid, k.block);
                (t.registers_per_thread, t.shared_bytes) = (k.registers_per_thread, k.shared_bytes);
            }
            for &(grid, count) in k.grid_histogram.iter().take(MAX_GRIDS) {
                match t.grids.iter_mut().find(|(g, _)| *g == grid) {
                    Some(entry) => entry.1 = entry.1.saturating_add(count),
                    None => t.grids.push((grid, count)),
                }
            }
            t.grids.sort_by_key(|g| std::cmp::Reverse(g.1));
            t.grids.truncate(MAX_GRIDS);
        }
        for c in &window.copies {
            let t = self.copies.entry((c.kind, c.src)).or_default();
            t.count = t.count.saturating_add(c.count);
            t.bytes = t.bytes.saturating_add(c.bytes);
            t.total_ns = t.total_ns.saturating_add(c.total_ns);
        }
    }

    /// Busy, copy and idle shares of all windows together; `None` before the first.
    pub fn breakdown(&self) -> Option<Breakdown> {
        (self.window_ns > 0.0).then(|| {
            let (busy, copy) = (self.busy_ns / self.window_ns, self.copy_ns / self.window_ns);
            Breakdown {
                busy,
                copy,
                idle: (1.0 - busy - copy).max(0.0),
            }
        })
    }

    /// Kernels by total time, largest first.
    pub fn top(&self) -> Vec<(&str, &KernelTotals)> {
        let mut top: Vec<(&str, &KernelTotals)> =
            self.kernels.iter().map(|(n, t)| (n.as_str(), t)).collect();
        top.sort_by_key(|k| std::cmp::Reverse(k.1.total_ns));
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CopyStats, KernelStats};

    pub(crate) fn window(
        start: u64,
        kernels: &[(&str, u64, u64, [u32; 3])],
        busy: f64,
    ) -> KernelWindow {
        KernelWindow {
            window_start_ns: start,
            window_end_ns: start + 1_000_000_000,
            kernels: kernels
                .iter()
                .map(|&(name, count, total_ns, grid)| KernelStats {
                    name: name.into(),
                    count,
                    total_ns,
                    max_ns: total_ns / count.max(1) * 2,
                    grid,
                    block: [128, 1, 1],
                    shapes: 1,
                    registers_per_thread: 32,
                    shared_bytes: 0,
                    grid_histogram: vec![(grid, count)],
                })
                .collect(),
            copies: vec![CopyStats {
                kind: CopyKind::HostToDevice,
                src: MemoryKind::Pinned,
                count: 2,
                bytes: 1 << 20,
                total_ns: 90_000,
            }],
            breakdown: Breakdown {
                busy,
                copy: 0.05,
                idle: 0.95 - busy,
            },
            dropped_records: 3,
        }
    }

    #[test]
    fn windows_add_up_per_kernel_and_weight_the_breakdown() {
        let mut a = GpuActivity::default();
        assert_eq!(a.breakdown(), None);
        a.apply(&window(
            0,
            &[
                ("relu", 10, 5_000, [1024, 2, 1]),
                ("gemm", 2, 90_000, [8, 8, 1]),
            ],
            0.8,
        ));
        a.apply(&window(
            1_000_000_000,
            &[("relu", 30, 15_000, [512, 2, 1])],
            0.4,
        ));
        let relu = &a.kernels["relu"];
        assert_eq!((relu.count, relu.total_ns), (40, 20_000));
        assert_eq!(relu.grid, [512, 2, 1]);
        assert_eq!(relu.grids, vec![([512, 2, 1], 30), ([1024, 2, 1], 10)]);
        assert_eq!(a.top()[0].0, "gemm");
        let b = a.breakdown().unwrap();
        assert!(
            (b.busy - 0.6).abs() < 1e-9 && (b.copy - 0.05).abs() < 1e-9,
            "{b:?}"
        );
        assert_eq!(
            a.copies[&(CopyKind::HostToDevice, MemoryKind::Pinned)].bytes,
            2 << 20
        );
        assert_eq!(a.dropped_records, 6);
    }

    #[test]
    fn the_table_stays_bounded_and_garbage_is_ignored() {
        let mut a = GpuActivity::default();
        for i in 0..(MAX_KERNEL_NAMES as u64 + 50) {
            let name = format!("k{i}");
            a.apply(&window(i, &[(&name, 1, u64::MAX, [1, 1, 1])], f64::NAN));
        }
        assert_eq!(a.kernels.len(), MAX_KERNEL_NAMES);
        assert_eq!(a.breakdown(), None);
    }
}
