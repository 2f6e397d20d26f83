//! A worker's GPU activity over the session, folded from the collector's windows: kernel totals by
//! name, copies by kind and source, and the busy/copy/idle breakdown weighted by window length.

use std::collections::BTreeMap;

use golow_protocol::event::{Breakdown, CollectorStatus, CopyKind, KernelWindow, MemoryKind};

pub use super::placement::{Activity, PerStep, StepKind};

/// Kernel names kept per worker: whatever the windows say, the table stays bounded.
pub const MAX_KERNEL_NAMES: usize = 256;
/// Distinct grids kept per kernel.
const MAX_GRIDS: usize = 16;
/// Measured steps remembered for placing windows: windows arrive within seconds of their steps.
const MAX_STEP_SPANS: usize = 4096;

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
    /// What the collector in the worker's process said of itself.
    pub collector: Option<CollectorStatus>,
    pub per_step: PerStep,
    pub kernels: BTreeMap<String, KernelTotals>,
    pub copies: BTreeMap<(CopyKind, MemoryKind), CopyTotals>,
    pub dropped_records: u64,
    /// Records the collector skipped for want of valid times, and windows it could not send.
    pub invalid_records: u64,
    pub dropped_windows: u64,
    pub windows: u64,
    /// The worker's measured steps as (start, end) in session seconds, oldest first.
    steps: std::collections::VecDeque<(f64, f64)>,
    busy_ns: f64,
    copy_ns: f64,
    window_ns: f64,
}

impl GpuActivity {
    /// Notes a measured step that ended at `end_s` (session seconds) after `duration_s`.
    pub fn stepped(&mut self, end_s: f64, duration_s: f64) {
        if !(end_s.is_finite() && duration_s.is_finite() && duration_s > 0.0) {
            return;
        }
        if self.steps.len() >= MAX_STEP_SPANS {
            self.steps.pop_front();
        }
        self.steps.push_back((end_s - duration_s, end_s));
    }

    /// Seconds of measured steps inside [from, to), forgetting the steps that ended before `from`.
    fn stepping_between(&mut self, from: f64, to: f64) -> f64 {
        while self.steps.front().is_some_and(|&(_, end)| end < from) {
            self.steps.pop_front();
        }
        self.steps
            .iter()
            .map(|&(start, end)| (end.min(to) - start.max(from)).max(0.0))
            .sum()
    }

    /// Folds a window. With the session's origin on the host's monotonic clock (`origin_ns`) and the window placed
    /// on it, the breakdown counts only the window's time inside measured steps, so that neither start-up nor other
    /// workers' turns read as idle time; its timeline's records are set on the worker's steps (`per_step`).
    pub fn apply(&mut self, window: &KernelWindow, origin_ns: Option<u64>) {
        self.windows += 1;
        self.per_step.window(window);
        self.dropped_records = self.dropped_records.saturating_add(window.dropped_records);
        self.invalid_records = self.invalid_records.saturating_add(window.invalid_records);
        self.dropped_windows = self.dropped_windows.saturating_add(window.dropped_windows);
        let len = window.window_end_ns.saturating_sub(window.window_start_ns) as f64;
        let b = &window.breakdown;
        if [b.busy, b.copy]
            .iter()
            .all(|f| f.is_finite() && (0.0..=1.0).contains(f))
        {
            let (busy, copy) = (b.busy * len, b.copy * len);
            match (
                origin_ns,
                window.monotonic_start_ns,
                window.monotonic_end_ns,
            ) {
                (Some(origin), Some(start), Some(end)) => {
                    let seconds = |t: u64| (t as f64 - origin as f64) / 1e9;
                    let held = (self.stepping_between(seconds(start), seconds(end)) * 1e9).min(len);
                    let busy = busy.min(held);
                    self.busy_ns += busy;
                    self.copy_ns += copy.min(held - busy);
                    self.window_ns += held;
                }
                _ => {
                    self.busy_ns += busy;
                    self.copy_ns += copy;
                    self.window_ns += len;
                }
            }
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

    /// Where the host-to-device copies' bytes came from: "pinned", "pageable", or "mixed" when neither has 99%.
    pub fn h2d_source(&self) -> Option<&'static str> {
        let from = |kind| {
            self.copies
                .get(&(CopyKind::HostToDevice, kind))
                .map_or(0, |t| t.bytes) as f64
        };
        let (pinned, pageable) = (from(MemoryKind::Pinned), from(MemoryKind::Pageable));
        let total = pinned + pageable;
        if total == 0.0 {
            None
        } else if pinned >= 0.99 * total {
            Some("pinned")
        } else if pageable >= 0.99 * total {
            Some("pageable")
        } else {
            Some("mixed")
        }
    }

    /// Kernels by total time, largest first.
    pub fn top(&self) -> Vec<(&str, &KernelTotals)> {
        let mut top: Vec<(&str, &KernelTotals)> =
            self.kernels.iter().map(|(n, t)| (n.as_str(), t)).collect();
        top.sort_by_key(|k| std::cmp::Reverse(k.1.total_ns));
        top
    }
}

/// Kernels of one family (elementwise, convolution, GEMM, …) summed, for setting two workers side by side even
/// where their libraries name the kernels differently.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub launches: u64,
    pub total_ns: u64,
    /// The family's most launched grid, with its launches.
    pub top_grid: Option<([u32; 3], u64)>,
}

