//! Operators: why a step takes what it takes. Per worker, its top operators by self time per profiled step, with
//! their share of the step's compute and calls per step, the share all of them explain and what looking cost.
//! Maximised, one operator's self time per step over time for every worker that ran it (↑/↓ to choose), with each
//! worker's calls and input shapes of it.

use std::collections::BTreeMap;

use crossterm::event::KeyCode;
use golow_protocol::event::MAX_SHAPES_PER_OPERATOR;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::{Pane, choose, name};
use crate::state::WorkerState;
use crate::state::operators::OperatorTotals;
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
use crate::ui::view::{View, looking, ms, per_step_count};
use golow_protocol::text::printable;

#[derive(Default)]
pub struct Operators {
    /// Index into [`operator_names`], clamped when drawn.
    selected: usize,
}

const BAR_WIDTH: usize = 12;
/// Names beyond this share the room with nothing they need; the table's columns stay close to them.
const MAX_NAME_WIDTH: usize = 56;

/// The workers with profiled steps.
fn profiled<'a>(view: &View<'a>) -> Vec<&'a WorkerState> {
    view.state
        .workers
        .iter()
        .filter(|w| w.operators.steps > 0)
        .collect()
}

/// Every operator any worker ran, by self time per step summed over the workers.
fn operator_names(workers: &[&WorkerState]) -> Vec<String> {
    let mut totals: BTreeMap<&str, f64> = BTreeMap::new();
    for w in workers {
        for (name, t) in &w.operators.by_name {
            *totals.entry(name).or_default() += w.operators.per_step(t.self_ns).unwrap_or(0.0);
        }
    }
    let mut names: Vec<(&str, f64)> = totals.into_iter().collect();
    names.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    names.into_iter().map(|(n, _)| n.to_string()).collect()
}

/// The worker's line: what its operators explain, how it looked, what looking cost and the shapes it did not keep.
fn worker_line<'a>(view: &View, w: &WorkerState) -> Line<'a> {
    let o = &w.operators;
    let mut said = format!(" {} profiled steps (1 in {})", o.steps, o.every);
    if let (Some(explained), Some(compute)) = (o.explained(), o.compute_ms_per_step()) {
        said.push_str(&format!(
            " · operators explain {:.0}% of {} ms compute",
            explained * 100.0,
            ms(compute)
        ));
    }
    if let Some((_, run)) = o.overhead() {
        said.push_str(&format!(" · {}", looking(run, " of the run")));
    }
    // The operators' times are those of the steps profiled: how like the others those steps were.
    if let Some((profiled, plain)) = o.profiled_against_plain() {
        said.push_str(&format!(
            " · profiled step {} ms, median {} ms",
            ms(profiled),
            ms(plain)
        ));
    }
    let mut spans = vec![name(view, &w.name, 12), Span::styled(said, view.text())];
    if let Some(off) = &o.off {
        spans.push(Span::styled(
            format!(" · no more profiled: {}", printable(off)),
            view.muted(),
        ));
    }
    // Nearly all of these are calls of an operator with more input shapes than the recorder keeps: their times and
    // counts are in the table, only their shapes are not; nothing to act on, so not a warning.
    if o.dropped > 0 {
        spans.push(Span::styled(
            format!(
                " · shapes of {} calls not kept ({MAX_SHAPES_PER_OPERATOR} per operator)",
                o.dropped
            ),
            view.muted(),
        ));
    }
    Line::from(spans)
}

/// One operator of a worker: self ms per step, its share of the step as a number and a bar, calls per step.
fn operator_row<'a>(
    view: &View,
    w: &WorkerState,
    op: (&str, &OperatorTotals),
    (name_width, columns): (usize, usize),
    chosen: bool,
) -> Line<'a> {
    let o = &w.operators;
    let self_ms = o.per_step(op.1.self_ns).unwrap_or(0.0) / 1e6;
    let share = o
        .compute_ms_per_step()
        .filter(|&c| c > 0.0)
        .map_or(0.0, |c| self_ms / c);
    let bar = ((share * BAR_WIDTH as f64).round() as usize).min(BAR_WIDTH);
    let shown = fit::name(op.0, name_width);
    let style = if chosen {
        view.text().add_modifier(Modifier::BOLD)
    } else {
        view.text()
    };
    let cells = [
        ms(self_ms),
        format!("{:.1}%", share * 100.0),
        String::new(),
        per_step_count(o.per_step(op.1.calls).unwrap_or(0.0)),
    ];
    let mut spans = vec![
        Span::raw("  "),
        Span::styled(format!("{shown:<name_width$}"), style),
        Span::styled(fit::cells(&WIDTHS[..2], &cells[..2], usize::MAX), style),
    ];
    if columns > 2 {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            "█".repeat(bar),
            Style::default().fg(view.color(&w.name)),
        ));
        spans.push(Span::styled("░".repeat(BAR_WIDTH - bar), view.muted()));
    }
    if columns > 3 {
        spans.push(Span::styled(
            fit::cells(&WIDTHS[3..], &cells[3..], usize::MAX),
            style,
        ));
    }
    Line::from(spans)
}

/// The operator table's columns after the name: self ms, share, the share's bar and calls, each after a space.
const WIDTHS: [usize; 4] = [9, 7, BAR_WIDTH, 8];
/// An operator's name is given at least this much room before a column is.
const MIN_NAME_WIDTH: usize = 10;

