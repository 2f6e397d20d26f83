//! Memory: the GPU's used/total, each worker's host RSS (/proc) and GPU memory (NVML, per process), each beside its
//! peak.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Gauge;

use super::{Pane, name};
use crate::console::words::bytes;
use crate::state::Series;
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::View;

pub struct Memory;

impl Pane for Memory {
    fn title(&self) -> &'static str {
        " memory: host RSS and GPU "
    }

    fn shows(&self) -> Changes {
        Changes::PROCESS | Changes::GPU
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let devices = &view.state.gpu.devices;
        let workers = &view.state.workers;
        let [gauges, charted] =
            Layout::vertical([Constraint::Length(devices.len() as u16), Constraint::Min(0)])
                .areas(inner);
        let [plot, numbers] = chart::over_table(charted, workers.len() as u16 + 1);
        for (i, d) in devices.iter().enumerate() {
            let used = d.memory_used_bytes.last().map_or(0.0, |(_, v)| v);
            let total = d.memory_total_bytes as f64;
            let ratio = if total > 0.0 {
                (used / total).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let row = Rect {
                y: gauges.y + i as u16,
                height: 1,
                ..gauges
            };
            let gauge = Gauge::default()
                .ratio(ratio)
                .label(gauge_label(d.index, used, total, row.width))
                .gauge_style(
                    ratatui::style::Style::default()
                        .fg(view.theme.title)
                        .bg(view.theme.border),
                );
            frame.render_widget(gauge, row);
        }
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.rss_bytes,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, bytes, None);
        let room = fit::room(inner.width).saturating_sub(12);
        let widths = [10, 10, 10, 10];
        // Once a worker has exited, its columns hold what it was last seen holding.
        let ended = workers.iter().any(|w| w.process_end.is_some());
        let header = if ended {
            ["last RSS", "peak RSS", "last GPU", "peak GPU"]
        } else {
            ["RSS", "peak RSS", "GPU", "peak GPU"]
        };
        let mut text = vec![Line::styled(
            format!("{:<12}{}", "", fit::cells(&widths, &header, room)),
            view.muted(),
        )];
        let last = |series: &Series| series.last().map_or("-".into(), |(_, v)| bytes(v));
        for w in workers {
            let peak = (w.peak_rss_bytes > 0).then(|| bytes(w.peak_rss_bytes as f64));
            let cells = [
                last(&w.series.rss_bytes),
                peak.unwrap_or_else(|| "-".into()),
                last(&w.series.gpu_memory_bytes),
                w.peak_gpu_memory_bytes
                    .map_or("-".into(), |peak| bytes(peak as f64)),
            ];
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(fit::cells(&widths, &cells, room), view.text()),
            ]));
        }
        fit::lines(frame, numbers, &text);
    }
}

/// A GPU's memory in use as its gauge says it: the longest form that fits in `width`.
fn gauge_label(index: u32, used: f64, total: f64, width: u16) -> String {
    let share = if total > 0.0 { used / total } else { 0.0 };
    [
        format!("GPU {index} {} / {}", bytes(used), bytes(total)),
        format!("{} / {}", bytes(used), bytes(total)),
        format!("{} used", bytes(used)),
        format!("{:.0}%", share * 100.0),
    ]
    .into_iter()
    .find(|label| label.chars().count() <= fit::room(width))
    .unwrap_or_default()
}
