//! The sweep view: the scaling curves of a sweep filling in as its cells finish (sample time, throughput, host and
//! GPU memory against batch size or resolution, one line per implementation), the cell running, and what the
//! finished cells said. It draws what it is given; the sweep runs elsewhere.

use std::collections::VecDeque;

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, BorderType, Borders, Chart, Dataset, GraphType, Paragraph};

use super::keys::{self, Axes, Command};
use super::render::fill;
use super::theme::Theme;
use super::view::worker_color;
use crate::sweep::{Axis as GridAxis, METRICS, Metric, Results, RowStatus};

const VERDICTS_KEPT: usize = 4;
pub struct SweepView {
    theme: Theme,
    results: Results,
    /// The progress line (cells, running cell, ETA), from whoever follows the sweep.
    status: String,
    verdicts: VecDeque<String>,
    x: GridAxis,
    /// Index of the value the other axis is held at.
    held: usize,
    finished: bool,
}

impl SweepView {
    pub fn new(theme: Theme, results: Results) -> SweepView {
        let x = if results.config.batch_sizes.len() == 1 && results.config.resolutions.len() > 1 {
            GridAxis::Resolution
        } else {
            GridAxis::BatchSize
        };
        SweepView {
            theme,
            results,
            status: String::new(),
            verdicts: VecDeque::new(),
            x,
            held: 0,
            finished: false,
        }
    }

    pub fn set_status(&mut self, status: String) {
        self.status = status;
    }

    pub fn cell_ended(&mut self, verdict: String, results: Results) {
        if self.verdicts.len() == VERDICTS_KEPT {
            self.verdicts.pop_front();
        }
        self.verdicts.push_back(verdict);
        self.results = results;
    }

    /// No more cells will run (all done, stopped, or a recorded sweep).
    pub fn finish(&mut self, how: &str) {
        self.finished = true;
        self.status = how.to_string();
    }

    /// The values along the x axis and those the other axis can be held at.
    fn axes(&self) -> (&[u32], &[u32]) {
        let c = &self.results.config;
        match self.x {
            GridAxis::BatchSize => (&c.batch_sizes, &c.resolutions),
            GridAxis::Resolution => (&c.resolutions, &c.batch_sizes),
        }
    }

    /// Which of the key map's views this is.
    pub fn keys_view(&self) -> keys::View {
        if self.finished {
            keys::View::SweepEnded
        } else {
            keys::View::Sweep
        }
    }

    /// The key map's axis keys (`x` switches the axis, `[`/`]` the value the other axis is held at); true when
    /// the key was one of them.
    pub fn on_key(&mut self, key: &KeyEvent) -> bool {
        let Some(Command::Axes(axes)) = keys::command(self.keys_view(), key) else {
            return false;
        };
        match axes {
            Axes::Switch => {
                self.x = match self.x {
                    GridAxis::BatchSize => GridAxis::Resolution,
                    GridAxis::Resolution => GridAxis::BatchSize,
                };
                self.held = 0;
            }
            Axes::Held { down: false } => {
                self.held = (self.held + 1).min(self.axes().1.len().saturating_sub(1))
            }
            Axes::Held { down: true } => self.held = self.held.saturating_sub(1),
        }
        true
    }

    fn block<'a>(&self, title: String) -> Block<'a> {
        Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(Style::default().fg(self.theme.border))
            .title(title)
            .title_style(
                Style::default()
                    .fg(self.theme.foreground)
                    .add_modifier(Modifier::BOLD),
            )
    }

    pub fn draw(&self, frame: &mut Frame) {
        let area = frame.area();
        let base = Style::default()
            .bg(self.theme.background)
            .fg(self.theme.foreground);
        fill(frame.buffer_mut(), area, base);
        let [header, charts, footer] = Layout::vertical([
            Constraint::Length(3),
            Constraint::Min(8),
            Constraint::Length(VERDICTS_KEPT as u16 + 3),
        ])
        .areas(area);
        self.draw_header(frame, header);
        let [top, bottom] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(charts);
        for (i, rect) in [top, bottom]
            .into_iter()
            .flat_map(|row| {
                Layout::horizontal([Constraint::Percentage(50); 2])
                    .split(row)
                    .to_vec()
            })
            .enumerate()
        {
            self.draw_metric(frame, rect, &METRICS[i]);
        }
        self.draw_footer(frame, footer);
    }

