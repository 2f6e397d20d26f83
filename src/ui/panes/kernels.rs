//! CUDA kernels: where each worker's GPU time goes (busy, copy, idle) and its top kernels by total
//! time with grid and block sizes, from the CUPTI collector's records. Maximised, it also shows how
//! the launches of one kernel (↑/↓ to choose) spread over grid sizes. Without records the pane says
//! why rather than guess.

use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{Pane, choose, name};
use crate::state::WorkerState;
use crate::store::Changes;
use crate::ui::render;
use crate::ui::view::{View, shape};

#[derive(Default)]
pub struct Kernels {
    /// Index into [`kernel_names`], clamped when drawn.
    selected: usize,
}

const BAR_WIDTH: usize = 20;
const GRID_ROWS: usize = 6;

/// One line: the worker, its busy/copy/idle shares as numbers and as a stacked bar.
fn breakdown_line<'a>(view: &View, worker: &WorkerState) -> Line<'a> {
    let mut spans = vec![name(view, &worker.name, 12)];
    let Some(b) = worker.gpu_activity.breakdown() else {
        return Line::from(spans);
    };
    let busy = (b.busy * BAR_WIDTH as f64).round() as usize;
    let copy = ((b.copy * BAR_WIDTH as f64).round() as usize).min(BAR_WIDTH - busy.min(BAR_WIDTH));
    let idle = BAR_WIDTH.saturating_sub(busy + copy);
    let color = Style::default().fg(view.color(&worker.name));
    spans.push(Span::styled("█".repeat(busy.min(BAR_WIDTH)), color));
    spans.push(Span::styled("▒".repeat(copy), color));
    spans.push(Span::styled("░".repeat(idle), view.muted()));
    spans.push(Span::styled(
        format!(
            "  busy {:.1}%  copy {:.1}%  idle {:.1}%",
            b.busy * 100.0,
            b.copy * 100.0,
            b.idle * 100.0
        ),
        view.text(),
    ));
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
) -> Vec<Line<'a>> {
    let mut lines = vec![Line::styled(
        format!(
            "grid sizes of {kernel}  ({} of {}, ↑/↓ to choose)",
            of.0 + 1,
            of.1
        ),
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
        " CUDA kernels and GPU time (busy █ copy ▒ idle ░) "
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
            frame.render_widget(
                Paragraph::new(no_records_text(view))
                    .style(view.muted())
                    .wrap(Wrap { trim: true }),
                inner,
            );
            return;
        }
        let grids = if view.focused {
            let names = kernel_names(&workers);
            self.selected = self.selected.min(names.len().saturating_sub(1));
            names
                .get(self.selected)
                .map(|k| grid_lines(view, &workers, k, (self.selected, names.len())))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut lines: Vec<Line> = workers.iter().map(|w| breakdown_line(view, w)).collect();
        let rows_each = (usize::from(inner.height).saturating_sub(lines.len() + 1 + grids.len())
            / workers.len())
        .saturating_sub(1);
        let name_width = usize::from(inner.width).saturating_sub(50).clamp(12, 48);
        lines.push(Line::styled(
            format!(
                "{:<12} {:<name_width$} {:>7} {:>8} {:>9} {:>14} {:>11}",
                "", "kernel", "count", "mean µs", "total ms", "grid", "block"
            ),
            view.muted(),
        ));
        for w in &workers {
            for (kernel, t) in w.gpu_activity.top().into_iter().take(rows_each) {
                let shown: String = kernel.chars().take(name_width).collect();
                let mean_us = t.total_ns as f64 / t.count.max(1) as f64 / 1e3;
                lines.push(Line::from(vec![
                    name(view, &w.name, 12),
                    Span::styled(
                        format!(
                            " {shown:<name_width$} {:>7} {:>8.1} {:>9.2} {:>14} {:>11}",
                            t.count,
                            mean_us,
                            t.total_ns as f64 / 1e6,
                            shape(t.grid),
                            shape(t.block)
                        ),
                        view.text(),
                    ),
                ]));
            }
        }
        lines.extend(grids);
        render::lines(frame, inner, &lines);
    }
}