/// The family of a kernel's display name; the order matters (an implicit GEMM is a convolution).
pub fn family_of(kernel: &str) -> &'static str {
    let k = kernel.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| k.contains(w));
    // Inductor names a generated kernel by its kind (pointwise; reduction, persistent or looped) and then by every
    // operation it fused (`triton_red_fused_convolution_backward_native_batch_norm_backward_…` is a reduction): the
    // kind says what it is.
    if k.starts_with("triton_poi_") {
        "Triton pointwise"
    } else if k.starts_with("triton_per_") || k.starts_with("triton_red_") {
        "Triton reduction"
    } else if has(&["elementwise", "relu", "threshold", "op_generic_tensor"]) {
        // `op_generic_tensor_kernel` is cuDNN's generic tensor operation: the cudnn level's ReLU and residual sum.
        "elementwise"
    } else if has(&[
        "conv",
        "fprop",
        "dgrad",
        "wgrad",
        "implicit_gemm",
        "winograd",
        "cudnn::cnn::",
        "im2col",
        "fft",
        "flip_filter",
        "pointwise_mult_and_sum_complex",
    ]) {
        "convolution"
    } else if has(&["gemm", "cutlass", "cublas", "nvjet"]) {
        "GEMM"
    } else if has(&["bn_", "batch_norm", "batchnorm"]) {
        "batch norm"
    } else if has(&["pool", "spread_mean"]) {
        // `spread_mean` is the cudnn level's global average pool, backward.
        "pooling"
    } else if has(&["softmax", "nll", "cross_entropy", "loss", "mean_of"]) {
        "loss"
    } else if has(&["multi_tensor", "foreach", "sgd"]) {
        "optimiser"
    } else if has(&["reduce", "reduction", "bias_diff"]) {
        "reduction"
    } else if has(&[
        "nchw",
        "nhwc",
        "converttensor",
        "tensortransform",
        "scalepackedtensor",
    ]) {
        // cuDNN's copies between memory layouts (NCHW, NHWC, folded, padded) around the kernels that want another.
        "layout"
    } else {
        "other"
    }
}

