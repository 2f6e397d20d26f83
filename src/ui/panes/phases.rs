//! Where a `--cmd` worker's steps spend their time, shown only while some worker has step phases. On the left the
//! chosen worker's steps over time as a stacked band: each line is the top of a phase stacked on those before it
//! (data, then forward, backward, the optimiser, and the whole interval on top); ↑/↓ in the maximised pane choose the
//! worker. On the right each worker's shares over its latest steps, and whether it is input-bound now. The times are
//! the host's: on a GPU, asynchronous work counts where the host waits for it, so where CUPTI runs the device's busy
//! share of the steps is set beside them.

use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::{Pane, choose, name};
use crate::state::phases::{Phase, PhasesState};
use crate::state::{State, WorkerState};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::{View, ms};

#[derive(Default)]
pub struct Phases {
    /// The worker whose band is charted, among those with phases (clamped when drawn).
    selected: usize,
}

/// The workers whose steps have phases.
fn phased(state: &State) -> Vec<(&WorkerState, &PhasesState)> {
    state
        .workers
        .iter()
        .filter_map(|w| Some((w, w.script.as_ref()?.measured_phases()?)))
        .collect()
}

/// Whether any worker of the state has step phases: the pane is shown only then.
pub fn any(state: &State) -> bool {
    state.workers.iter().any(|w| {
        w.script
            .as_ref()
            .is_some_and(|s| s.measured_phases().is_some())
    })
}

fn phase_color(view: &View, phase: usize) -> ratatui::style::Color {
    view.theme.implementation_color(phase)
}

/// What the table's columns are: each phase's share, in its colour.
const COLUMN: usize = 10;
/// The table's width, its names and every phase's column, and the least width of the chart beside it.
const TABLE_WIDTH: u16 = (12 + COLUMN * Phase::ALL.len()) as u16;
const MIN_CHART: u16 = 20;

impl Pane for Phases {
    fn title(&self) -> &'static str {
        " step phases (stacked ms per step, host clock) "
    }

    fn needs_phases(&self) -> bool {
        true
    }

    fn shows(&self) -> Changes {
        Changes::STEPS
    }

    fn on_key(&mut self, key: KeyCode) -> bool {
        choose(&mut self.selected, key)
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let workers = phased(view.state);
        let chosen = workers.get(self.selected.min(workers.len().saturating_sub(1)));
        let lines: Vec<ChartLine> = chosen
            .map(|(_, phases)| {
                // The top first, so that each phase's own line is drawn over the ones stacked on it.
                (0..Phase::ALL.len())
                    .rev()
                    .map(|i| ChartLine {
                        color: phase_color(view, i),
                        series: &phases.stacked[i],
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The top line is each step's whole time, which bounds the lines stacked under it.
        let off_chart = chart::scaled_to_most(&lines[..lines.len().min(1)], view);
        // The table beside the chart where both fit, else under it; its phases from the left, as many as fit.
        let beside = inner.width > MIN_CHART + TABLE_WIDTH;
        let room = if beside {
            usize::from(TABLE_WIDTH)
        } else {
            fit::room(inner.width)
        };
        let columns = fit::columns(&[COLUMN; Phase::ALL.len()], room.saturating_sub(12));

        let mut header = vec![Span::styled(format!("{:<12}", "share now"), view.muted())];
        for (i, phase) in Phase::ALL.iter().enumerate().take(columns) {
            header.push(Span::styled(
                format!("{:>COLUMN$}", phase.name()),
                Style::default()
                    .fg(phase_color(view, i))
                    .add_modifier(Modifier::BOLD),
            ));
        }
        let mut rows = vec![Line::from(header)];
        for (w, phases) in &workers {
            let cells: String = match phases.recent_shares() {
                Some(shares) => shares
                    .iter()
                    .take(columns)
                    .map(|s| format!("{:>COLUMN$}", format!("{:.0}%", s * 100.0)))
                    .collect(),
                None => format!("{:>COLUMN$}", "-"),
            };
            rows.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(cells, view.text()),
            ]));
            // The host's phases count asynchronous work where the host waits: the device's own busy time beside them.
            if let Some(b) = w.gpu_activity.breakdown() {
                rows.push(Line::styled(
                    format!(
                        "  GPU busy {:.0}% of its steps, copying {:.0}% (CUPTI)",
                        b.busy * 100.0,
                        b.copy * 100.0
                    ),
                    view.text(),
                ));
            }
            if let Some(cost) = phases
                .hook_cost()
                .filter(|c| c.share > crate::state::phases::HOOK_NOTICE_SHARE)
            {
                rows.push(Line::styled(
                    format!(
                        "  golow's hook: {} of a typical step ({:.0}%)",
                        crate::state::phases::milliseconds(cost.ms),
                        cost.share * 100.0
                    ),
                    view.muted(),
                ));
            }
            if let Some(bound) = phases.input_bound_now() {
                rows.push(Line::styled(
                    format!(
                        "  INPUT-BOUND: data {:.0}% of a typical step",
                        bound.share * 100.0
                    ),
                    Style::default()
                        .fg(view.theme.warning)
                        .add_modifier(Modifier::BOLD),
                ));
            }
        }
        if let Some((w, _)) = chosen {
            let more = if workers.len() > 1 {
                " (↑/↓ another)"
            } else {
                ""
            };
            rows.push(Line::styled(
                format!("charted: {}{more}", w.name),
                view.muted(),
            ));
        }
        rows.push(Line::styled(
            "on a GPU: launch times, waits where the host waits",
            view.muted(),
        ));
        if let Some(off) = off_chart {
            rows.push(Line::styled(
                format!(
                    "off the chart: {} step{} above {} ms, up to {} ms",
                    off.above,
                    if off.above == 1 { "" } else { "s" },
                    ms(off.top),
                    ms(off.max)
                ),
                view.muted(),
            ));
        }
        let [plot, table] = if beside {
            Layout::horizontal([
                Constraint::Min(MIN_CHART),
                Constraint::Length(TABLE_WIDTH + 1),
            ])
            .areas(inner)
        } else {
            Layout::vertical([Constraint::Min(3), Constraint::Length(rows.len() as u16)])
                .areas(inner)
        };
        chart::draw(frame, plot, view, &lines, ms, off_chart.map(|off| off.top));
        fit::lines(frame, table, &rows);
    }
}
