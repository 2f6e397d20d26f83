//! Per-window aggregation of CUPTI activity records: kernel and copy statistics, the GPU time breakdown, and the
//! records' timeline ([`crate::timeline`]), which follows the statistics into whichever window counts a record.
//!
//! The collector feeds every kernel and memcpy record to an [`Aggregator`] and calls [`Aggregator::cut`] once per
//! window. The breakdown follows HTA: busy is the union of kernel intervals, copy the union of copy intervals that
//! no kernel overlaps, idle the rest. Memory stays bounded whatever the driver delivers, since a collector living
//! inside a worker process must never grow with the length of a run.

use std::collections::{BTreeMap, HashMap};

use golow_protocol::collector::{
    Breakdown, CopyKind, CopyStats, KernelStats, KernelWindow, MemoryKind,
};

use crate::timeline;

/// Name of the entry that takes every kernel beyond the per-window name cap.
pub const OTHER_KERNELS: &str = "(other kernels)";

/// Disjoint intervals kept per interval list; beyond that the smallest gaps are closed (see [`Spans::coarsen`]).
const MAX_SPANS: usize = 1 << 16;
/// Launch shapes tracked per kernel; later shapes still count toward the kernel's totals.
const MAX_SHAPES: usize = 64;
const MAX_GRID_HISTOGRAM: usize = 16;
const MAX_DISPLAY_CHARS: usize = 64;
/// Real kernel names stay well below this; longer input is not worth the demangler's time.
const MAX_DEMANGLE_BYTES: usize = 1 << 14;
/// Display names are cached across windows because a training loop launches the same few hundred kernels forever.
const MAX_CACHED_NAMES: usize = 2048;

/// One kernel execution as CUPTI reports it (CUpti_ActivityKernel*): times in ns on the GPU clock.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelActivity {
    /// Mangled or not.
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers_per_thread: u16,
    pub static_shared_bytes: u32,
    pub dynamic_shared_bytes: u32,
    pub stream: u32,
    pub device: u32,
}

/// One memcpy as CUPTI reports it (CUpti_ActivityMemcpy*): times in ns on the GPU clock.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyActivity {
    pub kind: CopyKind,
    pub src: MemoryKind,
    pub dst: MemoryKind,
    pub bytes: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub stream: u32,
    pub device: u32,
}

/// The breakdown of a window of `len_ns`, which `kernels` and `copies` lie inside; an empty window reads as idle.
fn breakdown(len_ns: u64, kernels: &Spans, copies: &Spans) -> Breakdown {
    let len = len_ns.max(1) as f64;
    let busy = kernels.total() as f64 / len;
    let copy = copies.total().saturating_sub(copies.overlap(kernels)) as f64 / len;
    // Clamped so that rounding never shows a negative idle share.
    let idle = (1.0 - busy - copy).max(0.0);
    Breakdown { busy, copy, idle }
}

/// Sorted, disjoint, non-touching half-open intervals.
#[derive(Debug, Default)]
struct Spans(Vec<(u64, u64)>);

impl Spans {
    fn insert(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let first = self.0.partition_point(|&(_, h)| h < lo);
        let last = first + self.0[first..].partition_point(|&(l, _)| l <= hi);
        match self.0[first..last] {
            [] => self.0.insert(first, (lo, hi)),
            [(l, _), .., (_, h)] | [(l, h)] => {
                self.0[first] = (l.min(lo), h.max(hi));
                self.0.drain(first + 1..last);
            }
        }
        if self.0.len() > MAX_SPANS {
            self.coarsen();
        }
    }