impl GpuActivity {
    /// Families by total time, largest first.
    pub fn families(&self) -> Vec<Family> {
        let mut families: Vec<Family> = Vec::new();
        let mut grids: BTreeMap<(&'static str, [u32; 3]), u64> = BTreeMap::new();
        for (name, t) in &self.kernels {
            let family = family_of(name);
            let i = match families.iter().position(|f| f.name == family) {
                Some(i) => i,
                None => {
                    families.push(Family {
                        name: family,
                        launches: 0,
                        total_ns: 0,
                        top_grid: None,
                    });
                    families.len() - 1
                }
            };
            let f = &mut families[i];
            f.launches = f.launches.saturating_add(t.count);
            f.total_ns = f.total_ns.saturating_add(t.total_ns);
            for &(grid, count) in &t.grids {
                let n = grids.entry((family, grid)).or_default();
                *n = n.saturating_add(count);
            }
        }
        for f in &mut families {
            f.top_grid = grids
                .range((f.name, [0; 3])..=(f.name, [u32::MAX; 3]))
                .map(|(&(_, grid), &count)| (grid, count))
                .reduce(|best, g| if g.1 > best.1 { g } else { best });
        }
        families.sort_by_key(|f| std::cmp::Reverse(f.total_ns));
        families
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use golow_protocol::event::{CopyStats, KernelStats};

    /// A collector window of these kernels (name, launches, ns, grid) and a pinned copy, its GPU busy for `busy`.
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
                    max_ns: (total_ns / count.max(1)).saturating_mul(2),
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
            invalid_records: 1,
            dropped_windows: 0,
            monotonic_start_ns: None,
            monotonic_end_ns: None,
            timeline: None,
        }
    }

    #[test]
    fn windows_add_up_per_kernel_and_weight_the_breakdown() {
        let mut a = GpuActivity::default();
        assert_eq!(a.breakdown(), None);
        a.apply(
            &window(
                0,
                &[
                    ("relu", 10, 5_000, [1024, 2, 1]),
                    ("gemm", 2, 90_000, [8, 8, 1]),
                ],
                0.8,
            ),
            None,
        );
        a.apply(
            &window(1_000_000_000, &[("relu", 30, 15_000, [512, 2, 1])], 0.4),
            None,
        );
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
        assert_eq!((a.dropped_records, a.invalid_records), (6, 2));
    }

    /// A window placed at `[from_s, from_s + 1)` session seconds, for a session whose origin is 10 s.
    fn placed(from_s: u64, busy: f64) -> (KernelWindow, Option<u64>) {
        let origin = 10_000_000_000;
        let mut w = window(0, &[("gemm", 10, 1_000, [8, 8, 1])], busy);
        w.monotonic_start_ns = Some(origin + from_s * 1_000_000_000);
        w.monotonic_end_ns = Some(origin + (from_s + 1) * 1_000_000_000);
        (w, Some(origin))
    }

    #[test]
    fn the_breakdown_counts_only_time_inside_measured_steps() {
        let mut a = GpuActivity::default();
        // Start-up: a window without a measured step does not count.
        let (startup, origin) = placed(0, 0.9);
        a.apply(&startup, origin);
        assert_eq!(a.breakdown(), None);
        // Alternating with two others, the worker held a third of the next window, and its GPU was busy for 0.25 s.
        a.stepped(1.2, 0.1);
        a.stepped(1.3, 0.1);
        a.stepped(1.5, 0.133_333_333_333_333_33);
        let (turn, origin) = placed(1, 0.25);
        a.apply(&turn, origin);
        let b = a.breakdown().unwrap();
        assert!((b.busy - 0.75).abs() < 1e-6, "{b:?}");
        assert!((b.copy - 0.05 / (1.0 / 3.0)).abs() < 1e-6, "{b:?}");
        // Steps before a window are forgotten once a later window is placed.
        a.stepped(2.5, 0.5);
        let (next, origin) = placed(2, 0.5);
        a.apply(&next, origin);
        assert_eq!(a.steps.len(), 1);
        // Without a placement (older recordings) the whole window counts.
        let mut old = GpuActivity::default();
        old.apply(&startup, None);
        assert!((old.breakdown().unwrap().busy - 0.9).abs() < 1e-9);
    }

