//! How far a sweep has come: cells done, the cell running and its steps, elapsed time and an ETA from the work done
//! so far (samples × pixels × steps). The [`Tracker`] counts and words it; the sweep view shows its line, and a
//! headless sweep draws it on stderr ([`StderrProgress`]): redrawn in place on a terminal (indicatif), a line per
//! cell otherwise.

use std::time::{Duration, Instant};

use golow_protocol::event::{Body, Record};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::run::Reporter;
use super::{Cell, Results};
use crate::session::Observer;

/// A terminal's line is redrawn at most this often.
const REDRAW_HZ: u8 = 4;
const BAR_WIDTH: usize = 30;

pub struct Tracker {
    started: Instant,
    /// Steps of one cell, all workers together.
    steps_per_cell: u64,
    /// Work of every cell this invocation runs, and of the finished ones.
    total_work: f64,
    done_work: f64,
    cells_total: usize,
    cells_done: usize,
    current: Option<Cell>,
    steps_seen: u64,
}

impl Tracker {
    /// `cells` are the ones this invocation runs; `workers × steps` steps each.
    pub fn new(cells: &[Cell], workers: usize, steps: u64) -> Tracker {
        Tracker {
            started: Instant::now(),
            steps_per_cell: (workers as u64 * steps).max(1),
            total_work: cells.iter().map(Cell::work).sum::<f64>(),
            done_work: 0.0,
            cells_total: cells.len(),
            cells_done: 0,
            current: None,
            steps_seen: 0,
        }
    }

    pub fn start_cell(&mut self, cell: Cell) {
        self.current = Some(cell);
        self.steps_seen = 0;
    }

    /// A step of the running cell, by any worker.
    pub fn count_step(&mut self) {
        self.steps_seen += 1;
    }

    /// The running cell ended with `verdict`; returns what to say of it ("cell 2/4 batch 8 at 32 px: ok (0:14)").
    pub fn end_cell(&mut self, verdict: &str) -> Option<String> {
        let cell = self.current.take()?;
        self.cells_done += 1;
        self.done_work += cell.work();
        Some(format!(
            "cell {}/{} batch {} at {} px: {verdict} ({})",
            self.cells_done,
            self.cells_total,
            cell.batch_size,
            cell.resolution,
            clock(self.started.elapsed())
        ))
    }

    /// Work done, the running cell counted by its share of steps.
    fn work_done(&self) -> f64 {
        let running = self.current.map_or(0.0, |c| {
            c.work()
                * (self.steps_seen.min(self.steps_per_cell) as f64 / self.steps_per_cell as f64)
        });
        self.done_work + running
    }

    pub fn line(&self) -> String {
        let fraction = if self.total_work > 0.0 {
            (self.work_done() / self.total_work).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let filled = (fraction * BAR_WIDTH as f64).round() as usize;
        let elapsed = self.started.elapsed();
        let eta = if fraction > 0.0 && fraction < 1.0 {
            clock(elapsed.mul_f64((1.0 - fraction) / fraction))
        } else {
            "-".into()
        };
        let running = self.current.map_or(String::new(), |c| {
            format!(
                " · batch {} at {} px, step {}/{}",
                c.batch_size, c.resolution, self.steps_seen, self.steps_per_cell
            )
        });
        format!(
            "[{}{}] {}/{} cells{running} · {} elapsed · ETA {eta}",
            "#".repeat(filled),
            ".".repeat(BAR_WIDTH - filled),
            self.cells_done,
            self.cells_total,
            clock(elapsed),
        )
    }
}

fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// A headless sweep's progress on stderr: the tracker's line kept at the bottom of a terminal, and a line per
/// finished cell above it (the only lines when stderr is not a terminal).
pub struct StderrProgress {
    tracker: Tracker,
    /// On a terminal: the line redrawn in place.
    bar: Option<ProgressBar>,
}

impl StderrProgress {
    pub fn new(tracker: Tracker, tty: bool) -> StderrProgress {
        let bar = tty.then(|| {
            let target = ProgressDrawTarget::stderr_with_hz(REDRAW_HZ);
            let bar = ProgressBar::with_draw_target(None, target)
                .with_style(ProgressStyle::with_template("{msg}").expect("a plain template"));
            bar.set_message(tracker.line());
            bar
        });
        StderrProgress { tracker, bar }
    }

    fn redraw(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message(self.tracker.line());
        }
    }

    /// Leaves the last line on the terminal for what follows.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_with_message(self.tracker.line());
        }
    }
}

impl Reporter for StderrProgress {
    fn start_cell(&mut self, cell: Cell) {
        self.tracker.start_cell(cell);
        self.redraw();
    }

    fn end_cell(&mut self, verdict: &str, _results: &Results) {
        if let Some(ended) = self.tracker.end_cell(verdict) {
            let line = golow_protocol::text::printable(&format!("golow: {ended}")).into_owned();
            match &self.bar {
                Some(bar) => bar.println(line),
                None => eprintln!("{line}"),
            }
        }
        self.redraw();
    }
}

impl Observer for StderrProgress {
    fn on_record(&mut self, record: &Record) {
        if matches!(record.body, Body::Step(_)) {
            self.tracker.count_step();
        }
    }

    /// The line moves with the clock too; indicatif draws at most `REDRAW_HZ` times a second.
    fn tick(&mut self) {
        self.redraw();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_weighs_cells_by_their_work() {
        let cells = super::super::cells(&[8, 24], &[32]);
        let mut p = Tracker::new(&cells, 2, 5);
        assert!(
            p.line()
                .starts_with(&format!("[{}] 0/2 cells", ".".repeat(BAR_WIDTH)))
        );
        p.start_cell(cells[0]);
        p.steps_seen = 5;
        // Half of the small cell: 1/8 of the work.
        assert!(
            p.line()
                .contains(&format!("[{}{}]", "#".repeat(4), ".".repeat(26))),
            "{}",
            p.line()
        );
        let ended = p.end_cell("ok").unwrap();
        assert!(p.line().contains("1/2 cells"));
        assert!(
            ended.starts_with("cell 1/2 batch 8 at 32 px: ok ("),
            "{ended}"
        );
    }
}