    /// Closes the smallest half of the gaps: overstating activity by the least time is the cheapest way to stay
    /// bounded when a window holds more disjoint intervals than we are willing to keep.
    fn coarsen(&mut self) {
        let mut gaps: Vec<u64> = self.0.windows(2).map(|w| w[1].0 - w[0].1).collect();
        if gaps.is_empty() {
            return;
        }
        let k = gaps.len() / 2;
        let threshold = *gaps.select_nth_unstable(k).1;
        // Ties at the threshold would otherwise close every gap when all gaps are equal.
        let mut ties = k + 1 - gaps.iter().filter(|&&g| g < threshold).count();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.0.len() - k);
        for &(lo, hi) in &self.0 {
            match merged.last_mut() {
                Some(last) if lo - last.1 < threshold => last.1 = hi,
                Some(last) if lo - last.1 == threshold && ties > 0 => {
                    ties -= 1;
                    last.1 = hi;
                }
                _ => merged.push((lo, hi)),
            }
        }
        self.0 = merged;
    }

    /// Removes and returns the part before `at`, splitting an interval that straddles it.
    fn take_before(&mut self, at: u64) -> Spans {
        let idx = self.0.partition_point(|&(lo, _)| lo < at);
        let rest = self.0.split_off(idx);
        let mut before = std::mem::replace(&mut self.0, rest);
        if let Some(last) = before.last_mut()
            && last.1 > at
        {
            self.0.insert(0, (at, last.1));
            last.1 = at;
        }
        Spans(before)
    }

    fn total(&self) -> u64 {
        self.0
            .iter()
            .fold(0, |sum, &(lo, hi)| sum.saturating_add(hi - lo))
    }

    fn overlap(&self, other: &Spans) -> u64 {
        let (mut i, mut j, mut sum) = (0, 0, 0u64);
        while let (Some(&(a_lo, a_hi)), Some(&(b_lo, b_hi))) = (self.0.get(i), other.0.get(j)) {
            let (lo, hi) = (a_lo.max(b_lo), a_hi.min(b_hi));
            sum = sum.saturating_add(hi.saturating_sub(lo));
            if a_hi < b_hi {
                i += 1;
            } else {
                j += 1;
            }
        }
        sum
    }
}

#[derive(Debug, Clone, Copy)]
enum WindowStart {
    /// Nothing arrived yet and no window was cut.
    Unknown,
    /// Before the first cut the window opens at the earliest activity seen so far.
    Earliest(u64),
    /// Every later window opens where the previous one was cut.
    Cut(u64),
}

#[derive(Debug)]
struct Shape {
    grid: [u32; 3],
    block: [u32; 3],
    registers_per_thread: u16,
    shared_bytes: u32,
    count: u64,
}

#[derive(Debug, Default)]
struct KernelEntry {
    count: u64,
    total_ns: u64,
    max_ns: u64,
    shapes: Vec<Shape>,
}

impl KernelEntry {
    fn record(&mut self, duration_ns: u64, launch: Shape) {
        self.count = self.count.saturating_add(1);
        self.total_ns = self.total_ns.saturating_add(duration_ns);
        self.max_ns = self.max_ns.max(duration_ns);
        self.add_shape(launch);
    }

    fn add_shape(&mut self, launch: Shape) {
        let tracked = self.shapes.len();
        match self
            .shapes
            .iter_mut()
            .find(|s| s.grid == launch.grid && s.block == launch.block)
        {
            Some(shape) => shape.count = shape.count.saturating_add(launch.count),
            None if tracked < MAX_SHAPES => self.shapes.push(launch),
            None => {}
        }
    }

    fn absorb(&mut self, later: KernelEntry) {
        self.count = self.count.saturating_add(later.count);
        self.total_ns = self.total_ns.saturating_add(later.total_ns);
        self.max_ns = self.max_ns.max(later.max_ns);
        for shape in later.shapes {
            self.add_shape(shape);
        }
    }

    fn into_stats(self, name: String) -> KernelStats {
        // `reduce` keeps the earliest shape on ties, so the choice does not depend on anything but arrival order.
        let top = self
            .shapes
            .iter()
            .reduce(|best, s| if s.count > best.count { s } else { best });
        let mut grid_histogram: Vec<([u32; 3], u64)> = Vec::new();
        for shape in &self.shapes {
            match grid_histogram
                .iter_mut()
                .find(|(grid, _)| *grid == shape.grid)
            {
                Some((_, count)) => *count = count.saturating_add(shape.count),
                None => grid_histogram.push((shape.grid, shape.count)),
            }
        }
        grid_histogram.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
        grid_histogram.truncate(MAX_GRID_HISTOGRAM);
        KernelStats {
            name,
            count: self.count,
            total_ns: self.total_ns,
            max_ns: self.max_ns,
            grid: top.map_or([0; 3], |s| s.grid),
            block: top.map_or([0; 3], |s| s.block),
            shapes: u32::try_from(self.shapes.len()).unwrap_or(u32::MAX),
            registers_per_thread: top.map_or(0, |s| s.registers_per_thread),
            shared_bytes: top.map_or(0, |s| s.shared_bytes),
            grid_histogram,
        }
    }
}

/// Statistics of the activity that started in one window.
#[derive(Debug, Default)]
struct Tally {
    kernels: HashMap<String, KernelEntry>,
    other_kernels: Option<KernelEntry>,
    copies: BTreeMap<(CopyKind, MemoryKind), CopyStats>,
    timeline: timeline::Builder,
}

