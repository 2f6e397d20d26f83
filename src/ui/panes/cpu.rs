//! Host CPU per worker, its process tree included (100% = one core busy), and the whole machine's load.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::state::conditions::LoadReading;
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
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
        let machine = view
            .state
            .machine
            .now()
            .map(|now| machine_line(now, fit::room(inner.width)));
        let rows = workers.len() + usize::from(machine.is_some());
        let [plot, numbers] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(rows as u16)]).areas(inner);
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.cpu_percent,
            })
            .collect();
        chart::draw(frame, plot, view, &lines, |v| format!("{v:.0}%"), None);
        let room = fit::room(inner.width).saturating_sub(12);
        let mut text: Vec<Line> = workers
            .iter()
            .map(|w| {
                let now = w
                    .series
                    .cpu_percent
                    .last()
                    .map_or("-".into(), |(_, v)| format!("{v:.0}%"));
                Line::from(vec![
                    name(view, &w.name, 12),
                    Span::styled(fit::cells(&[6], &[now], room), view.text()),
                ])
            })
            .collect();
        text.extend(machine.map(|m| Line::styled(m, view.muted())));
        fit::lines(frame, numbers, &text);
    }
}

/// The whole machine over its latest readings, the same the header's BUSY mark judges by, so that a slow step can
/// be set against what else ran; said over what time where there is room. Other processes' share comes first: it is
/// what makes a machine busy.
fn machine_line((readings, r): (usize, LoadReading), room: usize) -> String {
    let clock = r
        .cpu_mhz
        .map_or(String::new(), |m| format!(" · {m:.0} MHz"));
    let others = format!("others {:.0}%", r.others_percent);
    let said = format!(
        "{others} · busy {:.0}% · steal {:.1}% · load {:.2}{clock}",
        r.busy_percent, r.steal_percent, r.load_1m
    );
    let over = format!("machine, last {readings} s: ");
    if over.chars().count() + others.chars().count() <= room {
        over + &said
    } else {
        said
    }
}
