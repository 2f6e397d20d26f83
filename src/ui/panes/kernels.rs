//! CUDA kernels: where each worker's GPU time goes (busy, copy, idle) and its top kernels by total
//! time with grid and block sizes, from the CUPTI collector's records. Without them the pane says so
//! rather than guess.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{Pane, framed, name};
use crate::state::WorkerState;
use crate::ui::view::View;

pub struct Kernels;

const BAR_WIDTH: usize = 20;

fn shape(d: [u32; 3]) -> String {
    format!("({},{},{})", d[0], d[1], d[2])
}

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
    let dropped = worker.gpu_activity.dropped_records;
    if dropped > 0 {
        spans.push(Span::styled(
            format!("  {dropped} records dropped"),
            Style::default().fg(view.theme.warning),
        ));
    }
    Line::from(spans)
}

impl Pane for Kernels {
    fn title(&self) -> &'static str {
        " CUDA kernels and GPU time (busy █ copy ▒ idle ░) "
    }

    fn needs_gpu(&self) -> bool {
        true
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = framed(frame, area, view, self.title());
        let workers: Vec<&WorkerState> = view
            .state
            .workers
            .iter()
            .filter(|w| w.gpu_activity.windows > 0)
            .collect();
        if workers.is_empty() {
            let text = "No kernel records: they come from CUPTI activity tracing, which this build of golow does not collect yet.";
            frame.render_widget(
                Paragraph::new(Line::styled(text, view.muted())).wrap(Wrap { trim: true }),
                inner,
            );
            return;
        }
        let mut lines: Vec<Line> = workers.iter().map(|w| breakdown_line(view, w)).collect();
        let rows_each = (usize::from(inner.height).saturating_sub(lines.len() + 1) / workers.len())
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
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