impl Tally {
    /// Counts a launch under its name while the tally has room for names, or under one it must keep anyway (a name
    /// the window before it kept, so that the two still agree when merged).
    fn kernel(
        &mut self,
        name: &str,
        duration_ns: u64,
        launch: Shape,
        max_names: usize,
        keep: bool,
    ) {
        let entry = if let Some(entry) = self.kernels.get_mut(name) {
            entry
        } else if keep || self.kernels.len() < max_names {
            self.kernels.entry(name.to_owned()).or_default()
        } else {
            self.other_kernels.get_or_insert_with(KernelEntry::default)
        };
        entry.record(duration_ns, launch);
    }

    fn copy(&mut self, kind: CopyKind, src: MemoryKind, count: u64, bytes: u64, total_ns: u64) {
        let stats = self.copies.entry((kind, src)).or_insert(CopyStats {
            kind,
            src,
            count: 0,
            bytes: 0,
            total_ns: 0,
        });
        stats.count = stats.count.saturating_add(count);
        stats.bytes = stats.bytes.saturating_add(bytes);
        stats.total_ns = stats.total_ns.saturating_add(total_ns);
    }

    fn absorb(&mut self, later: Tally, max_names: usize) {
        let other = later.other_kernels.map(|e| (None, e));
        for (name, entry) in later
            .kernels
            .into_iter()
            .map(|(n, e)| (Some(n), e))
            .chain(other)
        {
            let into = match name {
                Some(name)
                    if self.kernels.contains_key(&name) || self.kernels.len() < max_names =>
                {
                    self.kernels.entry(name).or_default()
                }
                _ => self.other_kernels.get_or_insert_with(KernelEntry::default),
            };
            into.absorb(entry);
        }
        for c in later.copies.into_values() {
            self.copy(c.kind, c.src, c.count, c.bytes, c.total_ns);
        }
        self.timeline.absorb(later.timeline);
    }

    fn into_lists(self) -> (Vec<KernelStats>, Vec<CopyStats>) {
        let other = self.other_kernels.map(|e| (OTHER_KERNELS.to_owned(), e));
        let entries = self.kernels.into_iter().chain(other);
        let mut kernels: Vec<KernelStats> = entries.map(|(name, e)| e.into_stats(name)).collect();
        kernels.sort_by(|a, b| (b.total_ns, &a.name).cmp(&(a.total_ns, &b.name)));
        (kernels, self.copies.into_values().collect())
    }
}

/// Accumulates activity records and cuts windows.
///
/// CUPTI delivers a record only once its buffer is handed back, so the collector cuts a window a window late, and
/// records arriving before the cut that started after it are held for the next window. Statistics count an activity
/// in the window it started in, unless CUPTI delivers it after that window was cut (then in the open one); the
/// breakdown only ever counts time inside the window. Records without valid times are skipped and counted.
#[derive(Debug)]
pub struct Aggregator {
    window_ns: u64,
    max_kernel_names: usize,
    start: WindowStart,
    open: Tally,
    ahead: Tally,
    kernel_spans: Spans,
    copy_spans: Spans,
    dropped_records: u64,
    invalid_records: u64,
    display_names: HashMap<String, String>,
}

impl Aggregator {
    pub fn new(window_ns: u64, max_kernel_names: usize) -> Aggregator {
        Aggregator {
            window_ns,
            max_kernel_names,
            start: WindowStart::Unknown,
            open: Tally::default(),
            ahead: Tally::default(),
            kernel_spans: Spans::default(),
            copy_spans: Spans::default(),
            dropped_records: 0,
            invalid_records: 0,
            display_names: HashMap::new(),
        }
    }

    /// Where the open window should be cut: its start plus the window length; `None` before any activity or cut.
    pub fn next_cut(&self) -> Option<u64> {
        match self.start {
            WindowStart::Unknown => None,
            WindowStart::Earliest(s) | WindowStart::Cut(s) => {
                Some(s.saturating_add(self.window_ns))
            }
        }
    }

