//! Host-to-device copies of each step: time, bytes, bandwidth, and whether the host memory was pinned, as the
//! worker timed them and, beside them, as CUPTI saw them (bytes per step and the copies' source memory).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::{View, bytes, ms};

pub struct Copies;

/// The latest PCIe reading of each GPU: the whole device's traffic, every process's copies together.
fn pcie_line<'a>(view: &View) -> Option<Line<'a>> {
    let gbps = |s: &crate::state::Series| s.last().map(|(_, v)| format!("{:.1}", v / 1e9));
    let readings: Vec<String> = view
        .state
        .gpu
        .devices
        .iter()
        .filter_map(|d| {
            let (rx, tx) = (gbps(&d.pcie_rx_bytes_per_s), gbps(&d.pcie_tx_bytes_per_s));
            (rx.is_some() || tx.is_some()).then(|| {
                format!(
                    "PCIe GPU {}: in {}, out {} GB/s",
                    d.index,
                    rx.unwrap_or_else(|| "-".into()),
                    tx.unwrap_or_else(|| "-".into())
                )
            })
        })
        .collect();
    (!readings.is_empty()).then(|| {
        Line::styled(
            format!("{} · whole device (NVML)", readings.join(fit::CLAUSE)),
            view.muted(),
        )
    })
}

impl Pane for Copies {
    fn title(&self) -> &'static str {
        " host→device copy (per step) "
    }

    fn needs_gpu(&self) -> bool {
        true
    }

    fn shows(&self) -> Changes {
        Changes::STEPS | Changes::GPU
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let workers = &view.state.workers;
        let pcie = pcie_line(view);
        let rows = workers.len() as u16 + 1 + u16::from(pcie.is_some());
        let [plot, numbers] = chart::over_table(inner, rows);
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.h2d_ms,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, ms, None);
        let room = fit::room(inner.width).saturating_sub(12);
        let widths = [8, 11, 8, 9, 11, 9];
        let header = [
            "ms p50",
            "bytes/step",
            "GB/s",
            "memory",
            "CUPTI/step",
            "CUPTI src",
        ];
        let mut text = vec![Line::styled(
            format!("{:<12}{}", "", fit::cells(&widths, &header, room)),
            view.muted(),
        )];
        for w in workers {
            let p50 = w.h2d.median_ms().map_or("-".into(), ms);
            let per_step = w.h2d_bytes_per_step().map(|b| bytes(b as f64));
            let gbps = w
                .series
                .h2d_gbps
                .last()
                .map_or("-".into(), |(_, v)| format!("{v:.2}"));
            let memory = match w.pinned {
                Some(true) => "pinned",
                Some(false)
                    if w.hello
                        .as_ref()
                        .is_some_and(|h| h.device.starts_with("cuda")) =>
                {
                    "pageable"
                }
                _ => "-",
            };
            let cells = [
                p50,
                per_step.unwrap_or_else(|| "-".into()),
                gbps,
                memory.to_string(),
                w.gpu_activity
                    .per_step
                    .h2d_bytes()
                    .map_or("-".into(), bytes),
                w.gpu_activity.h2d_source().unwrap_or("-").to_string(),
            ];
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(fit::cells(&widths, &cells, room), view.text()),
            ]));
        }
        text.extend(pcie);
        fit::lines(frame, numbers, &text);
    }
}
