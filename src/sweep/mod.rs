//! Sweeps: the same session over a grid of batch sizes and resolutions, one cell at a time, each cell a recording,
//! their summaries gathered into one results table (`results.json`, `results.csv`) and the seed paper's scaling
//! figures. With `--repeat N` each cell runs N sessions, and its rows hold their median with the min–max range. A sweep
//! stopped half-way resumes from its results file.

pub mod figures;
pub mod plot;
pub mod run;
pub mod tracker;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::state::{Summary, WorkerStatus};
use golow_protocol::config::{Mode, Model};

pub const RESULTS_VERSION: u32 = 1;
pub const RESULTS_JSON: &str = "results.json";
pub const RESULTS_CSV: &str = "results.csv";

/// One point of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cell {
    pub batch_size: u32,
    pub resolution: u32,
}

impl Cell {
    /// The recording of the cell's session `k` (from 1) of `repeats`, relative to the sweep directory.
    pub fn recording(&self, k: u32, repeats: u32) -> PathBuf {
        let repeat = if repeats > 1 {
            format!("-{k}")
        } else {
            String::new()
        };
        PathBuf::from("cells").join(format!(
            "b{}-r{}{repeat}.golow",
            self.batch_size, self.resolution
        ))
    }

    /// Work relative to other cells, for the ETA: samples times pixels.
    pub fn work(&self) -> f64 {
        f64::from(self.batch_size) * f64::from(self.resolution).powi(2)
    }
}

/// Every cell, resolution by resolution, batch sizes ascending within each.
pub fn cells(batch_sizes: &[u32], resolutions: &[u32]) -> Vec<Cell> {
    resolutions
        .iter()
        .flat_map(|&resolution| {
            batch_sizes.iter().map(move |&batch_size| Cell {
                batch_size,
                resolution,
            })
        })
        .collect()
}

/// The grid axis a curve runs along; the other is held at one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    BatchSize,
    Resolution,
}

impl Axis {
    /// The row's value along this axis, and along the other.
    fn of(self, row: &Row) -> (u32, u32) {
        match self {
            Axis::BatchSize => (row.batch_size, row.resolution),
            Axis::Resolution => (row.resolution, row.batch_size),
        }
    }
}

/// A measure of a row, as the figures and the sweep view show it.
pub struct Metric {
    /// The figure's file name stem.
    pub file: &'static str,
    /// The figure's title and y axis.
    pub title: &'static str,
    pub unit: &'static str,
    /// The sweep view's pane title.
    pub pane: &'static str,
    /// Decimals of the sweep view's axis label.
    pub decimals: usize,
    pub value: fn(&Row) -> Option<f64>,
    /// The least and the greatest of the cell's sessions' values, where it ran several (`--repeat`).
    pub range: fn(&Row) -> Option<(f64, f64)>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// The figures draw every one; the sweep view the first four.
pub const METRICS: [Metric; 6] = [
    Metric {
        file: "sample_time",
        title: "Median time per sample",
        unit: "ms",
        pane: "ms per sample (median)",
        decimals: 2,
        value: |r| r.sample_time_p50_ms,
        range: |r| r.sample_time_p50_min_ms.zip(r.sample_time_p50_max_ms),
    },
    Metric {
        file: "throughput",
        title: "Throughput",
        unit: "samples/s",
        pane: "samples/s",
        decimals: 0,
        value: |r| r.throughput_samples_per_s,
        range: |r| r.throughput_min.zip(r.throughput_max),
    },
    Metric {
        file: "host_memory",
        title: "Peak host RSS",
        unit: "MiB",
        pane: "peak host RSS (MiB)",
        decimals: 0,
        value: |r| r.peak_host_rss_bytes.map(|b| b as f64 / MIB),
        range: |_| None,
    },
    Metric {
        file: "gpu_memory",
        title: "Peak GPU memory",
        unit: "MiB",
        pane: "peak GPU memory (MiB)",
        decimals: 0,
        value: |r| r.peak_gpu_mem_bytes.map(|b| b as f64 / MIB),
        range: |_| None,
    },
    Metric {
        file: "gpu_utilisation",
        title: "Mean GPU utilisation per process",
        unit: "%",
        pane: "GPU utilisation (%)",
        decimals: 0,
        value: |r| r.gpu_util_mean_percent,
        range: |_| None,
    },
    Metric {
        file: "top_operator_share",
        title: "Top operator's share of a profiled step",
        unit: "%",
        pane: "top operator (% of step)",
        decimals: 0,
        value: |r| r.top_operator_share.map(|s| s * 100.0),
        range: |_| None,
    },
];

/// What a sweep measures; a resumed sweep must measure the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepConfig {
    pub impls: Vec<String>,
    pub model: Model,
    pub dataset: String,
    pub mode: Mode,
    pub steps: u64,
    pub warmup: u64,
    pub device: String,
    pub pinned: bool,
    pub seed: u64,
    pub batch_sizes: Vec<u32>,
    pub resolutions: Vec<u32>,
    /// Sessions per cell (`--repeat`); 1 in sweeps written before it.
    #[serde(default = "one")]
    pub repeat: u32,
}