    pub fn kernel(&mut self, k: KernelActivity) {
        let Some(duration_ns) = self.valid(k.start_ns, k.end_ns) else {
            return;
        };
        let ahead = self.next_cut().is_some_and(|cut| k.start_ns >= cut);
        let lo = self.open_at(k.start_ns);
        self.kernel_spans.insert(lo, k.end_ns);
        self.tally(ahead).timeline.kernel(k.start_ns, k.end_ns);
        if self.display_names.len() >= MAX_CACHED_NAMES && !self.display_names.contains_key(&k.name)
        {
            self.display_names.clear();
        }
        let name = self
            .display_names
            .entry(k.name)
            .or_insert_with_key(|raw| display_name(raw));
        let launch = Shape {
            grid: k.grid,
            block: k.block,
            registers_per_thread: k.registers_per_thread,
            shared_bytes: k.static_shared_bytes.saturating_add(k.dynamic_shared_bytes),
            count: 1,
        };
        let max_names = self.max_kernel_names;
        if ahead {
            let keep = self.open.kernels.contains_key(name.as_str());
            self.ahead
                .kernel(name, duration_ns, launch, max_names, keep);
        } else {
            self.open
                .kernel(name, duration_ns, launch, max_names, false);
        }
    }

    pub fn copy(&mut self, c: CopyActivity) {
        let Some(duration_ns) = self.valid(c.start_ns, c.end_ns) else {
            return;
        };
        let ahead = self.next_cut().is_some_and(|cut| c.start_ns >= cut);
        let lo = self.open_at(c.start_ns);
        self.copy_spans.insert(lo, c.end_ns);
        let tally = self.tally(ahead);
        tally.copy(c.kind, c.src, 1, c.bytes, duration_ns);
        tally
            .timeline
            .copy(c.kind, c.src, c.start_ns, c.end_ns, c.bytes);
    }

    /// Where an activity's statistics go: the open window, or the next one when it started after the open one.
    fn tally(&mut self, ahead: bool) -> &mut Tally {
        if ahead {
            &mut self.ahead
        } else {
            &mut self.open
        }
    }

    /// The duration of an activity whose times CUPTI filled in; `None`, counted, for one it did not.
    fn valid(&mut self, start_ns: u64, end_ns: u64) -> Option<u64> {
        match end_ns.checked_sub(start_ns) {
            Some(duration) if start_ns > 0 && duration > 0 => Some(duration),
            _ => {
                self.invalid_records = self.invalid_records.saturating_add(1);
                None
            }
        }
    }

    /// CUPTI reported that `n` records were dropped (buffer full).
    pub fn dropped(&mut self, n: u64) {
        self.dropped_records = self.dropped_records.saturating_add(n);
    }

    /// Closes the window [start, end) and returns its aggregate.
    ///
    /// Time after `end` of activity straddling it stays for the next window's breakdown. An `end` before the
    /// window's start (a clock going backwards) yields an empty window rather than a negative one; an `end` past
    /// the window's length (at exit, or after the process was stopped) takes everything started so far.
    pub fn cut(&mut self, end_ns: u64) -> KernelWindow {
        let start = match self.start {
            WindowStart::Unknown => end_ns,
            WindowStart::Earliest(s) | WindowStart::Cut(s) => s,
        };
        let end = end_ns.max(start);
        let kernel_spans = self.kernel_spans.take_before(end);
        let copy_spans = self.copy_spans.take_before(end);
        let breakdown = breakdown(end - start, &kernel_spans, &copy_spans);
        let mut tally = std::mem::take(&mut self.open);
        if self.next_cut().is_none_or(|cut| end > cut) {
            tally.absorb(std::mem::take(&mut self.ahead), self.max_kernel_names);
        } else {
            self.open = std::mem::take(&mut self.ahead);
        }
        let timeline = std::mem::take(&mut tally.timeline).into_timeline(start);
        let (kernels, copies) = tally.into_lists();
        self.start = WindowStart::Cut(end);
        KernelWindow {
            window_start_ns: start,
            window_end_ns: end,
            kernels,
            copies,
            breakdown,
            dropped_records: std::mem::take(&mut self.dropped_records),
            invalid_records: std::mem::take(&mut self.invalid_records),
            dropped_windows: 0,
            monotonic_start_ns: None,
            monotonic_end_ns: None,
            timeline: Some(timeline),
        }
    }

    /// Notes an activity starting at `start_ns` and returns where its interval enters the open window: time before
    /// the last cut belongs to a window already sent.
    fn open_at(&mut self, start_ns: u64) -> u64 {
        match self.start {
            WindowStart::Unknown => self.start = WindowStart::Earliest(start_ns),
            WindowStart::Earliest(s) => self.start = WindowStart::Earliest(s.min(start_ns)),
            WindowStart::Cut(s) => return start_ns.max(s),
        }
        start_ns
    }
}

