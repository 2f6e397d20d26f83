//! Time per sample over time, per implementation, and its distribution (HDR histogram) so far.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::{View, ms};

pub struct SampleTime;

impl Pane for SampleTime {
    fn title(&self) -> &'static str {
        " sample time (ms/sample, warm-up excluded) "
    }

    fn shows(&self) -> Changes {
        Changes::STEPS
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        // The percentiles that fit beside a chart of at least its least width, from p50 on.
        let room = fit::room(inner.width.saturating_sub(MIN_CHART + 1 + NAME));
        let shown = fit::columns(&[CELL + 1; 4], room);
        let table_width = if shown == 0 {
            0
        } else {
            NAME + (CELL as u16 + 1) * shown as u16 + 1
        };
        // A column between them, so that the axis's last time never runs into the table.
        let [plot, _, table] = Layout::horizontal([
            Constraint::Min(MIN_CHART),
            Constraint::Length(1),
            Constraint::Length(table_width),
        ])
        .areas(inner);
        let lines: Vec<ChartLine> = view
            .state
            .workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.sample_ms,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, ms, None);
        if shown == 0 {
            return;
        }
        let widths = [CELL; 4];
        let mut rows = vec![Line::styled(
            format!(
                "{:<12}{}",
                "",
                fit::cells(&widths, &["p50", "p90", "p99", "max"], room)
            ),
            view.muted(),
        )];
        for w in &view.state.workers {
            let cells = match w.sample_time.percentiles() {
                Some(p) => fit::cells(&widths, &[p.p50, p.p90, p.p99, p.max].map(ms), room),
                None => fit::cells(&widths, &["-"], room),
            };
            rows.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(cells, view.text()),
            ]));
        }
        fit::lines(frame, table, &rows);
    }
}

/// The chart's least width beside the table, the table's name column and each of its cells.
const MIN_CHART: u16 = 16;
const NAME: u16 = 12;
const CELL: usize = 7;
