//! The sweep's progress bar on stderr: cells done, the cell running and its steps, elapsed time and an ETA from the
//! work done so far (samples × pixels × steps), redrawn in place on a terminal, a line per cell otherwise.

use std::io::Write;
use std::time::{Duration, Instant};

use super::run::Reporter;
use super::{Cell, Results};
use crate::session::Observer;
use crate::state::State;
use golow_protocol::event::{Body, Record};

const REDRAW: Duration = Duration::from_millis(250);
const BAR_WIDTH: usize = 30;

pub struct SweepProgress<W: Write> {
    out: W,
    tty: bool,
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
    last_draw: Option<Instant>,
    /// What the latest cell's end said ("cell 2/4 batch 8 at 32 px: ok (0:14)").
    pub last_ended: Option<String>,
}

impl<W: Write> SweepProgress<W> {
    /// `cells` are the ones this invocation runs; `workers × steps` steps each.
    pub fn new(out: W, tty: bool, cells: &[Cell], workers: usize, steps: u64) -> Self {
        let steps_per_cell = (workers as u64 * steps).max(1);
        SweepProgress {
            out,
            tty,
            started: Instant::now(),
            steps_per_cell,
            total_work: cells.iter().map(Cell::work).sum::<f64>(),
            done_work: 0.0,
            cells_total: cells.len(),
            cells_done: 0,
            current: None,
            steps_seen: 0,
            last_draw: None,
            last_ended: None,
        }
    }

    /// Leaves the terminal's line clean for what follows.
    pub fn finish(&mut self) {
        if self.tty {
            let _ = writeln!(self.out, "\r\x1b[2K{}", self.line());
        }
    }
}

impl<W: Write + Send> Reporter for SweepProgress<W> {
    fn start_cell(&mut self, cell: Cell) {
        self.current = Some(cell);
        self.steps_seen = 0;
        self.draw();
    }

    fn end_cell(&mut self, verdict: &str, _results: &Results) {
        if let Some(cell) = self.current.take() {
            self.cells_done += 1;
            self.done_work += cell.work();
            if self.tty {
                let _ = write!(self.out, "\r\x1b[2K");
            }
            let ended = format!(
                "cell {}/{} batch {} at {} px: {verdict} ({})",
                self.cells_done,
                self.cells_total,
                cell.batch_size,
                cell.resolution,
                clock(self.started.elapsed())
            );
            let _ = writeln!(self.out, "golow: {ended}");
            self.last_ended = Some(ended);
        }
        self.draw();
    }
}

impl<W: Write> SweepProgress<W> {
    /// A step of the running cell, by any worker.
    pub fn count_step(&mut self) {
        self.steps_seen += 1;
    }

    /// Work done, the running cell counted by its share of steps.
    fn work_done(&self) -> f64 {
        let running = self.current.map_or(0.0, |c| {
            c.work()
                * (self.steps_seen.min(self.steps_per_cell) as f64 / self.steps_per_cell as f64)
        });
        self.done_work + running
    }

    fn draw(&mut self) {
        if !self.tty {
            return;
        }
        self.last_draw = Some(Instant::now());
        let _ = write!(self.out, "\r\x1b[2K{}", self.line());
        let _ = self.out.flush();
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

impl<W: Write> Observer for SweepProgress<W> {
    fn on_record(&mut self, record: &Record, _state: &State) {
        if matches!(record.body, Body::Step(_)) {
            self.count_step();
        }
    }

    fn tick(&mut self) {
        if self.last_draw.is_none_or(|t| t.elapsed() >= REDRAW) {
            self.draw();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_weighs_cells_by_their_work() {
        let cells = super::super::cells(&[8, 24], &[32]);
        let mut p = SweepProgress::new(Vec::new(), false, &cells, 2, 5);
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
        p.end_cell("ok", &Results::new(crate::sweep::tests::config()));
        assert!(p.line().contains("1/2 cells"));
        let printed = String::from_utf8(p.out.clone()).unwrap();
        assert!(
            printed.starts_with("golow: cell 1/2 batch 8 at 32 px: ok ("),
            "{printed}"
        );
    }
}