/// Display name: demangled (Itanium `_Z…`), without template arguments, parameter list or a leading `void `,
/// at most 64 characters (cut with `…`). PyTorch's generic elementwise kernels keep the operation they run, from
/// their template arguments (`vectorized_elementwise_kernel (clamp_scalar)`), or ReLU, fills and adds would be one.
pub fn display_name(raw: &str) -> String {
    let demangled = demangle(raw);
    let full = demangled.as_deref().unwrap_or(raw).trim();
    let full = full.strip_prefix("void ").unwrap_or(full);
    let mut name = strip_arguments(full).trim().to_owned();
    if (name.ends_with("elementwise_kernel") || name.ends_with("elementwise_kernel_with_index"))
        && let Some(operation) = full
            .find('<')
            .and_then(|at| elementwise_operation(&full[at..]))
    {
        name = format!("{name} ({operation})");
    }
    if name.is_empty() {
        "(unnamed)".to_owned()
    } else if name.chars().count() > MAX_DISPLAY_CHARS {
        name.chars()
            .take(MAX_DISPLAY_CHARS - 1)
            .chain(std::iter::once('…'))
            .collect()
    } else {
        name
    }
}

/// The operation an elementwise kernel's template arguments name: the function that launched it
/// (`launch_clamp_scalar`, `threshold_kernel_cuda`, `…_kernel_impl`), else its functor (`FillFunctor`).
fn elementwise_operation(arguments: &str) -> Option<&str> {
    let words: Vec<&str> = arguments
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    // gpu_kernel_impl is the launcher every elementwise operation goes through, not an operation.
    let launcher = words
        .iter()
        .filter(|w| !w.starts_with("gpu_kernel"))
        .find_map(|w| {
            w.strip_prefix("launch_")
                .or_else(|| w.strip_suffix("_kernel_cuda"))
                .or_else(|| w.strip_suffix("_kernel_impl"))
        });
    launcher
        .or_else(|| words.iter().copied().find(|w| w.contains("Functor")))
        .filter(|w| !w.is_empty())
}

fn demangle(raw: &str) -> Option<String> {
    if !raw.starts_with("_Z") || raw.len() > MAX_DEMANGLE_BYTES {
        return None;
    }
    let options = cpp_demangle::DemangleOptions::new()
        .no_params()
        .no_return_type();
    cpp_demangle::Symbol::new(raw)
        .ok()?
        .demangle_with_options(&options)
        .ok()
}

