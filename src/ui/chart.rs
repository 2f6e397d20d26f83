//! One line chart per metric, one line per worker, over the view's time window.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph};

use super::view::View;
use crate::state::Series;

pub struct Line<'a> {
    pub color: Color,
    pub series: &'a Series,
}

/// Draws `lines` in `area`; `y_label` formats the y axis; `y_max` fixes the top (else the data's max).
pub fn draw(
    frame: &mut Frame,
    area: Rect,
    view: &View,
    lines: &[Line],
    y_label: fn(f64) -> String,
    y_max: Option<f64>,
) {
    let w = view.window;
    let points: Vec<(Color, Vec<(f64, f64)>)> = lines
        .iter()
        .map(|l| (l.color, l.series.window(w.from, w.to)))
        .collect();
    if points.iter().all(|(_, p)| p.is_empty()) {
        frame.render_widget(
            Paragraph::new(Span::styled("no readings in this window yet", view.muted())),
            area,
        );
        return;
    }
    let top = y_max.unwrap_or_else(|| {
        let max = points
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(_, v)| v))
            .fold(0.0, f64::max);
        if max > 0.0 { max * 1.1 } else { 1.0 }
    });
    let datasets = points
        .iter()
        .map(|(color, data)| {
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(*color))
                .data(data)
        })
        .collect();
    let axis = Style::default().fg(view.theme.muted);
    let chart = Chart::new(datasets)
        .style(Style::default().bg(view.theme.background))
        .x_axis(
            Axis::default()
                .style(axis)
                .bounds([w.from, w.to])
                .labels([format!("{:.0}s", w.from), format!("{:.0}s", w.to)]),
        )
        .y_axis(
            Axis::default()
                .style(axis)
                .bounds([0.0, top])
                .labels(["0".to_string(), y_label(top)]),
        );
    frame.render_widget(chart, area);
}
