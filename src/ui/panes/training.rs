//! Training progress: loss per step, and accuracy (a moving average of batch accuracy, and the eval
//! accuracy at each epoch's end).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::state::Series;
use crate::ui::changes::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::render;
use crate::ui::view::View;

pub struct Training;

/// Batch accuracy is noisy at small batch sizes; the chart shows its mean over this many steps.
const SMOOTHING: usize = 20;

fn smoothed(series: &Series, from: f64, to: f64) -> Series {
    let points = series.window(from, to);
    let mut out = Series::with_capacity(points.len().max(1));
    for (i, &(t, _)) in points.iter().enumerate() {
        let start = i.saturating_sub(SMOOTHING - 1);
        let slice = &points[start..=i];
        out.push(
            t,
            slice.iter().map(|&(_, v)| v).sum::<f64>() / slice.len() as f64,
        );
    }
    out
}

impl Pane for Training {
    fn title(&self) -> &'static str {
        " training: loss and accuracy "
    }

    fn shows(&self) -> Changes {
        Changes::STEPS
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let inner = view.framed(frame, area, self.title());
        let workers = &view.state.workers;
        let [plots, numbers] = Layout::vertical([
            Constraint::Min(3),
            Constraint::Length(workers.len() as u16 + 1),
        ])
        .areas(inner);
        let [loss_area, accuracy_area] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(plots);
        let loss: Vec<ChartLine> = workers
            .iter()
            .map(|w| ChartLine {
                color: view.color(&w.name),
                series: &w.series.loss,
            })
            .collect();
        chart::draw(frame, loss_area, view, &loss, |v| format!("{v:.2}"), None);
        let w = view.window;
        let smooth: Vec<Series> = workers
            .iter()
            .map(|wk| smoothed(&wk.series.accuracy, w.from, w.to))
            .collect();
        let accuracy: Vec<ChartLine> = workers
            .iter()
            .zip(&smooth)
            .map(|(wk, s)| ChartLine {
                color: view.color(&wk.name),
                series: s,
            })
            .collect();
        chart::draw(
            frame,
            accuracy_area,
            view,
            &accuracy,
            |v| format!("{:.0}%", v * 100.0),
            Some(1.0),
        );
        let mut text = vec![Line::styled(
            format!(
                "{:<12} {:>6} {:>8} {:>9} {:>9}",
                "", "epoch", "loss", "train acc", "eval acc"
            ),
            view.muted(),
        )];
        for wk in workers {
            let pct = |v: Option<f64>| v.map_or("-".into(), |a| format!("{:.1}%", a * 100.0));
            let epoch = wk
                .last_step
                .as_ref()
                .map_or("-".into(), |s| s.epoch.to_string());
            let loss = wk
                .last_step
                .as_ref()
                .map_or("-".into(), |s| format!("{:.4}", s.loss));
            let train = wk.last_epoch.as_ref().and_then(|e| e.train_accuracy);
            let eval = wk.series.eval_accuracy.last().map(|(_, v)| v);
            text.push(Line::from(vec![
                name(view, &wk.name, 12),
                Span::styled(
                    format!(" {epoch:>6} {loss:>8} {:>9} {:>9}", pct(train), pct(eval)),
                    view.text(),
                ),
            ]));
        }
        render::lines(frame, numbers, &text);
    }
}
