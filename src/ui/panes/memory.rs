//! Memory: the GPU's used/total, each worker's GPU memory (NVML, per process) and host RSS (/proc).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Gauge;

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::render;
use crate::ui::view::{View, bytes};

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
        let [gauges, plot, numbers] = Layout::vertical([
            Constraint::Length(devices.len() as u16),
            Constraint::Min(3),
            Constraint::Length(workers.len() as u16 + 1),
        ])
        .areas(inner);
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
                .label(format!(
                    "GPU {} {} / {}",
                    d.index,
                    bytes(used),
                    bytes(total)
                ))
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
        let mut text = vec![Line::styled(
            format!("{:<12} {:>10} {:>10} {:>10}", "", "RSS", "peak RSS", "GPU"),
            view.muted(),
        )];
        for w in workers {
            let rss = w
                .series
                .rss_bytes
                .last()
                .map_or("-".into(), |(_, v)| bytes(v));
            let gpu = w
                .series
                .gpu_memory_bytes
                .last()
                .map_or("-".into(), |(_, v)| bytes(v));
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(
                    format!(
                        " {rss:>10} {:>10} {gpu:>10}",
                        bytes(w.peak_rss_bytes as f64)
                    ),
                    view.text(),
                ),
            ]));
        }
        render::lines(frame, numbers, &text);
    }
}
