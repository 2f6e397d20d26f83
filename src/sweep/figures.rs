//! The seed paper's figures from a sweep's rows: each metric against batch size at every resolution, and against
//! resolution at every batch size, one line per implementation (cells that failed or ran out of memory leave a gap).
//! An axis with a single value gives no figure.

use std::path::Path;

use super::plot::{Figure, Series, write};
use super::{Results, Row, RowStatus};

/// Okabe–Ito colours: distinguishable with any colour vision; the built-ins keep theirs across figures.
const PALETTE: [(&str, (u8, u8, u8)); 4] = [
    ("pytorch", (230, 159, 0)),
    ("torchscript", (86, 180, 233)),
    ("libtorch", (0, 158, 115)),
    ("cudnn", (213, 94, 0)),
];
const OTHER_COLOURS: [(u8, u8, u8); 3] = [(0, 114, 178), (204, 121, 167), (0, 0, 0)];

struct Metric {
    file: &'static str,
    title: &'static str,
    unit: &'static str,
    value: fn(&Row) -> Option<f64>,
}

const MIB: f64 = 1024.0 * 1024.0;

const METRICS: [Metric; 5] = [
    Metric {
        file: "sample_time",
        title: "Median time per sample",
        unit: "ms",
        value: |r| r.sample_time_p50_ms,
    },
    Metric {
        file: "throughput",
        title: "Throughput",
        unit: "samples/s",
        value: |r| r.throughput_samples_per_s,
    },
    Metric {
        file: "host_memory",
        title: "Peak host RSS",
        unit: "MiB",
        value: |r| r.peak_host_rss_bytes.map(|b| b as f64 / MIB),
    },
    Metric {
        file: "gpu_memory",
        title: "Peak GPU memory",
        unit: "MiB",
        value: |r| r.peak_gpu_mem_bytes.map(|b| b as f64 / MIB),
    },
    Metric {
        file: "gpu_utilisation",
        title: "Mean GPU utilisation per process",
        unit: "%",
        value: |r| r.gpu_util_mean_percent,
    },
];

fn colour(implementation: &str, index: usize) -> (u8, u8, u8) {
    PALETTE
        .iter()
        .find(|(name, _)| *name == implementation)
        .map_or(OTHER_COLOURS[index % OTHER_COLOURS.len()], |&(_, c)| c)
}

/// One figure: the rows `keep` selects, `x` of each row against the metric, per implementation.
fn figure(
    results: &Results,
    metric: &Metric,
    title: String,
    x_label: &str,
    keep: impl Fn(&Row) -> bool,
    x: impl Fn(&Row) -> u32,
) -> Option<Figure> {
    let series: Vec<Series> = results
        .config
        .impls
        .iter()
        .enumerate()
        .map(|(i, implementation)| Series {
            label: implementation.clone(),
            color: colour(implementation, i),
            points: results
                .rows
                .iter()
                .filter(|r| r.implementation == *implementation && r.status == RowStatus::Ok)
                .filter(|r| keep(r))
                .filter_map(|r| Some((f64::from(x(r)), (metric.value)(r)?)))
                .collect(),
        })
        .collect();
    series.iter().any(|s| !s.points.is_empty()).then(|| Figure {
        title,
        x_label: x_label.into(),
        y_label: format!("{} ({})", metric.title, metric.unit),
        series,
    })
}

/// Every figure the rows allow, as `<metric>-vs-batch-at-<R>px` and `<metric>-vs-resolution-at-batch-<B>`.
pub fn write_all(dir: &Path, results: &Results) -> Result<(), String> {
    let c = &results.config;
    let what = format!(
        "{:?} {}, {}",
        c.model,
        match c.mode {
            crate::config::Mode::Train => "train",
            crate::config::Mode::Eval => "eval",
        },
        c.device
    )
    .to_lowercase();
    for metric in &METRICS {
        if c.batch_sizes.len() > 1 {
            for &resolution in &c.resolutions {
                let title = format!("{} vs batch size · {what}, {resolution} px", metric.title);
                if let Some(f) = figure(
                    results,
                    metric,
                    title,
                    "batch size",
                    |r| r.resolution == resolution,
                    |r| r.batch_size,
                ) {
                    write(
                        &f,
                        &dir.join(format!("{}-vs-batch-at-{resolution}px", metric.file)),
                    )?;
                }
            }
        }
        if c.resolutions.len() > 1 {
            for &batch in &c.batch_sizes {
                let title = format!("{} vs resolution · {what}, batch {batch}", metric.title);
                if let Some(f) = figure(
                    results,
                    metric,
                    title,
                    "resolution (px)",
                    |r| r.batch_size == batch,
                    |r| r.resolution,
                ) {
                    write(
                        &f,
                        &dir.join(format!("{}-vs-resolution-at-batch-{batch}", metric.file)),
                    )?;
                }
            }
        }
    }
    Ok(())
}
