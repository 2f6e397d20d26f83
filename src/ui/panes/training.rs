//! Training progress: loss per step, and accuracy (a moving average of batch accuracy, and the eval
//! accuracy at each epoch's end).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::{Pane, name};
use crate::state::Series;
use crate::store::Changes;
use crate::ui::chart::{self, Line as ChartLine};
use crate::ui::fit;
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
        let [plots, numbers] = chart::over_table(inner, workers.len() as u16 + 1);
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
        // Two empty charts side by side would each say so, cut where they meet: one notice says it for both.
        if chart::is_empty(&loss, view) && chart::is_empty(&accuracy, view) {
            chart::no_readings(frame, plots, view);
        } else {
            chart::draw(frame, loss_area, view, &loss, |v| format!("{v:.2}"), None);
            chart::draw(
                frame,
                accuracy_area,
                view,
                &accuracy,
                |v| format!("{:.0}%", v * 100.0),
                Some(1.0),
            );
        }
        let room = fit::room(inner.width).saturating_sub(12);
        let widths = [6, 8, 9, 9];
        let mut text = vec![Line::styled(
            format!(
                "{:<12}{}",
                "",
                fit::cells(&widths, &["epoch", "loss", "train acc", "eval acc"], room)
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
                .last_loss()
                .map_or("-".into(), |l| crate::console::words::number(l, 4));
            let train = wk.last_epoch.as_ref().and_then(|e| e.train_accuracy);
            let eval = wk.series.eval_accuracy.last().map(|(_, v)| v);
            let cells = [epoch, loss, pct(train), pct(eval)];
            text.push(Line::from(vec![
                name(view, &wk.name, 12),
                Span::styled(fit::cells(&widths, &cells, room), view.text()),
            ]));
        }
        fit::lines(frame, numbers, &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;

    /// The pane drawn on a terminal `width` wide, as text, row after row.
    fn drawn(state: &State, width: u16) -> String {
        super::super::drawn(&mut Training, state, width, 12)
    }

    #[test]
    fn a_pane_without_readings_says_so_once() {
        let mut state = State::default();
        state.apply(&golow_protocol::event::Record::new(
            0.0,
            Some("train".into()),
            golow_protocol::event::Body::WorkerStarted {
                pid: 1,
                command: vec!["sh".into()],
            },
        ));
        // Neither chart has readings: one notice across both, whole, not one cut off by the other.
        for width in [40, 50, 80, 160] {
            let text = drawn(&state, width);
            let notices = text.matches("no readings").count();
            assert_eq!(notices, 1, "width {width}:\n{text}");
            if width >= 80 {
                assert!(
                    text.contains("no readings in this window yet"),
                    "width {width}:\n{text}"
                );
            }
        }
        // A script that reports its loss but no accuracy: the loss is charted, and the accuracy's half alone says
        // it has nothing.
        for t in 1..=30 {
            state.workers[0]
                .series
                .loss
                .push(f64::from(t), 2.0 - f64::from(t) / 30.0);
        }
        for width in [50, 80, 160] {
            let text = drawn(&state, width);
            assert_eq!(
                text.matches("no readings").count(),
                1,
                "width {width}:\n{text}"
            );
            // The loss chart is drawn (its x axis), and the notice is in the accuracy's half, to its right.
            assert!(text.contains('└'), "width {width}:\n{text}");
            let row = text.lines().find(|l| l.contains("no readings")).unwrap();
            let column = row[..row.find("no readings").unwrap()].chars().count();
            assert!(
                column > usize::from(width) / 2 - 2,
                "width {width}:\n{text}"
            );
        }
    }
}
