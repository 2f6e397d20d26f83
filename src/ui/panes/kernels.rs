//! CUDA kernels: where each worker's GPU time goes (busy, copy, idle) and its top kernels by total
//! time with grid and block sizes, from the CUPTI collector's records. Maximised, it also shows how
//! the launches of one kernel (↑/↓ to choose) spread over grid sizes. Without records the pane says
//! why rather than guess.

use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{Pane, choose, name};
use crate::state::WorkerState;
use crate::store::Changes;
use crate::ui::fit;
use crate::ui::view::{View, shape};
use golow_protocol::collector::CollectorStatus;

#[derive(Default)]
pub struct Kernels {
    /// Index into [`kernel_names`], clamped when drawn.
    selected: usize,
}

const BAR_WIDTH: usize = 20;
/// A bar narrower than this says too little to be worth the numbers it would push out.
const MIN_BAR_WIDTH: usize = 6;
/// The columns after a kernel's name, in the order they are given up from the right: its total time is kept longest.
const COLUMNS: [(&str, usize); 5] = [
    ("total ms", 9),
    ("count", 7),
    ("mean µs", 8),
    ("grid", 14),
    ("block", 11),
];
/// A kernel's name is given at least this much room before a column is.
const MIN_NAME_WIDTH: usize = 16;
const GRID_ROWS: usize = 6;

/// One line in `room` columns: the worker, its busy/copy/idle shares as a stacked bar and as numbers; where they do
/// not all fit, a shorter bar and then fewer numbers, busy's kept longest.
fn breakdown_line<'a>(view: &View, worker: &WorkerState, room: usize) -> Line<'a> {
    let mut spans = vec![name(view, &worker.name, 12)];
    let Some(b) = worker.gpu_activity.breakdown() else {
        return Line::from(spans);
    };
    let shares = [("busy", b.busy), ("copy", b.copy), ("idle", b.idle)]
        .map(|(what, share)| format!("  {what} {:.1}%", share * 100.0));
    let (bar_width, numbers) = (0..=shares.len())
        .rev()
        .map(|n| {
            let numbers = shares[..n].concat();
            let left = room.saturating_sub(12 + numbers.chars().count());
            (left.min(BAR_WIDTH), numbers)
        })
        .find(|(bar, numbers)| *bar >= MIN_BAR_WIDTH || numbers.is_empty())
        .unwrap_or_default();
    let width = bar_width as f64;
    let busy = ((b.busy * width).round() as usize).min(bar_width);
    let copy = ((b.copy * width).round() as usize).min(bar_width - busy);
    let idle = bar_width - busy - copy;
    let color = Style::default().fg(view.color(&worker.name));
    spans.push(Span::styled("█".repeat(busy), color));
    spans.push(Span::styled("▒".repeat(copy), color));
    spans.push(Span::styled("░".repeat(idle), view.muted()));
    spans.push(Span::styled(numbers, view.text()));
    let activity = &worker.gpu_activity;
    let losses = [
        (activity.dropped_records, "records dropped"),
        (activity.invalid_records, "records without times"),
        (activity.dropped_windows, "windows lost"),
    ];
    for (count, what) in losses.into_iter().filter(|&(count, _)| count > 0) {
        spans.push(Span::styled(
            format!("  {count} {what}"),
            Style::default().fg(view.theme.warning),
        ));
    }
    if let Some(every) = activity
        .collector
        .as_ref()
        .and_then(CollectorStatus::sampled_every)
    {
        spans.push(Span::styled(
            format!("  one window in {every} traced"),
            view.muted(),
        ));
    }
    Line::from(spans)
}

/// Why there is nothing to show: what each worker's collector said, or that none has spoken.
fn no_records_text(view: &View) -> String {
    let said: Vec<String> = view
        .state
        .workers
        .iter()
        .filter_map(|w| {
            let status = w.gpu_activity.collector.as_ref()?;
            Some(if status.active {
                format!(
                    "{}: collecting ({}), first window pending",
                    w.name, status.detail
                )
            } else {
                format!("{}: CUPTI collector off: {}", w.name, status.detail)
            })
        })
        .collect();
    if said.is_empty() {
        "No kernel records: golow's CUPTI collector reports once a worker initialises CUDA (none has; \
         `golow run --no-cupti` turns it off)."
            .to_string()
    } else {
        said.join("\n")
    }
}

/// Every kernel any worker ran, by total time over all workers.
fn kernel_names(workers: &[&WorkerState]) -> Vec<String> {
    let mut totals: std::collections::BTreeMap<&str, u64> = Default::default();
    for w in workers {
        for (name, t) in &w.gpu_activity.kernels {
            *totals.entry(name).or_default() += t.total_ns;
        }
    }
    let mut names: Vec<(&str, u64)> = totals.into_iter().collect();
    names.sort_by_key(|&(_, total)| std::cmp::Reverse(total));
    names.into_iter().map(|(n, _)| n.to_string()).collect()
}

