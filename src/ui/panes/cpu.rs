//! Host CPU per worker, its process tree included (100% = one core busy).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::ui::changes::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::render;
use crate::ui::view::View;

pub struct HostCpu;

impl Pane for HostCpu {
    fn title(&self) -> &'static str {
        " host CPU % per worker (100 = one core) "
    }

    fn shows(&self) -> Changes {
        Changes::PROCESS
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let workers = &view.state.workers;
        let [plot, numbers] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(workers.len() as u16)])
                .areas(inner);
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.cpu_percent,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, |v| format!("{v:.0}%"), None);
        let text: Vec<Line> = workers
            .iter()
            .map(|w| {
                let now = w
                    .series
                    .cpu_percent
                    .last()
                    .map_or("-".into(), |(_, v)| format!("{v:.0}%"));
                Line::from(vec![
                    name(view, &w.name, 12),
                    Span::styled(format!(" {now:>6}"), view.text()),
                ])
            })
            .collect();
        render::lines(frame, numbers, &text);
    }
}
