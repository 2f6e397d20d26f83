//! Samples per second per step, and step time: h2d + compute for the built-ins, the interval between
//! optimiser steps for `--cmd` workers.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::render;
use crate::ui::view::{View, ms};

pub struct Throughput;

impl Pane for Throughput {
    fn title(&self) -> &'static str {
        " throughput (samples/s) and step time "
    }

    fn shows(&self) -> Changes {
        Changes::STEPS
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let workers = &view.state.workers;
        let rows = workers.len() as u16 + 1;
        let [plot, numbers] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(rows)]).areas(inner);
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.throughput,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, |v| format!("{v:.0}/s"), None);
        let mut text = vec![Line::styled(
            format!("{:<12} {:>10} {:>12}", "", "samples/s", "step ms p50"),
            view.muted(),
        )];
        for w in workers {
            let throughput = w.throughput();
            let step = w.step_time.median_ms().map(ms);
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(
                    format!(
                        " {:>10} {:>12}",
                        throughput.map_or("-".into(), |t| format!("{t:.1}")),
                        step.unwrap_or_else(|| "-".into())
                    ),
                    view.text(),
                ),
            ]));
        }
        render::lines(frame, numbers, &text);
    }
}
