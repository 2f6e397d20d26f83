//! The seed paper's figures from a sweep's rows: each metric against batch size at every resolution, and against
//! resolution at every batch size, one line per implementation (cells that failed or ran out of memory leave a gap).
//! An axis with a single value gives no figure. A sweep that ran each cell several times (`--repeat`) draws each
//! point at the sessions' median, with a bar from their least to their greatest.

use std::path::Path;

use super::plot::{Figure, Series, write};
use super::{Axis, METRICS, Metric, Results};

/// Okabe–Ito colours: distinguishable with any colour vision; the built-ins keep theirs across figures.
const PALETTE: [(&str, (u8, u8, u8)); 6] = [
    ("pytorch", (230, 159, 0)),
    ("compile", (204, 121, 167)),
    ("torchscript", (86, 180, 233)),
    ("aoti", (0, 114, 178)),
    ("libtorch", (0, 158, 115)),
    ("cudnn", (213, 94, 0)),
];
const OTHER_COLOURS: [(u8, u8, u8); 3] = [(240, 228, 66), (0, 0, 0), (153, 153, 153)];

fn colour(implementation: &str, index: usize) -> (u8, u8, u8) {
    PALETTE
        .iter()
        .find(|(name, _)| *name == implementation)
        .map_or(OTHER_COLOURS[index % OTHER_COLOURS.len()], |&(_, c)| c)
}

/// One figure: each implementation's curve along `axis` with the other axis at `held`.
fn figure(
    results: &Results,
    metric: &Metric,
    title: String,
    axis: Axis,
    held: u32,
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
                .curve(implementation, axis, held, metric)
                .into_iter()
                .map(|(x, y)| (f64::from(x), y))
                .collect(),
            ranges: results
                .ranges(implementation, axis, held, metric)
                .into_iter()
                .map(|(x, lo, hi)| (f64::from(x), lo, hi))
                .collect(),
        })
        .collect();
    let x_label = match axis {
        Axis::BatchSize => "batch size",
        Axis::Resolution => "resolution (px)",
    };
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
    let what = format!("{} {}, {}", c.model.name(), c.mode.name(), c.device);
    for metric in &METRICS {
        if c.batch_sizes.len() > 1 {
            for &resolution in &c.resolutions {
                let title = format!("{} vs batch size · {what}, {resolution} px", metric.title);
                if let Some(f) = figure(results, metric, title, Axis::BatchSize, resolution) {
                    let stem = format!("{}-vs-batch-at-{resolution}px", metric.file);
                    write(&f, &dir.join(stem))?;
                }
            }
        }
        if c.resolutions.len() > 1 {
            for &batch in &c.batch_sizes {
                let title = format!("{} vs resolution · {what}, batch {batch}", metric.title);
                if let Some(f) = figure(results, metric, title, Axis::Resolution, batch) {
                    let stem = format!("{}-vs-resolution-at-batch-{batch}", metric.file);
                    write(&f, &dir.join(stem))?;
                }
            }
        }
    }
    Ok(())
}
