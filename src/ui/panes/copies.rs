//! Host-to-device copies of each step: time, bytes, bandwidth, and whether the host memory was pinned, as the
//! worker timed them and, beside them, as CUPTI saw them (bytes per step and the copies' source memory).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::render;
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
                    "GPU {} in {} · out {} GB/s",
                    d.index,
                    rx.unwrap_or_else(|| "-".into()),
                    tx.unwrap_or_else(|| "-".into())
                )
            })
        })
        .collect();
    (!readings.is_empty()).then(|| {
        Line::styled(
            format!("PCIe (NVML, whole device): {}", readings.join("   ")),
            view.muted(),
        )
    })
}

impl Pane for Copies {
    fn title(&self) -> &'static str {
        " host→device copy per step "
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
        let [plot, numbers] = Layout::vertical([
            Constraint::Min(3),
            Constraint::Length(workers.len() as u16 + 1 + u16::from(pcie.is_some())),
        ])
        .areas(inner);
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.h2d_ms,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, ms, None);
        let mut text = vec![Line::styled(
            format!(
                "{:<12} {:>8} {:>11} {:>8} {:>9} {:>11} {:>9}",
                "", "ms p50", "bytes/step", "GB/s", "memory", "CUPTI/step", "CUPTI src"
            ),
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
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(
                    format!(
                        " {p50:>8} {:>11} {gbps:>8} {memory:>9} {:>11} {:>9}",
                        per_step.unwrap_or_else(|| "-".into()),
                        w.gpu_activity
                            .per_step
                            .h2d_bytes()
                            .map_or("-".into(), bytes),
                        w.gpu_activity.h2d_source().unwrap_or("-"),
                    ),
                    view.text(),
                ),
            ]));
        }
        text.extend(pcie);
        render::lines(frame, numbers, &text);
    }
}
