//! GPU utilisation: the device's, and each worker's SM share, from NVML.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::View;

pub struct GpuUtilisation;

impl Pane for GpuUtilisation {
    fn title(&self) -> &'static str {
        " GPU utilisation % (NVML; device averaged over 1/6–1 s) "
    }

    fn needs_gpu(&self) -> bool {
        true
    }

    fn shows(&self) -> Changes {
        Changes::GPU
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let gpu = &view.state.gpu;
        let mut lines: Vec<ChartLine> = gpu
            .devices
            .iter()
            .map(|d| ChartLine {
                color: view.theme.foreground,
                series: &d.utilization,
            })
            .collect();
        lines.extend(view.state.workers.iter().map(|w| ChartLine {
            color: view.color(&w.name),
            series: &w.series.gpu_sm_percent,
        }));
        let rows = view.state.workers.len() as u16 + gpu.devices.len() as u16;
        let [plot, numbers] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(rows)]).areas(inner);
        chart::draw(
            frame,
            plot,
            view,
            &lines,
            |v| format!("{v:.0}%"),
            Some(100.0),
        );
        let mut text = Vec::new();
        for d in &gpu.devices {
            let last = |s: &crate::state::Series| s.last().map(|(_, v)| v);
            text.push(Line::styled(
                format!(
                    "GPU {} util {:>4} · {:>4} W · SM {:>5} MHz · {}",
                    d.index,
                    last(&d.utilization).map_or("-".into(), |v| format!("{v:.0}%")),
                    last(&d.power_watts).map_or("-".into(), |v| format!("{v:.0}")),
                    last(&d.sm_clock_mhz).map_or("-".into(), |v| format!("{v:.0}")),
                    d.name,
                ),
                view.text(),
            ));
        }
        // The reason is in the recording; on screen, the fact that no per-worker figure can come.
        let unavailable = gpu.processes_unavailable.is_some();
        for w in &view.state.workers {
            let sm = match w.series.gpu_sm_percent.last() {
                Some((_, v)) => format!("{v:.0}%"),
                None if unavailable => "n/a (NVML sees host PIDs)".into(),
                None => "-".into(),
            };
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(format!(" SM {sm:>4}"), view.text()),
            ]));
        }
        fit::lines(frame, numbers, &text);
    }
}