/// Keeps what lies outside `<…>`, up to the parameter list; `(anonymous namespace)` is part of a qualified name,
/// not a parameter list.
fn strip_arguments(name: &str) -> String {
    const ANONYMOUS: &str = "(anonymous namespace)";
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if depth == 0 && rest.starts_with(ANONYMOUS) {
            out.push_str(ANONYMOUS);
            rest = &rest[ANONYMOUS.len()..];
            continue;
        }
        match c {
            '(' if depth == 0 => break,
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::collector::Run;

    const WINDOW: u64 = 1_000;
    /// CUPTI's clock is never 0 for a real record (0 marks a missing time), so the tests' time starts later.
    const T0: u64 = 1_000_000;

    fn at(ns: u64) -> u64 {
        T0.saturating_add(ns)
    }

    fn kernel(name: &str, start_ns: u64, end_ns: u64, stream: u32) -> KernelActivity {
        KernelActivity {
            name: name.to_owned(),
            start_ns: at(start_ns),
            end_ns: at(end_ns),
            grid: [1, 1, 1],
            block: [128, 1, 1],
            registers_per_thread: 32,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 0,
            stream,
            device: 0,
        }
    }

    fn h2d(start_ns: u64, end_ns: u64) -> CopyActivity {
        CopyActivity {
            kind: CopyKind::HostToDevice,
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
            bytes: 4096,
            start_ns: at(start_ns),
            end_ns: at(end_ns),
            stream: 7,
            device: 0,
        }
    }

    /// Cuts [0, 1000) after feeding the activity, so that fractions read as per-mille of ns.
    fn window(kernels: &[(u64, u64)], copies: &[(u64, u64)]) -> KernelWindow {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.cut(at(0));
        for (i, &(start, end)) in kernels.iter().enumerate() {
            agg.kernel(kernel("k", start, end, u32::try_from(i).unwrap_or(0)));
        }
        for &(start, end) in copies {
            agg.copy(h2d(start, end));
        }
        agg.cut(at(WINDOW))
    }

    fn assert_breakdown(b: Breakdown, busy: f64, copy: f64) {
        let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
        assert!(close(b.busy, busy) && close(b.copy, copy), "{b:?}");
        assert!(close(b.busy + b.copy + b.idle, 1.0), "{b:?}");
    }

    #[test]
    fn overlapping_kernels_on_two_streams_count_once() {
        let w = window(&[(0, 100), (50, 150)], &[]);
        assert_eq!((w.window_start_ns, w.window_end_ns), (at(0), at(WINDOW)));
        assert_breakdown(w.breakdown, 0.15, 0.0);
        let k = w.kernels.iter().find(|k| k.name == "k").unwrap();
        assert_eq!((k.count, k.total_ns, k.max_ns), (2, 200, 100));
    }

    #[test]
    fn copy_breakdown_excludes_time_under_kernels() {
        assert_breakdown(window(&[(100, 300)], &[(150, 250)]).breakdown, 0.2, 0.0);
        assert_breakdown(window(&[(100, 300)], &[(250, 400)]).breakdown, 0.2, 0.1);
        assert_breakdown(
            window(&[(100, 300), (500, 600)], &[(350, 450)]).breakdown,
            0.3,
            0.1,
        );
        let w = window(&[], &[(350, 450), (400, 500)]);
        assert_breakdown(w.breakdown, 0.0, 0.15);
        assert_eq!(
            w.copies,
            vec![CopyStats {
                kind: CopyKind::HostToDevice,
                src: MemoryKind::Pinned,
                count: 2,
                bytes: 8192,
                total_ns: 200
            }]
        );
    }

    #[test]
    fn activity_straddling_the_cut_is_split_for_the_breakdown_only() {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.kernel(kernel("a", 0, 100, 0));
        agg.kernel(kernel("a", 900, 1_200, 0));
        agg.copy(h2d(950, 1_500));
        let first = agg.cut(at(1_000));
        assert_breakdown(first.breakdown, 0.2, 0.0);
        assert_eq!(
            (first.kernels[0].count, first.kernels[0].total_ns),
            (2, 400)
        );
        assert_eq!(agg.next_cut(), Some(at(2_000)));
        let second = agg.cut(at(2_000));
        assert_eq!(
            (second.window_start_ns, second.window_end_ns),
            (at(1_000), at(2_000))
        );
        assert_breakdown(second.breakdown, 0.2, 0.3);
        assert!(second.kernels.is_empty() && second.copies.is_empty());
        assert_breakdown(agg.cut(at(3_000)).breakdown, 0.0, 0.0);
    }

    #[test]
    fn late_records_count_but_only_inside_the_open_window() {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.kernel(kernel("a", 500, 600, 0));
        assert_eq!(agg.next_cut(), Some(at(1_500)));
        agg.cut(at(1_000));
        agg.kernel(kernel("late", 800, 1_100, 0));
        let w = agg.cut(at(2_000));
        assert_breakdown(w.breakdown, 0.1, 0.0);
        assert_eq!(
            (w.kernels[0].name.as_str(), w.kernels[0].total_ns),
            ("late", 300)
        );
    }

    #[test]
    fn the_timeline_follows_each_record_into_the_window_that_counts_it() {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.cut(at(0));
        agg.kernel(kernel("a", 100, 200, 0));
        agg.kernel(kernel("a", 200, 300, 1));
        agg.copy(h2d(400, 450));
        // Started after the window ends: the next window's.
        agg.kernel(kernel("b", 1_200, 1_300, 0));
        let first = agg.cut(at(WINDOW)).timeline.unwrap();
        assert_eq!(first.kernels, [Run::from((100, 300, 2, 200))]);
        assert_eq!(first.copies[0].runs, [Run::from((400, 450, 1, 4096))]);
        // Handed back after its window was sent: counted in the open one, before its start.
        agg.kernel(kernel("late", 900, 950, 0));
        let second = agg.cut(at(2 * WINDOW)).timeline.unwrap();
        assert_eq!(
            second.kernels,
            [Run::from((-100, -50, 1, 50)), Run::from((200, 300, 1, 100))]
        );
        assert!(second.copies.is_empty());
    }

    #[test]
    fn most_frequent_shape_is_reported() {
        let mut agg = Aggregator::new(WINDOW, 8);
        let launch = |grid: [u32; 3], block: [u32; 3], shared: u32| KernelActivity {
            grid,
            block,
            dynamic_shared_bytes: shared,
            static_shared_bytes: 16,
            ..kernel("gemm", 0, 10, 0)
        };
        agg.kernel(launch([8, 1, 1], [256, 1, 1], 0));
        for _ in 0..3 {
            agg.kernel(launch([4, 2, 1], [128, 1, 1], 1024));
        }
        agg.kernel(launch([4, 2, 1], [64, 1, 1], 0));
        for x in 0..40 {
            agg.kernel(launch([100 + x, 1, 1], [32, 1, 1], 0));
        }
        let w = agg.cut(at(100));
        let k = &w.kernels[0];
        assert_eq!(
            (k.grid, k.block, k.shared_bytes, k.registers_per_thread),
            ([4, 2, 1], [128, 1, 1], 1040, 32)
        );
        assert_eq!((k.count, k.shapes), (45, 43));
        assert_eq!(k.grid_histogram.len(), MAX_GRID_HISTOGRAM);
        assert_eq!(k.grid_histogram[..2], [([4, 2, 1], 4), ([8, 1, 1], 1)]);
    }

    #[test]
    fn names_beyond_the_cap_fold_into_other_kernels_sorted_by_time() {
        let mut agg = Aggregator::new(WINDOW, 2);
        agg.kernel(kernel("short", 0, 10, 0));
        agg.kernel(kernel("long", 0, 500, 0));
        agg.kernel(kernel("third", 0, 30, 0));
        agg.kernel(kernel("fourth", 0, 40, 0));
        agg.kernel(kernel("short", 0, 10, 0));
        let w = agg.cut(at(1_000));
        let names: Vec<_> = w
            .kernels
            .iter()
            .map(|k| (k.name.as_str(), k.count, k.total_ns))
            .collect();
        assert_eq!(
            names,
            [("long", 1, 500), (OTHER_KERNELS, 2, 70), ("short", 2, 20)]
        );
        agg.kernel(kernel("third", 1_000, 1_010, 0));
        assert_eq!(agg.cut(at(2_000)).kernels[0].name, "third");
    }

    #[test]
    fn dropped_records_are_reported_once() {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.dropped(3);
        agg.dropped(u64::MAX);
        assert_eq!(agg.cut(at(10)).dropped_records, u64::MAX);
        assert_eq!(agg.cut(at(20)).dropped_records, 0);
    }

    #[test]
    fn display_names() {
        let elementwise = "at::native::vectorized_elementwise_kernel";
        let cases = [
            (
                "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
                "at::native::vectorized_elementwise_kernel (FillFunctor)",
            ),
            (
                "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnn::bn_fw_tr_1C11_args<float, float, int>)",
                "cudnn::bn_fw_tr_1C11_kernel_NCHW",
            ),
            (
                "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&)::{lambda()#1}>(int, float)",
                "at::native::vectorized_elementwise_kernel (clamp_scalar)",
            ),
            (
                "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}>(at::TensorIteratorBase&, at::native::threshold_kernel_impl<float> const&)::{lambda(int)#1}>(int, float)",
                "at::native::elementwise_kernel (threshold)",
            ),
            (
                "void at::native::vectorized_elementwise_kernel<4>(int)",
                elementwise,
            ),
            (
                "void at::(anonymous namespace)::k<1>(int)",
                "at::(anonymous namespace)::k",
            ),
            (
                "sm80_xmma_fprop_implicit_gemm_f32f32",
                "sm80_xmma_fprop_implicit_gemm_f32f32",
            ),
            ("_Znot_a_symbol<", "_Znot_a_symbol"),
            ("", "(unnamed)"),
        ];
        for (raw, want) in cases {
            assert_eq!(display_name(raw), want, "{raw}");
        }
        let long = display_name(&"x".repeat(100));
        assert_eq!((long.chars().count(), long.ends_with('…')), (64, true));
    }

    #[test]
    fn records_without_valid_times_are_skipped_and_counted() {
        let mut agg = Aggregator::new(WINDOW, 8);
        let zero = KernelActivity {
            start_ns: 0,
            ..kernel("zero", 0, 100, 0)
        };
        agg.kernel(zero);
        agg.kernel(kernel("empty", 300, 300, 0));
        agg.copy(h2d(400, 350));
        assert_eq!(agg.next_cut(), None);
        agg.kernel(kernel("k", 500, 600, 0));
        let w = agg.cut(at(1_500));
        assert_eq!((w.window_start_ns, w.invalid_records), (at(500), 3));
        assert_eq!(w.kernels.len(), 1);
        assert_breakdown(w.breakdown, 0.1, 0.0);
        assert_eq!(agg.cut(at(2_500)).invalid_records, 0);
    }

    #[test]
    fn a_window_cut_late_leaves_what_started_after_it_to_the_next() {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.kernel(kernel("a", 0, 100, 0));
        agg.kernel(kernel("b", 1_000, 1_200, 0));
        agg.copy(h2d(1_500, 1_600));
        let first = agg.cut(at(1_000));
        assert_eq!(first.kernels.len(), 1);
        assert_eq!(
            (first.kernels[0].name.as_str(), first.copies.len()),
            ("a", 0)
        );
        assert_breakdown(first.breakdown, 0.1, 0.0);
        let second = agg.cut(at(2_000));
        assert_eq!(second.kernels[0].name, "b");
        assert_eq!(second.copies[0].count, 1);
        assert_breakdown(second.breakdown, 0.2, 0.1);
    }

    #[test]
    fn a_cut_past_the_window_takes_everything_started_before_it() {
        let mut agg = Aggregator::new(WINDOW, 1);
        agg.kernel(kernel("a", 0, 100, 0));
        agg.kernel(kernel("b", 1_500, 1_600, 0));
        agg.kernel(kernel("a", 1_700, 1_800, 0));
        let w = agg.cut(at(2_000));
        let counts: Vec<_> = w
            .kernels
            .iter()
            .map(|k| (k.name.as_str(), k.count))
            .collect();
        assert_eq!(counts, [("a", 2), (OTHER_KERNELS, 1)]);
        assert_breakdown(w.breakdown, 0.15, 0.0);
        assert!(agg.cut(at(3_000)).kernels.is_empty());
    }

    #[test]
    fn memsets_count_as_memory_traffic() {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.cut(at(0));
        agg.kernel(kernel("k", 0, 100, 0));
        agg.copy(CopyActivity {
            kind: CopyKind::Memset,
            src: MemoryKind::Device,
            dst: MemoryKind::Device,
            ..h2d(200, 250)
        });
        let w = agg.cut(at(WINDOW));
        assert_breakdown(w.breakdown, 0.1, 0.05);
        assert_eq!((w.copies[0].kind, w.copies[0].count), (CopyKind::Memset, 1));
    }

    #[test]
    fn garbage_never_panics() {
        let mut agg = Aggregator::new(u64::MAX, 1);
        agg.kernel(kernel("backwards", 10, 5, 0));
        agg.copy(h2d(10, 5));
        let w = agg.cut(at(100));
        assert!(w.kernels.is_empty() && w.copies.is_empty());
        assert_eq!(w.invalid_records, 2);
        assert_breakdown(w.breakdown, 0.0, 0.0);
        let raw = |name: &str, start_ns, end_ns| KernelActivity {
            start_ns,
            end_ns,
            ..kernel(name, 0, 0, 0)
        };
        agg.kernel(raw("_Z", u64::MAX, u64::MAX));
        agg.kernel(raw("_ZZZ<<>>((", 1, u64::MAX));
        agg.kernel(raw("x", u64::MAX - 1, u64::MAX));
        let huge = CopyActivity {
            bytes: u64::MAX,
            start_ns: 1,
            end_ns: u64::MAX,
            ..h2d(0, 0)
        };
        agg.copy(huge.clone());
        agg.copy(huge);
        assert_eq!(agg.next_cut(), Some(u64::MAX));
        let w = agg.cut(50);
        assert_eq!((w.window_start_ns, w.window_end_ns), (at(100), at(100)));
        assert_eq!((w.copies[0].bytes, w.invalid_records), (u64::MAX, 1));
        let w = agg.cut(u64::MAX);
        assert_breakdown(w.breakdown, 1.0, 0.0);
        agg.cut(0);
    }

    #[test]
    fn interval_lists_stay_bounded() {
        let mut spans = Spans::default();
        for i in 0..=MAX_SPANS as u64 {
            spans.insert(i * 10, i * 10 + 1 + i % 3);
        }
        assert!(spans.0.len() <= MAX_SPANS / 2 + 1, "{}", spans.0.len());
        assert!(spans.0.windows(2).all(|w| w[0].1 < w[1].0));
        let closed_gaps = spans.total() - (MAX_SPANS as u64 + 1) * 2;
        assert!(
            closed_gaps <= (MAX_SPANS as u64 / 2 + 1) * 8,
            "{closed_gaps}"
        );
    }

    #[test]
    fn window_serialises_in_snake_case() {
        let mut agg = Aggregator::new(WINDOW, 8);
        agg.copy(h2d(0, 10));
        let w = agg.cut(at(10));
        let json = serde_json::to_string(&w).unwrap();
        assert!(
            json.contains(r#""kind":"host_to_device","src":"pinned""#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<KernelWindow>(&json).unwrap(), w);
    }
}
