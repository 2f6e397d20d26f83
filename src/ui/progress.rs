//! A headless run's progress on stderr, a line per worker: redrawn in place on a terminal (indicatif), a line per
//! tenth of a worker's run otherwise. It folds the records it is handed into a state of its own, the one fold
//! every view uses.

use std::time::{Duration, Instant};

use golow_protocol::event::{Body, Record};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::contracts::Observer;
use crate::state::{Activity, State, WorkerState};

/// A terminal's lines are redrawn at most this often (indicatif's limit), and made anew at most this often.
const REDRAW_HZ: u8 = 10;
const REDRAW: Duration = Duration::from_millis(100);
const BAR_WIDTH: usize = 24;

pub struct Progress {
    state: State,
    /// On a terminal: a line per worker, redrawn in place.
    lines: Option<(MultiProgress, Vec<ProgressBar>)>,
    /// When the terminal's lines were last made.
    last_redraw: Option<Instant>,
    /// Otherwise: the tenth of its run each worker was last reported at.
    reported_tenths: Vec<u64>,
}

impl Progress {
    pub fn new(tty: bool) -> Progress {
        let lines = tty.then(|| {
            (
                MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(REDRAW_HZ)),
                Vec::new(),
            )
        });
        Progress {
            state: State::default(),
            lines,
            last_redraw: None,
            reported_tenths: Vec::new(),
        }
    }

    fn total(&self) -> u64 {
        self.state.session.as_ref().map_or(0, |s| s.steps)
    }

    fn redraw(&mut self) {
        self.last_redraw = Some(Instant::now());
        let total = self.total();
        let Some((multi, bars)) = self.lines.as_mut() else {
            return;
        };
        for (i, w) in self.state.workers.iter().enumerate() {
            if i == bars.len() {
                let style = ProgressStyle::with_template("{msg}").expect("a plain template");
                bars.push(multi.add(ProgressBar::no_length().with_style(style)));
            }
            bars[i].set_message(line(w, total));
        }
    }

    fn report_tenths(&mut self) {
        let total = self.total();
        self.reported_tenths.resize(self.state.workers.len(), 0);
        for (i, w) in self.state.workers.iter().enumerate() {
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
                eprintln!("{}", line(w, total));
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

impl Observer for Progress {
    fn on_record(&mut self, record: &Record) {
        self.state.apply(record);
        let ended = matches!(record.body, Body::WorkerExited { .. } | Body::SessionEnd);
        match &self.lines {
            Some(_) if ended || self.last_redraw.is_none_or(|t| t.elapsed() >= REDRAW) => {
                self.redraw()
            }
            None if matches!(record.body, Body::Step(_) | Body::WorkerExited { .. }) => {
                self.report_tenths()
            }
            Some(_) | None => {}
        }
    }
}

impl Drop for Progress {
    /// Leaves the last lines on the terminal for the summary that follows.
    fn drop(&mut self) {
        if let Some((_, bars)) = &self.lines {
            bars.iter().for_each(ProgressBar::abandon);
        }
    }
}
