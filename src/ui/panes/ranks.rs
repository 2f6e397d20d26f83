//! A distributed `--cmd` worker's ranks and stragglers, shown only while some worker has ranks. On the left each
//! worker's step time across its ranks: collapsed, a band from the fastest rank's latest step to the slowest's with
//! the median rank's between; expanded (Enter, maximised), one line per rank, and a row per rank with its own
//! process's CPU and memory. On the right where the ranks arrive: the skew per step over time, the rank most often
//! last, and the verdict.

use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::console::words::bytes;
use crate::state::WorkerState;
use crate::state::script::{ProcessState, ScriptState};
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::{View, ms};

#[derive(Default)]
pub struct Ranks {
    /// One line per rank instead of each worker's band.
    expanded: bool,
}

/// The workers with ranks, and their ranks.
fn distributed<'a>(
    view: &View<'a>,
) -> Vec<(&'a WorkerState, &'a ScriptState, Vec<&'a ProcessState>)> {
    view.state
        .workers
        .iter()
        .filter_map(|w| {
            let script = w.script.as_ref()?;
            let ranks = script.ranks();
            (!ranks.is_empty()).then_some((w, script, ranks))
        })
        .collect()
}

/// Whether any worker of the state has ranks: the pane is shown only then.
pub fn any(state: &crate::state::State) -> bool {
    state
        .workers
        .iter()
        .any(|w| w.script.as_ref().is_some_and(|s| !s.ranks().is_empty()))
}

fn or_dash(v: Option<f64>, format: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), format)
}

impl Ranks {
    fn step_times(&self, frame: &mut Frame, area: Rect, view: &View) {
        let workers = distributed(view);
        let mut lines: Vec<ChartLine> = Vec::new();
        let mut text: Vec<Line> = Vec::new();
        for (w, script, ranks) in &workers {
            let color = view.color(&w.name);
            if self.expanded {
                for p in ranks {
                    let slot = p.rank.unwrap_or(0) as usize;
                    lines.push(ChartLine {
                        color: view.theme.implementation_color(slot),
                        series: &p.series.step_ms,
                    });
                }
            } else {
                lines.push(ChartLine {
                    color: view.theme.muted,
                    series: &script.band.min,
                });
                lines.push(ChartLine {
                    color: view.theme.muted,
                    series: &script.band.max,
                });
                lines.push(ChartLine {
                    color,
                    series: &script.band.median,
                });
            }
            let band = match script.rank_step_medians().as_slice() {
                [] => "no measured steps yet".to_string(),
                m => format!(
                    "step p50 ms: fastest {} · median {} · slowest {}",
                    ms(m[0]),
                    ms(m[m.len() / 2]),
                    ms(m[m.len() - 1])
                ),
            };
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(format!(" {} ranks · {band}", ranks.len()), view.text()),
            ]));
            if self.expanded {
                let room = fit::room(area.width).saturating_sub(RANK.len());
                text.push(Line::styled(
                    format!(
                        "{RANK}{}",
                        fit::cells(
                            &RANK_COLUMNS.map(|(_, w)| w),
                            &RANK_COLUMNS.map(|(h, _)| h),
                            room
                        )
                    ),
                    view.muted(),
                ));
                for p in ranks {
                    text.push(rank_row(view, script, p, room));
                }
            }
        }
        let rows = (text.len() as u16).min(area.height.saturating_sub(3));
        let [plot, numbers] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(rows)]).areas(area);
        chart::draw(frame, plot, view, &lines, ms, None);
        fit::lines(frame, numbers, &text);
    }

    fn stragglers(&self, frame: &mut Frame, area: Rect, view: &View) {
        let workers = distributed(view);
        let lines: Vec<ChartLine> = workers
            .iter()
            .map(|(w, script, _)| ChartLine {
                color: view.color(&w.name),
                series: &script.arrivals.skew_series,
            })
            .collect();
        let mut text: Vec<Line> = Vec::new();
        for (w, script, _) in &workers {
            let a = &script.arrivals;
            let most = a
                .last_counts
                .iter()
                .max_by_key(|&(rank, count)| (*count, std::cmp::Reverse(*rank)));
            let most = match most {
                Some((rank, count)) if a.complete > 0 => format!(
                    " last most often: rank {rank} ({count} of {} steps, {:.0}%)",
                    a.complete,
                    *count as f64 / a.complete as f64 * 100.0
                ),
                _ => " no step every rank arrived for yet".into(),
            };
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(most, view.text()),
            ]));
            let verdict = match a.verdict {
                Some(v) => Line::styled(
                    format!(
                        "  straggler: rank {}, {} ms late (median), last in {} of {}, since step {}",
                        v.rank,
                        ms(v.late_ms),
                        v.last,
                        v.of,
                        v.since_step
                    ),
                    Style::default()
                        .fg(view.theme.warning)
                        .add_modifier(Modifier::BOLD),
                ),
                None => Line::styled(
                    format!(
                        "  no straggler beyond noise · skew p50 {} ms",
                        or_dash(a.skew.median_ms(), ms)
                    ),
                    view.muted(),
                ),
            };
            text.push(verdict);
            if a.incomplete > 0 {
                text.push(Line::styled(
                    format!("  {} steps given up with a rank missing", a.incomplete),
                    Style::default().fg(view.theme.warning),
                ));
            }
            if a.implausible > 0 {
                text.push(Line::styled(
                    format!(
                        "  {} arrival stamps refused: before the session, after golow heard of them, or going back",
                        a.implausible
                    ),
                    Style::default().fg(view.theme.warning),
                ));
            }
        }
        let rows = (text.len() as u16).min(area.height.saturating_sub(3));
        let [plot, numbers] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(rows)]).areas(area);
        chart::draw(frame, plot, view, &lines, ms, None);
        fit::lines(frame, numbers, &text);
    }
}