fn one() -> u32 {
    1
}

impl SweepConfig {
    /// Differences that make earlier rows incomparable with new ones; the axes may change between runs.
    pub fn incompatible_with(&self, other: &SweepConfig) -> Option<String> {
        let strip = |c: &SweepConfig| SweepConfig {
            batch_sizes: Vec::new(),
            resolutions: Vec::new(),
            ..c.clone()
        };
        (strip(self) != strip(other)).then(|| {
            let describe = |c: &SweepConfig| {
                format!(
                    "{} {} {} on {}, {} steps ({} warm-up), {}{}, seed {}, {} session{} a cell",
                    c.impls.join(","),
                    c.model.name(),
                    c.dataset,
                    c.device,
                    c.steps,
                    c.warmup,
                    c.mode.name(),
                    if c.pinned { ", pinned" } else { "" },
                    c.seed,
                    c.repeat,
                    if c.repeat == 1 { "" } else { "s" }
                )
            };
            format!(
                "it ran {}, this asks for {}",
                describe(other),
                describe(self)
            )
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    Ok,
    /// The worker ran out of host or device memory.
    Oom,
    Failed,
}

/// One implementation in one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    #[serde(rename = "impl")]
    pub implementation: String,
    pub batch_size: u32,
    pub resolution: u32,
    pub status: RowStatus,
    /// Sessions the row's figures come from (`--repeat`): their median, and for time per sample and throughput the
    /// least and greatest (absent from a single session).
    #[serde(default = "one")]
    pub repeats: u32,
    pub sample_time_p50_ms: Option<f64>,
    #[serde(default)]
    pub sample_time_p50_min_ms: Option<f64>,
    #[serde(default)]
    pub sample_time_p50_max_ms: Option<f64>,
    pub sample_time_p90_ms: Option<f64>,
    pub throughput_samples_per_s: Option<f64>,
    #[serde(default)]
    pub throughput_min: Option<f64>,
    #[serde(default)]
    pub throughput_max: Option<f64>,
    pub peak_host_rss_bytes: Option<u64>,
    pub peak_gpu_mem_bytes: Option<u64>,
    pub gpu_util_mean_percent: Option<f64>,
    pub h2d_bytes_per_step: Option<u64>,
    pub h2d_ms_p50: Option<f64>,
    /// What compiling cost a compiled level (`compile`, `aoti`) in this cell; absent for the others and in sweeps
    /// written before it was kept.
    #[serde(default)]
    pub compile_ms: Option<f64>,
    /// The operator with the most self time per profiled step, and that time's share of the step's compute; absent
    /// without operators (`--no-ops`, a level that recorded none, older sweeps).
    #[serde(default)]
    pub top_operator: Option<String>,
    #[serde(default)]
    pub top_operator_share: Option<f64>,
    /// The cell's recording, relative to the sweep directory (its first session's, with `--repeat`); absent when
    /// the cell could not start.
    pub recording: Option<String>,
    /// With `--repeat`, every session's recording, the first included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recordings: Vec<String>,
    pub error: Option<String>,
}

/// The CSV's columns, in order; `Row::csv_fields` follows them.
pub const CSV_COLUMNS: [&str; 23] = [
    "impl",
    "batch_size",
    "resolution",
    "status",
    "repeats",
    "sample_time_p50_ms",
    "sample_time_p50_min_ms",
    "sample_time_p50_max_ms",
    "sample_time_p90_ms",
    "throughput_samples_per_s",
    "throughput_min",
    "throughput_max",
    "peak_host_rss_bytes",
    "peak_gpu_mem_bytes",
    "gpu_util_mean_percent",
    "h2d_bytes_per_step",
    "h2d_ms_p50",
    "compile_ms",
    "top_operator",
    "top_operator_share",
    "recording",
    "recordings",
    "error",
];

/// The median of the values present; `None` without one.
fn median(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values.flatten().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The least and greatest of the values present, where there are two or more: a spread.
fn range(values: impl Iterator<Item = Option<f64>>) -> (Option<f64>, Option<f64>) {
    let v: Vec<f64> = values.flatten().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return (None, None);
    }
    (
        v.iter().copied().reduce(f64::min),
        v.iter().copied().reduce(f64::max),
    )
}

impl Row {
    pub fn cell(&self) -> Cell {
        Cell {
            batch_size: self.batch_size,
            resolution: self.resolution,
        }
    }

    fn csv_fields(&self) -> [String; 23] {
        let f = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let u = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        let status = match self.status {
            RowStatus::Ok => "ok",
            RowStatus::Oom => "oom",
            RowStatus::Failed => "failed",
        };
        [
            self.implementation.clone(),
            self.batch_size.to_string(),
            self.resolution.to_string(),
            status.into(),
            self.repeats.to_string(),
            f(self.sample_time_p50_ms),
            f(self.sample_time_p50_min_ms),
            f(self.sample_time_p50_max_ms),
            f(self.sample_time_p90_ms),
            f(self.throughput_samples_per_s),
            f(self.throughput_min),
            f(self.throughput_max),
            u(self.peak_host_rss_bytes),
            u(self.peak_gpu_mem_bytes),
            f(self.gpu_util_mean_percent),
            u(self.h2d_bytes_per_step),
            f(self.h2d_ms_p50),
            f(self.compile_ms),
            self.top_operator.clone().unwrap_or_default(),
            f(self.top_operator_share),
            self.recording.clone().unwrap_or_default(),
            self.recordings.join(" "),
            self.error.clone().unwrap_or_default(),
        ]
    }

    /// The rows of a cell that could not run at all (its preparation failed).
    pub fn unstarted(cell: Cell, impls: &[String], error: &str) -> Vec<Row> {
        impls
            .iter()
            .map(|implementation| Row {
                implementation: implementation.clone(),
                batch_size: cell.batch_size,
                resolution: cell.resolution,
                status: status_of_error(error),
                repeats: 1,
                sample_time_p50_ms: None,
                sample_time_p50_min_ms: None,
                sample_time_p50_max_ms: None,
                sample_time_p90_ms: None,
                throughput_samples_per_s: None,
                throughput_min: None,
                throughput_max: None,
                peak_host_rss_bytes: None,
                peak_gpu_mem_bytes: None,
                gpu_util_mean_percent: None,
                h2d_bytes_per_step: None,
                h2d_ms_p50: None,
                compile_ms: None,
                top_operator: None,
                top_operator_share: None,
                recording: None,
                recordings: Vec::new(),
                error: Some(error.to_string()),
            })
            .collect()
    }

    /// A cell's rows from its session's summary.
    pub fn from_summary(cell: Cell, summary: &Summary, recording: &Path) -> Vec<Row> {
        summary
            .workers
            .iter()
            .map(|w| {
                let status = match w.status {
                    WorkerStatus::Ok => RowStatus::Ok,
                    _ => status_of_error(w.error.as_deref().unwrap_or_default()),
                };
                let top = w.top_operators.first();
                let compute = w
                    .operators
                    .as_ref()
                    .and_then(|o| o.compute_ms_per_step)
                    .filter(|&c| c > 0.0);
                Row {
                    implementation: w.implementation.clone(),
                    batch_size: cell.batch_size,
                    resolution: cell.resolution,
                    status,
                    repeats: 1,
                    sample_time_p50_ms: w.sample_time_ms.as_ref().map(|p| p.p50),
                    sample_time_p50_min_ms: None,
                    sample_time_p50_max_ms: None,
                    sample_time_p90_ms: w.sample_time_ms.as_ref().map(|p| p.p90),
                    throughput_samples_per_s: w.throughput_samples_per_s,
                    throughput_min: None,
                    throughput_max: None,
                    peak_host_rss_bytes: Some(w.peak_host_rss_bytes),
                    peak_gpu_mem_bytes: w.peak_gpu_mem_bytes,
                    gpu_util_mean_percent: w.gpu_sm_percent_mean,
                    h2d_bytes_per_step: w.h2d_bytes_per_step,
                    h2d_ms_p50: w.h2d_ms.as_ref().map(|p| p.p50),
                    compile_ms: w.compile_ms,
                    top_operator: top.map(|o| o.name.clone()),
                    top_operator_share: top.zip(compute).map(|(o, c)| o.self_ms_per_step / c),
                    recording: Some(recording.display().to_string()),
                    recordings: Vec::new(),
                    error: w.error.clone(),
                }
            })
            .collect()
    }

    /// One implementation's rows from several sessions of one cell, as one: the median of each figure, the range
    /// of time per sample and throughput, the peaks' highest, the worst status (and its error), every recording.
    pub fn across(sessions: &[Row]) -> Option<Row> {
        let first = sessions.first()?;
        let worst = sessions
            .iter()
            .find(|r| r.status == RowStatus::Failed)
            .or_else(|| sessions.iter().find(|r| r.status == RowStatus::Oom))
            .unwrap_or(first);
        let of = |f: fn(&Row) -> Option<f64>| sessions.iter().map(f);
        let peak = |f: fn(&Row) -> Option<u64>| sessions.iter().filter_map(f).max();
        let (sample_min, sample_max) = range(of(|r| r.sample_time_p50_ms));
        let (rate_min, rate_max) = range(of(|r| r.throughput_samples_per_s));
        let top = sessions.iter().find_map(|r| r.top_operator.clone());
        Some(Row {
            implementation: first.implementation.clone(),
            batch_size: first.batch_size,
            resolution: first.resolution,
            status: worst.status,
            repeats: sessions.len() as u32,
            sample_time_p50_ms: median(of(|r| r.sample_time_p50_ms)),
            sample_time_p50_min_ms: sample_min,
            sample_time_p50_max_ms: sample_max,
            sample_time_p90_ms: median(of(|r| r.sample_time_p90_ms)),
            throughput_samples_per_s: median(of(|r| r.throughput_samples_per_s)),
            throughput_min: rate_min,
            throughput_max: rate_max,
            peak_host_rss_bytes: peak(|r| r.peak_host_rss_bytes),
            peak_gpu_mem_bytes: peak(|r| r.peak_gpu_mem_bytes),
            gpu_util_mean_percent: median(of(|r| r.gpu_util_mean_percent)),
            h2d_bytes_per_step: peak(|r| r.h2d_bytes_per_step),
            h2d_ms_p50: median(of(|r| r.h2d_ms_p50)),
            compile_ms: median(of(|r| r.compile_ms)),
            top_operator_share: median(
                sessions
                    .iter()
                    .map(|r| r.top_operator_share.filter(|_| r.top_operator == top)),
            ),
            top_operator: top,
            recording: first.recording.clone(),
            recordings: sessions
                .iter()
                .filter_map(|r| r.recording.clone())
                .collect(),
            error: worst.error.clone(),
        })
    }
}

/// Out of memory, as PyTorch, LibTorch, the C++ runtime and the kernel say it.
pub fn status_of_error(error: &str) -> RowStatus {
    let e = error.to_ascii_lowercase();
    let oom = [
        "out of memory",
        "can't allocate memory",
        "cannot allocate memory",
        "bad_alloc",
        "memoryerror",
    ];
    if oom.iter().any(|words| e.contains(words)) {
        RowStatus::Oom
    } else {
        RowStatus::Failed
    }
}

/// `results.json`: the config and every finished cell's rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub golow_sweep: u32,
    pub config: SweepConfig,
    pub rows: Vec<Row>,
}

/// Far more than the results of any sweep golow can run (a few hundred bytes a cell).
const MAX_RESULTS_BYTES: u64 = 64 << 20;

impl Results {
    pub fn new(config: SweepConfig) -> Results {
        Results {
            golow_sweep: RESULTS_VERSION,
            config,
            rows: Vec::new(),
        }
    }

