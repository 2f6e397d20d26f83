//! `golow report`'s Markdown: the figures of recorded sessions as the guide publishes them, so that every published
//! figure is this code's output for a file in the repository. Sessions of the same set-up (model, mode, sizes,
//! device and GPU, policy, schedule, workers) make one table, each figure their median with the range between
//! sessions; a session alone gives its own figures and each ratio's 95% interval.

use std::fmt::Write as _;

use super::words::{Describe, describe, number};
use crate::state::kernels::KernelTotals;
use crate::state::{Summary, WorkerSummary};
use golow_protocol::text::printable;

/// One recorded session, as the report reads it.
pub struct Session {
    /// The recording's file name, as the reader gave it.
    pub file: String,
    /// The first GPU the machine had, as NVML named it.
    pub gpu: Option<String>,
    /// What else set the session apart that the summary's description leaves out: steps, pinned copies, the
    /// compile mode.
    pub conditions: Vec<String>,
    pub summary: Summary,
    /// Per worker, the kernels whose names hold what `--kernel` asked for, most launched first.
    pub kernels: Vec<(String, Vec<(String, KernelTotals)>)>,
}

impl Session {
    fn setup(&self) -> String {
        let described = self.summary.config.as_ref().map_or_else(
            || "no session".to_string(),
            |c| describe(c, Describe::Table),
        );
        let mut parts = vec![described];
        parts.extend(self.gpu.clone());
        parts.extend(self.conditions.iter().cloned());
        parts.join(" · ")
    }

    fn workers(&self) -> Vec<&str> {
        self.summary
            .workers
            .iter()
            .map(|w| w.implementation.as_str())
            .collect()
    }
}

/// Sessions of one set-up, in the order given.
fn groups(sessions: &[Session]) -> Vec<Vec<&Session>> {
    let mut groups: Vec<Vec<&Session>> = Vec::new();
    for session in sessions {
        match groups
            .iter_mut()
            .find(|g| g[0].setup() == session.setup() && g[0].workers() == session.workers())
        {
            Some(group) => group.push(session),
            None => groups.push(vec![session]),
        }
    }
    groups
}

/// One column of the figures table: its title and a worker's figure in its session.
struct Column {
    title: &'static str,
    digits: usize,
    figure: fn(&Summary, &WorkerSummary) -> Option<f64>,
}

const MIB: f64 = 1024.0 * 1024.0;

const COLUMNS: &[Column] = &[
    Column {
        title: "samples/s",
        digits: 0,
        figure: |_, w| w.throughput_samples_per_s,
    },
    Column {
        title: "ms/sample p50",
        digits: 3,
        figure: |_, w| w.sample_time_ms.map(|p| p.p50),
    },
    Column {
        title: "p90",
        digits: 3,
        figure: |_, w| w.sample_time_ms.map(|p| p.p90),
    },
    Column {
        title: "TFLOP/s",
        digits: 2,
        figure: |_, w| w.flops.as_ref().and_then(|f| f.achieved_tflops),
    },
    Column {
        title: "% of peak",
        digits: 1,
        figure: |_, w| {
            w.flops
                .as_ref()
                .and_then(|f| f.share_of_peak)
                .map(|s| s * 100.0)
        },
    },
    Column {
        title: "peak GPU MiB",
        digits: 0,
        figure: |_, w| w.peak_gpu_mem_bytes.map(|b| b as f64 / MIB),
    },
    Column {
        title: "GPU idle in steps %",
        digits: 1,
        figure: |_, w| w.gpu_breakdown.map(|b| b.idle * 100.0),
    },
    Column {
        title: "H2D ms p50",
        digits: 2,
        figure: |_, w| w.h2d_ms.map(|p| p.p50),
    },
    Column {
        title: "H2D MB/step",
        digits: 2,
        figure: |_, w| w.h2d_bytes_per_step.map(|b| b as f64 / 1e6),
    },
    Column {
        title: "CUPTI H2D MB/step",
        digits: 2,
        figure: |_, w| w.cupti_h2d_bytes_per_step.map(|b| b / 1e6),
    },
    Column {
        title: "launches/step",
        digits: 0,
        figure: |_, w| w.kernel_launches_per_step,
    },
    Column {
        title: "GPU busy ms/step",
        digits: 2,
        figure: |_, w| w.gpu_busy_ms_per_step,
    },
    Column {
        title: "compile s",
        digits: 1,
        figure: |_, w| w.compile_ms.map(|ms| ms / 1e3),
    },
    Column {
        title: "pays back after (steps)",
        digits: 0,
        figure: |_, w| w.break_even_steps.map(|s| s as f64),
    },
];

/// The Markdown tables of `sessions`: one per set-up, a row per worker.
pub fn figures(sessions: &[Session]) -> String {
    let mut out = String::new();
    for (i, group) in groups(sessions).into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        figures_of(&group, &mut out);
    }
    out
}