/// The rank table's first column, then the others: their headers and widths, given up from the right.
const RANK: &str = "  rank  ";
const RANK_COLUMNS: [(&str, usize); 7] = [
    ("pid", 8),
    ("steps", 6),
    ("p50 ms", 9),
    ("last", 6),
    ("cpu", 6),
    ("rss", 10),
    ("gpu mem", 10),
];

/// One rank in `room` columns after its number: its process, steps, median step, times last, and its own process's
/// latest CPU and memory.
fn rank_row<'a>(view: &View, script: &ScriptState, p: &ProcessState, room: usize) -> Line<'a> {
    let rank = p.rank.unwrap_or(0);
    let last = script.arrivals.last_counts.get(&rank).copied().unwrap_or(0);
    let named = script.arrivals.verdict.is_some_and(|v| v.rank == rank);
    let latest = |s: &crate::state::Series| s.last().map(|(_, v)| v);
    let style = if named {
        Style::default().fg(view.theme.warning)
    } else {
        view.text()
    };
    let cells = [
        p.pid.map_or("-".into(), |pid| pid.to_string()),
        p.steps.to_string(),
        or_dash(p.step_interval.median_ms(), ms),
        last.to_string(),
        or_dash(latest(&p.series.cpu_percent), |c| format!("{c:.0}%")),
        or_dash(latest(&p.series.rss_bytes), bytes),
        or_dash(latest(&p.series.gpu_memory_bytes), bytes),
    ];
    Line::styled(
        format!(
            "  {rank:<6}{}",
            fit::cells(&RANK_COLUMNS.map(|(_, w)| w), &cells, room)
        ),
        style,
    )
}

impl Pane for Ranks {
    fn title(&self) -> &'static str {
        " ranks: step time across ranks · stragglers (arrival skew at backward) "
    }

    fn needs_ranks(&self) -> bool {
        true
    }

    fn shows(&self) -> Changes {
        Changes::STEPS | Changes::PROCESS | Changes::GPU
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(inner);
        self.step_times(frame, left, view);
        self.stragglers(frame, right, view);
    }

    fn on_key(&mut self, key: KeyCode) -> bool {
        if key == KeyCode::Enter {
            self.expanded = !self.expanded;
            return true;
        }
        false
    }
}