    /// Reads a sweep directory's results; one line saying what is wrong otherwise.
    pub fn load(dir: &Path) -> Result<Results, String> {
        let path = dir.join(RESULTS_JSON);
        let bytes = golow_data::open_regular(&path)
            .and_then(|file| golow_data::read_capped(file, MAX_RESULTS_BYTES))
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let results: Results = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a golow sweep's results: {e}", path.display()))?;
        if results.golow_sweep > RESULTS_VERSION {
            return Err(format!(
                "{} was written by a newer golow (results version {}); this one reads {RESULTS_VERSION}",
                path.display(),
                results.golow_sweep
            ));
        }
        Ok(results)
    }

    /// `implementation`'s finished cells along `axis`, the other axis at `held`: (x, the metric's value), in x order
    /// (failed and out-of-memory cells leave gaps).
    pub fn curve(
        &self,
        implementation: &str,
        axis: Axis,
        held: u32,
        metric: &Metric,
    ) -> Vec<(u32, f64)> {
        let mut points: Vec<(u32, f64)> = self
            .rows
            .iter()
            .filter(|r| r.implementation == implementation && r.status == RowStatus::Ok)
            .filter_map(|r| match axis.of(r) {
                (x, other) if other == held => Some((x, (metric.value)(r)?)),
                _ => None,
            })
            .filter(|p| p.1.is_finite())
            .collect();
        points.sort_by_key(|p| p.0);
        points
    }