    fn draw_header(&self, frame: &mut Frame, area: Rect) {
        let c = &self.results.config;
        let (xs, held) = self.axes();
        let held_value = held
            .get(self.held.min(held.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0);
        let values: Vec<String> = xs.iter().map(u32::to_string).collect();
        let axis = match self.x {
            GridAxis::BatchSize => format!(
                "against batch size {} (log 2) at {held_value} px",
                values.join(" ")
            ),
            GridAxis::Resolution => format!(
                "against resolution {} (log 2) at batch {held_value}",
                values.join(" ")
            ),
        };
        let mode = c.mode.name();
        let text = vec![
            Line::from(vec![
                Span::styled(
                    " golow sweep ",
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::raw(format!(
                    "{} {mode} · {} · {} · {} steps ({} warm-up) · {} × {} cells · {axis}",
                    c.model.name(),
                    c.dataset,
                    c.device,
                    c.steps,
                    c.warmup,
                    xs.len(),
                    held.len(),
                )),
            ]),
            Line::styled(
                format!(" {}", self.status),
                Style::default().fg(self.theme.highlight),
            ),
        ];
        frame.render_widget(Paragraph::new(text), area);
    }

    fn draw_metric(&self, frame: &mut Frame, area: Rect, metric: &Metric) {
        let (xs, held) = self.axes();
        let Some(&held_value) = held.get(self.held.min(held.len().saturating_sub(1))) else {
            return;
        };
        let impls = &self.results.config.impls;
        let series: Vec<(String, Vec<(f64, f64)>)> = impls
            .iter()
            .map(|name| {
                let curve = self.results.curve(name, self.x, held_value, metric);
                let points = curve.into_iter().map(|(x, y)| (f64::from(x).log2(), y));
                (name.clone(), points.collect())
            })
            .collect();
        let block = self.block(format!(" {} ", metric.pane));
        let top = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        if top <= 0.0 {
            let inner = block.inner(area);
            frame.render_widget(block, area);
            frame.render_widget(
                Paragraph::new(Span::styled(
                    "no finished cell measured this",
                    Style::default().fg(self.theme.muted),
                )),
                inner,
            );
            return;
        }
        let datasets: Vec<Dataset> = series
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(name, points)| {
                Dataset::default()
                    .name(name.clone())
                    .marker(Marker::Braille)
                    .graph_type(GraphType::Line)
                    .style(Style::default().fg(worker_color(
                        &self.theme,
                        name,
                        impls.iter().map(String::as_str),
                    )))
                    .data(points)
            })
            .collect();
        let (lo, hi) = match (xs.first(), xs.last()) {
            (Some(&lo), Some(&hi)) if hi > lo => (f64::from(lo).log2(), f64::from(hi).log2()),
            (Some(&v), _) => (f64::from(v).log2() - 0.5, f64::from(v).log2() + 0.5),
            _ => (0.0, 1.0),
        };
        let muted = Style::default().fg(self.theme.muted);
        // ratatui places inner labels at fractions of the width that are not where log-spaced values fall, so only
        // the ends are labelled; the x axis is log 2 (the header names the values).
        let x_labels: Vec<Span> = match xs {
            [] => Vec::new(),
            [only] => vec![Span::styled(only.to_string(), muted)],
            [first, .., last] => vec![
                Span::styled(first.to_string(), muted),
                Span::styled(last.to_string(), muted),
            ],
        };
        let chart = Chart::new(datasets)
            .hidden_legend_constraints((Constraint::Percentage(50), Constraint::Percentage(50)))
            .block(block)
            .style(Style::default().fg(self.theme.foreground))
            .x_axis(
                Axis::default()
                    .bounds([lo, hi])
                    .labels(x_labels)
                    .style(muted),
            )
            .y_axis(
                Axis::default()
                    .bounds([0.0, top * 1.1])
                    .labels(vec![
                        Span::styled("0", muted),
                        Span::styled(format!("{:.*}", metric.decimals, top * 1.1), muted),
                    ])
                    .style(muted),
            );
        frame.render_widget(chart, area);
    }

    fn draw_footer(&self, frame: &mut Frame, area: Rect) {
        let mut lines: Vec<Line> = self
            .verdicts
            .iter()
            .map(|v| Line::styled(format!(" {v}"), Style::default().fg(self.theme.foreground)))
            .collect();
        let bad = self
            .results
            .rows
            .iter()
            .filter(|r| r.status != RowStatus::Ok)
            .count();
        if bad > 0 {
            lines.push(Line::styled(
                format!(" {bad} row(s) out of memory or failed: see results.csv"),
                Style::default().fg(self.theme.warning),
            ));
        }
        lines.push(Line::styled(
            keys::footer(self.keys_view()),
            Style::default().fg(self.theme.muted),
        ));
        frame.render_widget(
            Paragraph::new(lines).block(self.block(" cells ".into())),
            area,
        );
    }
}
