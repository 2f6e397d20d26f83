//! Samples per second per step, and step time: h2d + compute for the built-ins, the interval between
//! optimiser steps for `--cmd` workers.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
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
        let [plot, numbers] = chart::over_table(inner, rows);
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.throughput,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, |v| format!("{v:.0}/s"), None);
        let room = fit::room(inner.width).saturating_sub(12);
        let widths = [10, 12];
        let mut text = vec![Line::styled(
            format!(
                "{:<12}{}",
                "",
                fit::cells(&widths, &["samples/s", "step ms p50"], room)
            ),
            view.muted(),
        )];
        for w in workers {
            let throughput = w.throughput().map_or("-".into(), |t| format!("{t:.1}"));
            let step = w.step_time.median_ms().map_or("-".into(), ms);
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(fit::cells(&widths, &[throughput, step], room), view.text()),
            ]));
        }
        fit::lines(frame, numbers, &text);
    }
}