    /// The ranges of `implementation`'s finished cells along `axis` (as `curve`), where the metric has one:
    /// (x, least, greatest).
    pub fn ranges(
        &self,
        implementation: &str,
        axis: Axis,
        held: u32,
        metric: &Metric,
    ) -> Vec<(u32, f64, f64)> {
        self.rows
            .iter()
            .filter(|r| r.implementation == implementation && r.status == RowStatus::Ok)
            .filter_map(|r| match axis.of(r) {
                (x, other) if other == held => {
                    let (lo, hi) = (metric.range)(r)?;
                    Some((x, lo, hi))
                }
                _ => None,
            })
            .filter(|(_, lo, hi)| lo.is_finite() && hi.is_finite())
            .collect()
    }

    pub fn has(&self, cell: Cell) -> bool {
        self.rows.iter().any(|r| r.cell() == cell)
    }

    /// Replaces whatever rows the cell had.
    pub fn record(&mut self, cell: Cell, rows: Vec<Row>) {
        self.rows.retain(|r| r.cell() != cell);
        self.rows.extend(rows);
        self.rows.sort_by(|a, b| {
            (a.resolution, a.batch_size, &a.implementation).cmp(&(
                b.resolution,
                b.batch_size,
                &b.implementation,
            ))
        });
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialise")
    }

