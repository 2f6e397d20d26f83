//! A progress bar per worker on stderr: redrawn in place on a terminal, a line per tenth otherwise.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::session::Observer;
use crate::state::{Activity, State, WorkerState};
use golow_protocol::event::{Body, Record};

const REDRAW: Duration = Duration::from_millis(100);
const BAR_WIDTH: usize = 24;

pub struct Progress<W: Write> {
    out: W,
    tty: bool,
    last_draw: Option<Instant>,
    lines_drawn: usize,
    reported_tenths: Vec<u64>,
}

impl<W: Write> Progress<W> {
    pub fn new(out: W, tty: bool) -> Self {
        Progress {
            out,
            tty,
            last_draw: None,
            lines_drawn: 0,
            reported_tenths: Vec::new(),
        }
    }

    fn redraw(&mut self, state: &State, total: u64) {
        let mut text = String::new();
        if self.lines_drawn > 0 {
            text.push_str(&format!("\x1b[{}A", self.lines_drawn));
        }
        for w in &state.workers {
            text.push_str("\x1b[2K");
            text.push_str(&line(w, total));
            text.push('\n');
        }
        self.lines_drawn = state.workers.len();
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
    }

    fn report_tenths(&mut self, state: &State, total: u64) {
        self.reported_tenths.resize(state.workers.len(), 0);
        for (i, w) in state.workers.iter().enumerate() {
            // Past the last tenth once the process ended, so its final status gets a line too.
            let tenth = if w.process_end.is_some() {
                11
            } else if w.hello.is_some() && total > 0 {
                (w.steps * 10) / total
            } else {
                0
            };
            if tenth > self.reported_tenths[i] {
                self.reported_tenths[i] = tenth;
                let _ = writeln!(self.out, "{}", line(w, total));
            }
        }
    }
}

fn line(w: &WorkerState, total: u64) -> String {
    // A `--cmd` worker runs until it ends: its step count has no known total.
    let progress = if w.hello.is_some() && total > 0 {
        let filled = (((w.steps as usize) * BAR_WIDTH) / (total as usize)).min(BAR_WIDTH);
        let bar = format!("{}{}", "#".repeat(filled), ".".repeat(BAR_WIDTH - filled));
        format!("[{bar}] {:>6}/{total:<6}", w.steps)
    } else {
        format!("{:>26} {:<6}", format!("{} steps", w.steps), "")
    };
    let status = match w.activity() {
        Activity::Stopped => "stopped",
        Activity::Done => "done",
        Activity::Failed => "FAILED",
        Activity::Waiting => "waiting",
        Activity::Running if w.steps == 0 => "loading",
        Activity::Running => "running",
    };
    let p50 = w
        .sample_time
        .percentiles()
        .map(|p| format!("{:8.3} ms/sample", p.p50))
        .unwrap_or_else(|| format!("{:>17}", "-"));
    let loss = w
        .last_step
        .as_ref()
        .map(|s| format!("loss {:.4}", s.loss))
        .unwrap_or_default();
    format!("{:<12} {progress} {p50}  {loss:<12} {status}", w.name)
}

impl<W: Write> Observer for Progress<W> {
    fn on_record(&mut self, record: &Record, state: &State) {
        let total = state.session.as_ref().map(|s| s.steps).unwrap_or(0);
        if !self.tty {
            if matches!(record.body, Body::Step(_) | Body::WorkerExited { .. }) {
                self.report_tenths(state, total);
            }
            return;
        }
        let urgent = matches!(record.body, Body::WorkerExited { .. } | Body::SessionEnd);
        if urgent || self.last_draw.is_none_or(|t| t.elapsed() >= REDRAW) {
            self.last_draw = Some(Instant::now());
            self.redraw(state, total);
        }
    }
}