    #[test]
    fn remembered_steps_stay_bounded() {
        let mut a = GpuActivity::default();
        for i in 0..(MAX_STEP_SPANS + 10) {
            a.stepped(i as f64, 0.5);
        }
        a.stepped(f64::NAN, 1.0);
        a.stepped(1.0, -1.0);
        assert_eq!(a.steps.len(), MAX_STEP_SPANS);
    }

    #[test]
    fn the_table_stays_bounded_and_garbage_is_ignored() {
        let mut a = GpuActivity::default();
        for i in 0..(MAX_KERNEL_NAMES as u64 + 50) {
            let name = format!("k{i}");
            a.apply(
                &window(i, &[(&name, 1, u64::MAX, [1, 1, 1])], f64::NAN),
                None,
            );
        }
        assert_eq!(a.kernels.len(), MAX_KERNEL_NAMES);
        assert_eq!(a.breakdown(), None);
    }

    /// Every level's kernels have a family: names from the shipped recordings (cudnn's generic tensor op,
    /// Inductor's fused Triton kernels, cuDNN's layout copies and FFT convolutions, the cudnn level's own kernels).
    #[test]
    fn every_levels_kernels_find_a_family() {
        for (kernel, family) in [
            ("op_generic_tensor_kernel", "elementwise"),
            (
                "at::native::vectorized_elementwise_kernel (clamp_scalar)",
                "elementwise",
            ),
            (
                "triton_poi_fused__native_batch_norm_legit_functional_relu_14",
                "Triton pointwise",
            ),
            ("triton_poi_fused_convolution_0", "Triton pointwise"),
            (
                "triton_per_fused_native_batch_norm_backward_threshold_backward_5",
                "Triton reduction",
            ),
            (
                "triton_red_fused_convolution_backward_div_expand_native_batch_n",
                "Triton reduction",
            ),
            ("cudnn::engines_precompiled::nchwToNhwcKernel", "layout"),
            ("nchwToFoldedNhwcKernel", "layout"),
            ("tensorTransformGeneric", "layout"),
            ("cudnn::cnn::kern_precompute_indices", "convolution"),
            ("fft2d_r2c_32x32", "convolution"),
            ("cudnn::engines_precompiled::im2col4d_kernel", "convolution"),
            ("spread_mean", "pooling"),
            ("mean_of", "loss"),
            ("cross_entropy_grad", "loss"),
            ("calc_bias_diff", "reduction"),
            ("at::native::reduce_kernel", "reduction"),
            ("cublasLt::splitKreduce_kernel", "GEMM"),
        ] {
            assert_eq!(family_of(kernel), family, "{kernel}");
        }
    }

    #[test]
    fn families_gather_kernels_and_keep_their_most_launched_grid() {
        let mut a = GpuActivity::default();
        a.apply(
            &window(
                0,
                &[
                    (
                        "at::native::vectorized_elementwise_kernel",
                        30,
                        3_000,
                        [1024, 2, 1],
                    ),
                    (
                        "at::native::unrolled_elementwise_kernel",
                        40,
                        2_000,
                        [512, 2, 1],
                    ),
                    ("sm90_xmma_fprop_implicit_gemm_f32f32", 5, 90_000, [7, 7, 4]),
                    ("cutlass_80_tensorop_s1688gemm", 1, 1_000, [2, 2, 1]),
                ],
                0.5,
            ),
            None,
        );
        let families = a.families();
        let names: Vec<&str> = families.iter().map(|f| f.name).collect();
        assert_eq!(names, ["convolution", "elementwise", "GEMM"]);
        let elementwise = &families[1];
        assert_eq!((elementwise.launches, elementwise.total_ns), (70, 5_000));
        assert_eq!(elementwise.top_grid, Some(([512, 2, 1], 40)));
        assert_eq!(family_of("cudnn::bn_fw_tr_1C11_kernel_NCHW"), "batch norm");
        assert_eq!(family_of("mystery"), "other");
        // cuBLAS's GEMMs on Hopper.
        assert_eq!(
            family_of("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN"),
            "GEMM"
        );
    }
}