    pub fn to_csv(&self) -> String {
        let mut csv = csv::Writer::from_writer(Vec::new());
        let written = csv
            .write_record(CSV_COLUMNS)
            .and_then(|()| {
                self.rows
                    .iter()
                    .try_for_each(|row| csv.write_record(row.csv_fields()))
            })
            .and_then(|()| csv.into_inner().map_err(|e| e.into_error().into()));
        let bytes = written.expect("CSV into memory cannot fail");
        String::from_utf8(bytes).expect("CSV of UTF-8 fields is UTF-8")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn config() -> SweepConfig {
        SweepConfig {
            impls: vec!["libtorch".into(), "pytorch".into()],
            model: Model::Resnet18,
            dataset: "synthetic".into(),
            mode: Mode::Eval,
            steps: 6,
            warmup: 1,
            device: "cpu".into(),
            pinned: false,
            seed: 0,
            batch_sizes: vec![8, 16],
            resolutions: vec![32],
            repeat: 1,
        }
    }

    #[test]
    fn cells_go_resolution_by_resolution() {
        let got = cells(&[8, 16], &[32, 64]);
        let pairs: Vec<(u32, u32)> = got.iter().map(|c| (c.batch_size, c.resolution)).collect();
        assert_eq!(pairs, [(8, 32), (16, 32), (8, 64), (16, 64)]);
        assert_eq!(got[3].recording(1, 1), PathBuf::from("cells/b16-r64.golow"));
        assert_eq!(
            got[3].recording(2, 3),
            PathBuf::from("cells/b16-r64-2.golow")
        );
    }

    #[test]
    fn out_of_memory_is_told_apart_from_other_failures() {
        for oom in [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "[enforce fail at alloc_cpu.cpp:119] DefaultCPUAllocator: can't allocate memory: you tried to allocate 8589934592 bytes",
            "terminate called after throwing an instance of 'std::bad_alloc'",
        ] {
            assert_eq!(status_of_error(oom), RowStatus::Oom, "{oom}");
        }
        assert_eq!(status_of_error("Segmentation fault"), RowStatus::Failed);
        assert_eq!(status_of_error(""), RowStatus::Failed);
    }

    #[test]
    fn the_axes_may_change_on_resume_but_nothing_else() {
        let mut wider = config();
        wider.batch_sizes.push(32);
        assert_eq!(wider.incompatible_with(&config()), None);
        let mut other = config();
        other.steps = 7;
        let why = other.incompatible_with(&config()).unwrap();
        assert!(why.contains("6 steps") && why.contains("7 steps"), "{why}");
        let repeated = SweepConfig {
            repeat: 3,
            ..config()
        };
        let why = repeated.incompatible_with(&config()).unwrap();
        assert!(
            why.contains("1 session a cell") && why.contains("3 sessions a cell"),
            "{why}"
        );
    }

    #[test]
    fn rows_replace_their_cell_and_write_as_csv_and_json() {
        let mut results = Results::new(config());
        let cell = Cell {
            batch_size: 16,
            resolution: 32,
        };
        let impls = results.config.impls.clone();
        results.record(cell, Row::unstarted(cell, &impls, "first, \"quoted\" try"));
        results.record(cell, Row::unstarted(cell, &impls, "out of memory"));
        assert_eq!(results.rows.len(), 2);
        assert!(results.has(cell));
        assert_eq!(results.rows[0].status, RowStatus::Oom);
        let csv = results.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0].split(',').count(), CSV_COLUMNS.len());
        assert_eq!(
            lines[1],
            "libtorch,16,32,oom,1,,,,,,,,,,,,,,,,,,out of memory"
        );
        results.record(cell, Row::unstarted(cell, &impls, "a, \"b\""));
        assert!(results.to_csv().contains(",\"a, \"\"b\"\"\"\n"));
        let back: Results = serde_json::from_str(&results.to_json()).unwrap();
        assert_eq!(back, results);
    }