fn caption(group: &[&Session]) -> String {
    let files: Vec<&str> = group.iter().map(|s| s.file.as_str()).collect();
    let sessions = match group.len() {
        1 => "one session".to_string(),
        n => format!("{n} sessions, each figure their median (lowest–highest)"),
    };
    printable(&format!(
        "{} — {sessions}: {}",
        group[0].setup(),
        files.join(", ")
    ))
    .into_owned()
}

fn figures_of(group: &[&Session], out: &mut String) {
    let _ = writeln!(out, "{}\n", caption(group));
    let first = group[0].workers().first().map_or("", |w| w).to_string();
    let shown: Vec<&Column> = COLUMNS
        .iter()
        .filter(|c| {
            group.iter().any(|s| {
                s.summary
                    .workers
                    .iter()
                    .any(|w| (c.figure)(&s.summary, w).is_some())
            })
        })
        .collect();
    let mut titles = vec!["level".to_string()];
    titles.extend(shown.iter().take(1).map(|c| c.title.to_string()));
    titles.push(format!("× {}", printable(&first)));
    titles.extend(shown.iter().skip(1).map(|c| c.title.to_string()));
    let _ = writeln!(out, "| {} |", titles.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(titles.len()));
    for worker in group[0].workers() {
        let rows: Vec<(&Summary, &WorkerSummary)> = group
            .iter()
            .filter_map(|s| {
                let w = s
                    .summary
                    .workers
                    .iter()
                    .find(|w| w.implementation == worker)?;
                Some((&s.summary, w))
            })
            .collect();
        let cell = |c: &Column| {
            spread(
                &rows
                    .iter()
                    .filter_map(|(s, w)| (c.figure)(s, w))
                    .collect::<Vec<_>>(),
                c.digits,
            )
        };
        let mut cells = vec![printable(worker).into_owned()];
        cells.extend(shown.iter().take(1).map(|c| cell(c)));
        cells.push(ratio(group, &first, worker));
        cells.extend(shown.iter().skip(1).map(|c| cell(c)));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

/// One figure over the group's sessions: itself alone, else the median with the lowest and highest.
fn spread(values: &[f64], digits: usize) -> String {
    let mut values: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    values.sort_by(f64::total_cmp);
    match values.as_slice() {
        [] => "–".to_string(),
        [one] => number(*one, digits),
        many => format!(
            "{} ({}–{})",
            number(median(many), digits),
            number(many[0], digits),
            number(many[many.len() - 1], digits)
        ),
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// A worker's throughput over the first worker's: the time per sample of the first over its own, as the session's
/// verdict judges them; with one session its 95% interval, with several the range between sessions.
fn ratio(group: &[&Session], first: &str, worker: &str) -> String {
    if worker == first {
        return "1".to_string();
    }
    let judged: Vec<_> = group
        .iter()
        .filter_map(|s| {
            s.summary
                .comparisons
                .iter()
                .find(|c| c.a == first && c.b == worker)
        })
        .collect();
    match judged.as_slice() {
        [one] => match (one.ratio, one.low, one.high) {
            (Some(r), Some(low), Some(high)) => {
                format!("{} [{}, {}]", number(r, 3), number(low, 3), number(high, 3))
            }
            _ => "–".to_string(),
        },
        many => spread(&many.iter().filter_map(|c| c.ratio).collect::<Vec<_>>(), 3),
    }
}

/// The kernels each worker launched whose names hold `pattern`: how often, their grids and block, their mean time.
pub fn kernels(sessions: &[Session], pattern: &str) -> String {
    let mut out = String::new();
    for (i, session) in sessions.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "{} — kernels named `{}`: {}\n",
            printable(&session.setup()),
            printable(pattern),
            printable(&session.file)
        );
        let _ = writeln!(
            out,
            "| level | kernel | launches in the session | mean µs | grids (launches) | block |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        for (worker, kernels) in &session.kernels {
            if kernels.is_empty() {
                let _ = writeln!(out, "| {} | none | – | – | – | – |", printable(worker));
            }
            for (name, k) in kernels {
                let grids: Vec<String> = k
                    .grids
                    .iter()
                    .take(3)
                    .map(|(g, n)| format!("({},{},{}) ×{n}", g[0], g[1], g[2]))
                    .collect();
                let mean_us = k.total_ns as f64 / k.count.max(1) as f64 / 1e3;
                let _ = writeln!(
                    out,
                    "| {} | `{}` | {} | {} | {} | ({},{},{}) |",
                    printable(worker),
                    printable(name).replace('|', "\\|"),
                    k.count,
                    number(mean_us, 1),
                    grids.join(", "),
                    k.block[0],
                    k.block[1],
                    k.block[2]
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_figure_is_itself_and_several_their_median_and_range() {
        assert_eq!(spread(&[], 1), "–");
        assert_eq!(spread(&[2.0], 1), "2.0");
        assert_eq!(spread(&[3.0, 1.0, 2.0], 1), "2.0 (1.0–3.0)");
        assert_eq!(spread(&[4.0, 1.0, f64::NAN, 2.0, 3.0], 1), "2.5 (1.0–4.0)");
    }
}
