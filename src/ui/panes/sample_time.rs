//! Time per sample over time, per implementation, and its distribution (HDR histogram) so far.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::render;
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
        let [plot, table] =
            Layout::horizontal([Constraint::Min(20), Constraint::Length(48)]).areas(inner);
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
        let mut rows = vec![Line::styled(
            format!(
                "{:<12} {:>7} {:>7} {:>7} {:>7}",
                "", "p50", "p90", "p99", "max"
            ),
            view.muted(),
        )];
        for w in &view.state.workers {
            let cells = match w.sample_time.percentiles() {
                Some(p) => format!(
                    " {:>7} {:>7} {:>7} {:>7}",
                    ms(p.p50),
                    ms(p.p90),
                    ms(p.p99),
                    ms(p.max)
                ),
                None => format!(" {:>7}", "-"),
            };
            rows.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(cells, view.text()),
            ]));
        }
        render::lines(frame, table, &rows);
    }
}