/// The chosen kernel's launches per grid, per worker, as bars on a shared scale.
fn grid_lines<'a>(
    view: &View,
    workers: &[&WorkerState],
    kernel: &str,
    of: (usize, usize),
    room: usize,
) -> Vec<Line<'a>> {
    let choose = format!("  ({} of {}, ↑/↓ to choose)", of.0 + 1, of.1);
    let shown = fit::name(
        kernel,
        room.saturating_sub("grid sizes of ".len() + choose.chars().count()),
    );
    let mut lines = vec![Line::styled(
        format!("grid sizes of {shown}{choose}"),
        view.text(),
    )];
    let most = workers
        .iter()
        .filter_map(|w| w.gpu_activity.kernels.get(kernel))
        .flat_map(|t| t.grids.iter().map(|g| g.1))
        .max()
        .unwrap_or(1)
        .max(1);
    for w in workers {
        let Some(t) = w.gpu_activity.kernels.get(kernel) else {
            continue;
        };
        for (i, &(grid, count)) in t.grids.iter().take(GRID_ROWS).enumerate() {
            let label = if i == 0 { w.name.as_str() } else { "" };
            let bar = ((count as f64 / most as f64) * BAR_WIDTH as f64).ceil() as usize;
            lines.push(Line::from(vec![
                name(view, label, 12),
                Span::styled(format!(" {:>16} ", shape(grid)), view.text()),
                Span::styled(
                    "█".repeat(bar.max(1)),
                    Style::default().fg(view.color(&w.name)),
                ),
                Span::styled(format!(" {count}"), view.muted()),
            ]));
        }
    }
    lines
}

impl Pane for Kernels {
    fn title(&self) -> &'static str {
        " CUDA kernels: GPU time (busy █ copy ▒ idle ░) "
    }

    fn needs_gpu(&self) -> bool {
        true
    }

    fn on_key(&mut self, key: KeyCode) -> bool {
        choose(&mut self.selected, key)
    }

    fn shows(&self) -> Changes {
        Changes::STEPS | Changes::GPU
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let workers: Vec<&WorkerState> = view
            .state
            .workers
            .iter()
            .filter(|w| w.gpu_activity.windows > 0)
            .collect();
        if workers.is_empty() {
            fit::wrapped(frame, inner, no_records_text(view), view.muted());
            return;
        }
        let room = fit::room(inner.width);
        let grids = if view.focused {
            let names = kernel_names(&workers);
            self.selected = self.selected.min(names.len().saturating_sub(1));
            names
                .get(self.selected)
                .map(|k| grid_lines(view, &workers, k, (self.selected, names.len()), room))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut lines: Vec<Line> = workers
            .iter()
            .map(|w| breakdown_line(view, w, room))
            .collect();
        let rows = usize::from(inner.height).saturating_sub(lines.len() + 1 + grids.len());
        lines.extend(top_kernels(view, &workers, rows, room));
        lines.extend(grids);
        fit::lines(frame, inner, &lines);
    }
}

/// How many of `rows` each worker's top kernels get: an equal share, the first workers one more each while rows
/// are left, so that a pane of a few lines still names the kernels that take the most time.
fn rows_per_worker(rows: usize, workers: usize) -> impl Iterator<Item = usize> {
    let (each, more) = (rows / workers.max(1), rows % workers.max(1));
    (0..workers).map(move |i| each + usize::from(i < more))
}

/// Each worker's top kernels in `rows` lines under a header, in `room` columns: the name takes what the columns that
/// fit leave; without a row to show, a line that says why instead of a header over nothing.
fn top_kernels<'a>(
    view: &View,
    workers: &[&WorkerState],
    rows: usize,
    room: usize,
) -> Vec<Line<'a>> {
    if workers.iter().all(|w| w.gpu_activity.kernels.is_empty()) {
        return vec![Line::styled(
            "no kernels recorded: only copies and idle time",
            view.muted(),
        )];
    }
    if rows == 0 {
        return vec![Line::styled("6 shows the top kernels", view.muted())];
    }
    let widths: Vec<usize> = COLUMNS.iter().map(|&(_, w)| w).collect();
    let longest = workers
        .iter()
        .flat_map(|w| w.gpu_activity.kernels.keys())
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(0);
    let names = (MIN_NAME_WIDTH, longest.max("kernel".len()));
    let (name_width, shown) = fit::named_columns(room, 12 + 1, &widths, names);
    let cells_width: usize = widths[..shown].iter().map(|w| w + 1).sum();
    let headers: Vec<&str> = COLUMNS.iter().map(|&(h, _)| h).collect();
    let mut lines = vec![Line::styled(
        format!(
            "{:<12} {:<name_width$}{}",
            "",
            "kernel",
            fit::cells(&widths, &headers, cells_width)
        ),
        view.muted(),
    )];
    for (w, rows) in workers.iter().zip(rows_per_worker(rows, workers.len())) {
        for (kernel, t) in w.gpu_activity.top().into_iter().take(rows) {
            let mean_us = t.total_ns as f64 / t.count.max(1) as f64 / 1e3;
            let cells = [
                format!("{:.2}", t.total_ns as f64 / 1e6),
                t.count.to_string(),
                format!("{mean_us:.1}"),
                shape(t.grid),
                shape(t.block),
            ];
            lines.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(
                    format!(
                        " {:<name_width$}{}",
                        fit::name(kernel, name_width),
                        fit::cells(&widths, &cells, cells_width)
                    ),
                    view.text(),
                ),
            ]));
        }
    }
    lines
}