/// Why there is nothing to show: what the workers said, or what golow profiles.
fn nothing_yet(view: &View) -> String {
    let said: Vec<String> = view
        .state
        .workers
        .iter()
        .filter_map(|w| {
            Some(format!(
                "{}: {}",
                w.name,
                printable(w.operators.off.as_ref()?)
            ))
        })
        .collect();
    let none = if view.state.ended {
        "No step was profiled"
    } else {
        "No profiled step yet"
    };
    if !said.is_empty() {
        return format!("{none}. {}.", said.join("; "));
    }
    match view.state.session.as_ref().map(|s| s.ops_every) {
        Some(0) => "No operators: this session recorded none (--no-ops).".to_string(),
        _ if view.state.ended => format!("{none}."),
        Some(every) => format!(
            "No profiled step yet: one step in {every} past the warm-up is profiled (--ops-every), in the built-in \
             levels and in --cmd PyTorch scripts; pytorch and compile profile only within 2% of their time, and \
             not under CUDA graphs."
        ),
        None => "No profiled step yet.".to_string(),
    }
}

impl Operators {
    /// The chosen operator (the `selected`th of `names`) per worker: its self time per step over time and each
    /// worker's figures of it.
    fn chosen(
        &self,
        frame: &mut Frame,
        area: Rect,
        view: &View,
        workers: &[&WorkerState],
        names: &[String],
    ) {
        let Some(chosen) = names.get(self.selected) else {
            return;
        };
        let lines: Vec<ChartLine> = workers
            .iter()
            .filter_map(|w| {
                Some(ChartLine {
                    color: view.color(&w.name),
                    series: &w.operators.by_name.get(chosen)?.self_ms_per_step,
                })
            })
            .collect();
        let mut text = vec![Line::styled(
            format!(
                "{chosen}: self ms per profiled step  ({} of {}, ↑/↓ to choose)",
                self.selected + 1,
                names.len()
            ),
            view.text().add_modifier(Modifier::BOLD),
        )];
        for w in workers {
            let o = &w.operators;
            let line = match o.by_name.get(chosen) {
                Some(t) => format!(
                    " {} ms self · {} ms with callees · {} calls per step{}",
                    ms(o.per_step(t.self_ns).unwrap_or(0.0) / 1e6),
                    ms(o.per_step(t.total_ns).unwrap_or(0.0) / 1e6),
                    per_step_count(o.per_step(t.calls).unwrap_or(0.0)),
                    if t.shapes.is_empty() {
                        String::new()
                    } else {
                        format!(" · inputs {}", t.shapes)
                    }
                ),
                None => " did not run it".to_string(),
            };
            text.push(Line::from(vec![
                name(view, &w.name, 12),
                Span::styled(line, view.text()),
            ]));
        }
        let rows = (text.len() as u16).min(area.height.saturating_sub(3));
        let [plot, numbers] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(rows)]).areas(area);
        chart::draw(frame, plot, view, &lines, ms, None);
        fit::lines(frame, numbers, &text);
    }

    /// Each worker's top operators, `chosen` in bold.
    fn tables(
        frame: &mut Frame,
        area: Rect,
        view: &View,
        workers: &[&WorkerState],
        chosen: Option<&str>,
    ) {
        let longest = workers
            .iter()
            .flat_map(|w| w.operators.by_name.keys())
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0);
        let names = (
            MIN_NAME_WIDTH,
            longest.min(MAX_NAME_WIDTH).max("operator".len()),
        );
        let layout = fit::named_columns(fit::room(area.width), 2, &WIDTHS, names);
        let (name_width, columns) = layout;
        let headers = ["self ms", "share", "", "calls"];
        let mut lines = vec![Line::styled(
            format!(
                "  {:<name_width$}{}",
                "operator",
                fit::cells(&WIDTHS[..columns], &headers[..columns], usize::MAX)
            ),
            view.muted(),
        )];
        let rows_each = (usize::from(area.height).saturating_sub(1) / workers.len())
            .saturating_sub(1)
            .max(1);
        for w in workers {
            lines.push(worker_line(view, w));
            for op in w.operators.top(rows_each) {
                let is_chosen = chosen == Some(op.0);
                lines.push(operator_row(view, w, op, layout, is_chosen));
            }
        }
        fit::lines(frame, area, &lines);
    }
}

impl Pane for Operators {
    fn title(&self) -> &'static str {
        " operators: self time per profiled step, share of the step, calls "
    }

    fn shows(&self) -> Changes {
        Changes::STEPS
    }

    fn on_key(&mut self, key: KeyCode) -> bool {
        choose(&mut self.selected, key)
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let workers = profiled(view);
        if workers.is_empty() {
            fit::wrapped(frame, inner, nothing_yet(view), view.muted());
            return;
        }
        if view.focused {
            let [top, bottom] =
                Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)])
                    .areas(inner);
            let names = operator_names(&workers);
            self.selected = self.selected.min(names.len().saturating_sub(1));
            self.chosen(frame, top, view, &workers, &names);
            let chosen = names.get(self.selected).map(String::as_str);
            Operators::tables(frame, bottom, view, &workers, chosen);
        } else {
            Operators::tables(frame, inner, view, &workers, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MAX_SHAPES_PER_OPERATOR;

    /// The bound the pane states is the one both recorders keep: each says it in its own language.
    #[test]
    fn the_shapes_kept_per_operator_are_the_recorders_own_bound() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for (file, declared) in [
            (
                "worker/csrc/operators.cpp",
                "constexpr size_t kMaxShapes = ",
            ),
            ("src/workers/pytorch/golow_operators.py", "MAX_SHAPES = "),
        ] {
            let source = std::fs::read_to_string(root.join(file)).unwrap();
            let bound: Vec<usize> = source
                .lines()
                .filter_map(|line| line.trim().strip_prefix(declared))
                .map(|rest| {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().unwrap()
                })
                .collect();
            assert_eq!(bound, [MAX_SHAPES_PER_OPERATOR], "{file}");
        }
    }
}
