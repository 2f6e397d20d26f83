//! What the CUPTI collector sends the monitor: one JSON message per window on a `SOCK_SEQPACKET` socket, at the
//! descriptor named by `GOLOW_CUPTI_FD`. The monitor records these as events, so the types are part of golow's
//! event schema.

use serde::{Deserialize, Serialize};

/// The variable the CUDA driver reads to load an injection library into a process: the collector.
pub const INJECTION_ENV: &str = "CUDA_INJECTION64_PATH";
/// The descriptor (a `SOCK_SEQPACKET` socket, one message per window) the collector writes to.
pub const FD_ENV: &str = "GOLOW_CUPTI_FD";
/// Window length in milliseconds (default 1000).
pub const WINDOW_ENV: &str = "GOLOW_CUPTI_WINDOW_MS";
/// The inode of the socket at `FD_ENV`: a descendant that inherited the variables but reuses the descriptor for
/// something else (torchrun's TCPStore, say) must not be written to.
pub const INODE_ENV: &str = "GOLOW_CUPTI_INODE";
/// A libcupti to load instead of searching for one.
pub const LIBRARY_ENV: &str = "GOLOW_CUPTI_LIB";
/// Trace one window in N (`golow run --kernels-every`; default 1, every window).
pub const EVERY_ENV: &str = "GOLOW_CUPTI_EVERY";
/// The most windows `EVERY_ENV` may span: one traced window in over an hour of one-second windows says nothing.
pub const MAX_EVERY: u32 = 3600;
/// Every variable the monitor may set for the collector: what golow's exec interposer puts back where a program is
/// started without them.
pub const VARIABLES: [&str; 6] = [
    INJECTION_ENV,
    FD_ENV,
    WINDOW_ENV,
    INODE_ENV,
    LIBRARY_ENV,
    EVERY_ENV,
];
/// The largest message the collector sends; the monitor reads messages into a buffer this large.
pub const MAX_MESSAGE_BYTES: usize = 192 * 1024;

/// The host's CLOCK_MONOTONIC in nanoseconds: the clock the monitor's `Instant` reads on Linux and the collector
/// places its windows on.
pub fn monotonic_now_ns() -> Option<u64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
        return None;
    }
    u64::try_from(now.tv_sec)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(now.tv_nsec).ok()?)
}

/// One message from the collector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    Collector(CollectorStatus),
    Kernels(KernelWindow),
}

/// Whether the collector measures this process, and what it runs on or why it cannot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectorStatus {
    pub active: bool,
    /// The CUPTI version and window when active; the failing call and CUPTI's words when not.
    pub detail: String,
    /// The collector traces one window in this many (1: every window), so totals over the session are of a sample;
    /// each window's figures are that window's.
    #[serde(default = "every_window", skip_serializing_if = "is_every_window")]
    pub kernels_every: u32,
}

impl CollectorStatus {
    /// How many windows each traced one stands for, when the collector samples.
    pub fn sampled_every(&self) -> Option<u32> {
        (self.kernels_every > 1).then_some(self.kernels_every)
    }
}

fn every_window() -> u32 {
    1
}

fn is_every_window(every: &u32) -> bool {
    *every == 1
}

/// The direction of a copy, as CUPTI names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    /// A memset on the device: memory traffic without a source, which HTA counts with the copies.
    Memset,
    Other,
}

/// Where a copy's bytes live: pageable and pinned host memory, or the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    Pageable,
    Pinned,
    Device,
    Other,
}

/// What golow's CUPTI collector reports about a worker's GPU activity, once per window (default 1 s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelWindow {
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    /// Sorted by `total_ns`, largest first.
    pub kernels: Vec<KernelStats>,
    pub copies: Vec<CopyStats>,
    pub breakdown: Breakdown,
    pub dropped_records: u64,
    /// Records CUPTI completed without valid times (start 0, or an end not after the start), skipped.
    #[serde(default)]
    pub invalid_records: u64,
    /// Windows before this one that could not be sent (the socket refused them), lost.
    #[serde(default)]
    pub dropped_windows: u64,
    /// The window's bounds on the host's CLOCK_MONOTONIC, which the monitor stamps its records with, so that a
    /// window can be set against the steps and turns it overlaps. Absent in recordings made before golow sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monotonic_start_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monotonic_end_ns: Option<u64>,
    /// Where the window's kernels and copies lay in time, for setting each on the step that launched it. Absent in
    /// recordings made before golow sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

/// A window's activity in time, compact and bounded: kernels as runs of launches whose intervals overlap or touch
/// (one stretch of back-to-back work on the GPU), copies and memsets one run per record. Beyond the collector's caps
/// the runs closest together are merged, so that what is lost is where inside the smallest gaps a record lay, never
/// a record: a step's boundary is a gap the GPU waited through (a batch being assembled, a loss read), among the
/// largest of its window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// In start order; `amount` is the kernels' busy time in ns (time two streams overlap counts once).
    pub kernels: Vec<Run>,
    /// `amount` is bytes.
    pub copies: Vec<CopyRuns>,
    /// Runs merged into a neighbour to keep the timeline within its caps.
    #[serde(default)]
    pub merged: u64,
}

/// Copies of one direction and source, in start order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyRuns {
    pub kind: CopyKind,
    pub src: MemoryKind,
    pub runs: Vec<Run>,
}

/// Records close together in time, sent as `[start, end, count, amount]`: start and end in ns from the window's
/// start on the collector's clock (so `monotonic_start_ns + start` on the host's), negative for a record CUPTI
/// handed back after the window it started in was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(i64, i64, u64, u64)", into = "(i64, i64, u64, u64)")]
pub struct Run {
    pub start: i64,
    pub end: i64,
    pub count: u64,
    pub amount: u64,
}

impl From<(i64, i64, u64, u64)> for Run {
    fn from((start, end, count, amount): (i64, i64, u64, u64)) -> Run {
        Run {
            start,
            end,
            count,
            amount,
        }
    }
}

impl From<Run> for (i64, i64, u64, u64) {
    fn from(run: Run) -> Self {
        (run.start, run.end, run.count, run.amount)
    }
}

/// Kernels sharing a display name, aggregated over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelStats {
    /// Demangled and shortened for display; `(other kernels)` folds those beyond the collector's cap.
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Grid of the most frequent (grid, block) launch shape.
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Distinct (grid, block) pairs, counted up to 64.
    pub shapes: u32,
    pub registers_per_thread: u16,
    /// Static plus dynamic shared memory of the most frequent shape.
    pub shared_bytes: u32,
    /// Distinct grids with their counts, most frequent first, at most 16.
    pub grid_histogram: Vec<([u32; 3], u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyStats {
    pub kind: CopyKind,
    pub src: MemoryKind,
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
}

/// Fractions of the window, summing to 1 within float error (HTA's definitions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    pub busy: f64,
    pub copy: f64,
    pub idle: f64,
}
