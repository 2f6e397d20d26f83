//! Host-to-device copies of each step: time, bytes, bandwidth, and whether the host memory was pinned, as the
//! worker timed them and, beside them, as CUPTI saw them (bytes per step and the copies' source memory). CUPTI's
//! bytes per step are those of the copies set on the worker's measured steps; a recording from before golow set
//! them on steps says so rather than show a tally of whole windows.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::console::words::bytes;
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::{View, ms};

pub struct Copies;

/// What a worker's copies are per step as CUPTI saw them: "-" without a collector's windows.
fn cupti_per_step(w: &crate::state::WorkerState) -> String {
    match w.gpu_activity.per_step.h2d_bytes() {
        Some(per_step) => bytes(per_step),
        None if w.gpu_activity.windows > 0 => NOT_PLACED.into(),
        None => "-".into(),
    }
}

const NOT_PLACED: &str = "not placed";

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
        let cupti: Vec<String> = workers.iter().map(cupti_per_step).collect();
        let unplaced = cupti.iter().any(|c| c == NOT_PLACED).then(|| {
            Line::styled(
                "CUPTI/step: not placed on steps (recorded before golow placed copies on steps)",
                view.muted(),
            )
        });
        let rows =
            workers.len() as u16 + 1 + u16::from(pcie.is_some()) + u16::from(unplaced.is_some());
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
        for (w, cupti) in workers.iter().zip(cupti) {
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
                cupti,
                w.gpu_activity.h2d_source().unwrap_or("-").to_string(),
            ];
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(fit::cells(&widths, &cells, room), view.text()),
            ]));
        }
        text.extend(unplaced);
        text.extend(pcie);
        fit::lines(frame, numbers, &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;
    use golow_protocol::event::{
        Body, CopyKind, CopyRuns, MemoryKind, Record, Run, Step, Timeline,
    };
    use golow_protocol::samples;

    const MS: u64 = 1_000_000;
    const BATCH: u64 = 196_736;

    fn drawn(state: &State) -> String {
        super::super::drawn(&mut Copies, state, 120, 14)
    }

    /// Ten steps of 50 ms, each copying its batch, and a window holding them all after a weights upload: with
    /// `placed`, as golow now records them; without, as older recordings hold them.
    fn state(placed: bool) -> State {
        let mut state = State::default();
        let origin = 10_000 * MS;
        let mut copies = vec![Run::from((0, 10 * MS as i64, 1, 44_000_000))];
        for n in 0..10u64 {
            let start = origin + 100 * MS + n * 50 * MS;
            let step = Step {
                h2d_ms: Some(1.0),
                h2d_bytes: Some(BATCH),
                start_ns: placed.then_some(start),
                end_ns: placed.then_some(start + 50 * MS),
                ..samples::step(n, 40.0, n == 0)
            };
            state.apply(&Record::new(
                0.2 + n as f64 * 0.05,
                Some("libtorch".into()),
                Body::Step(step),
            ));
            let at = (start - origin + MS) as i64;
            copies.push(Run::from((at, at + MS as i64, 1, BATCH)));
        }
        let mut window = samples::kernel_window(Vec::new());
        (window.monotonic_start_ns, window.monotonic_end_ns) =
            (Some(origin), Some(origin + 1_000 * MS));
        window.timeline = placed.then(|| Timeline {
            kernels: Vec::new(),
            copies: vec![CopyRuns {
                kind: CopyKind::HostToDevice,
                src: MemoryKind::Pinned,
                runs: copies,
            }],
            merged: 0,
        });
        state.apply(&Record::new(
            2.0,
            Some("libtorch".into()),
            Body::Kernels(Box::new(window)),
        ));
        state
    }

    #[test]
    fn cuptis_bytes_per_step_are_the_workers_once_placed_on_steps() {
        let placed = drawn(&state(true));
        let row = placed.lines().find(|l| l.contains("libtorch")).unwrap();
        let worker = bytes(BATCH as f64);
        assert_eq!(row.matches(worker.as_str()).count(), 2, "{placed}");
        assert!(!placed.contains("not placed"), "{placed}");
        let unplaced = drawn(&state(false));
        let row = unplaced.lines().find(|l| l.contains("libtorch")).unwrap();
        assert_eq!(row.matches(worker.as_str()).count(), 1, "{unplaced}");
        assert!(
            row.contains(NOT_PLACED) && unplaced.contains("not placed on steps"),
            "{unplaced}"
        );
    }
}