    #[test]
    fn a_cell_s_sessions_give_one_row_their_median_with_its_range() {
        let cell = Cell {
            batch_size: 8,
            resolution: 32,
        };
        let session = |k: u32, ms: f64, rss: u64| Row {
            status: RowStatus::Ok,
            sample_time_p50_ms: Some(ms),
            sample_time_p90_ms: Some(ms * 1.1),
            throughput_samples_per_s: Some(1e3 / ms),
            peak_host_rss_bytes: Some(rss),
            recording: Some(cell.recording(k, 3).display().to_string()),
            error: None,
            ..Row::unstarted(cell, &["libtorch".into()], "").remove(0)
        };
        let rows = [
            session(1, 2.0, 100),
            session(2, 3.0, 300),
            session(3, 2.5, 200),
        ];
        let one = Row::across(&rows).unwrap();
        assert_eq!(one.repeats, 3);
        assert_eq!(one.status, RowStatus::Ok);
        assert_eq!(one.sample_time_p50_ms, Some(2.5));
        assert_eq!(
            (one.sample_time_p50_min_ms, one.sample_time_p50_max_ms),
            (Some(2.0), Some(3.0))
        );
        assert_eq!(one.throughput_samples_per_s, Some(400.0));
        assert_eq!(
            (one.throughput_min, one.throughput_max),
            (Some(1e3 / 3.0), Some(500.0))
        );
        assert_eq!(one.peak_host_rss_bytes, Some(300), "the peak of the peaks");
        assert_eq!(one.recording.as_deref(), Some("cells/b8-r32-1.golow"));
        assert_eq!(one.recordings.len(), 3);
        // One failed session fails the cell's row, its error kept.
        let mut failed = rows.to_vec();
        failed[1].status = RowStatus::Failed;
        failed[1].error = Some("Segmentation fault".into());
        let one = Row::across(&failed).unwrap();
        assert_eq!(
            (one.status, one.error.as_deref()),
            (RowStatus::Failed, Some("Segmentation fault"))
        );
        // The CSV carries the spread.
        let mut results = Results::new(config());
        results.record(cell, vec![Row::across(&rows).unwrap()]);
        let csv = results.to_csv();
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
        let cell_of = |name: &str| row[header.iter().position(|c| *c == name).unwrap()];
        assert_eq!(
            (
                cell_of("repeats"),
                cell_of("sample_time_p50_min_ms"),
                cell_of("throughput_max")
            ),
            ("3", "2", "500")
        );
    }
}
