//! A headless run's progress on stderr, a line per worker: redrawn in place on a terminal (indicatif), a line per
//! tenth of a worker's run otherwise. It follows the session record by record, reading the state the hub's fold made
//! of each under the store's lock and writing what it read once the lock is released: a stderr nobody reads holds
//! up the session's thread, never a view or a scrape.

use std::time::{Duration, Instant};

use golow_protocol::event::{Body, Record};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::session::Observer;
use crate::state::{Activity, State, WorkerState};

/// A terminal's lines are redrawn at most this often (indicatif's limit), and made anew at most this often (and
/// at once when a worker ends); a line whose text is unchanged (a /proc reading shows on none) is not redrawn at all.
/// Twice a second is as often as a line can be read, and each redraw wakes the terminal while the workers run.
const REDRAW_HZ: u8 = 2;
const REDRAW: Duration = Duration::from_millis(500);
const BAR_WIDTH: usize = 24;

pub struct Progress {
    /// On a terminal: a line per worker, redrawn in place.
    lines: Option<(MultiProgress, Vec<ProgressBar>)>,
    /// The text each worker's line was last given.
    shown: Vec<String>,
    /// When the terminal's lines were last made.
    last_redraw: Option<Instant>,
    /// Otherwise: the tenth of its run each worker was last reported at.
    reported_tenths: Vec<u64>,
    /// Which workers' notice of no progress was printed (once each time they stall).
    stall_told: Vec<bool>,
    /// Whether what `--cmd` workers print is passed through, prefixed with their names.
    pass_output: bool,
    /// Whether the machine was last said to be busy (other processes taking a share of the CPUs).
    busy_told: bool,
    /// Which workers were said to be input-bound (once each).
    input_bound_told: Vec<bool>,
    /// What the latest record gave to show, read from the state under the store's lock and written once it is
    /// released: stderr may be a pipe nobody reads.
    pending: Vec<Shown>,
}

/// Something to write on stderr.
enum Shown {
    /// A line of its own (above the workers' lines on a terminal).
    Line(String),
    /// A worker's line on a terminal, redrawn in place with this text.
    WorkerLine(usize, String),
}

impl Progress {
    /// `pass_output`: print what `--cmd` workers print (and what golow says of an attached one), each line after its
    /// worker's name.
    pub fn new(tty: bool, pass_output: bool) -> Progress {
        let mut progress =
            Progress::drawing_to(tty.then(|| ProgressDrawTarget::stderr_with_hz(REDRAW_HZ)));
        progress.pass_output = pass_output;
        progress
    }

    /// Lines redrawn in place on `terminal`, or a line per tenth without one.
    fn drawing_to(terminal: Option<ProgressDrawTarget>) -> Progress {
        let lines = terminal.map(|target| (MultiProgress::with_draw_target(target), Vec::new()));
        Progress {
            lines,
            shown: Vec::new(),
            last_redraw: None,
            reported_tenths: Vec::new(),
            stall_told: Vec::new(),
            pass_output: false,
            busy_told: false,
            input_bound_told: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// A line of its own above the workers' lines, once the store's lock is released.
    fn say(&mut self, line: &str) {
        let line = golow_protocol::text::printable(line).into_owned();
        self.pending.push(Shown::Line(line));
    }

    /// Writes what the latest record gave to show.
    fn show_pending(&mut self) {
        for shown in std::mem::take(&mut self.pending) {
            match (shown, &mut self.lines) {
                (Shown::Line(line), Some((multi, _))) => {
                    let _ = multi.println(line);
                }
                // A stderr nobody reads any more (closed, a full pipe's reader gone) ends no session.
                (Shown::Line(line), None) => {
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        format!("{line}\n").as_bytes(),
                    );
                }
                (Shown::WorkerLine(i, text), Some((multi, bars))) => {
                    while bars.len() <= i {
                        let style =
                            ProgressStyle::with_template("{msg}").expect("a plain template");
                        bars.push(multi.add(ProgressBar::no_length().with_style(style)));
                    }
                    bars[i].set_message(text);
                }
                (Shown::WorkerLine(..), None) => {}
            }
        }
    }

    /// Says once, each time a worker stalls, that it shows no progress, and why where golow knows.
    fn tell_stalls(&mut self, state: &State) {
        self.stall_told.resize(state.workers.len(), false);
        let mut notices = Vec::new();
        for (i, w) in state.workers.iter().enumerate() {
            let stalled = state.stalled_for_s(w);
            if stalled.is_some() && !self.stall_told[i] {
                notices.push(stall_notice(state, w));
            }
            self.stall_told[i] = stalled.is_some();
        }
        for notice in notices {
            self.say(&notice);
        }
    }

    /// Says once of each `--cmd` worker that it is input-bound, with what would help, when its latest steps are.
    fn tell_input_bound(&mut self, state: &State) {
        self.input_bound_told.resize(state.workers.len(), false);
        let mut notices = Vec::new();
        for (told, w) in self.input_bound_told.iter_mut().zip(&state.workers) {
            if *told {
                continue;
            }
            let Some(phases) = w.script.as_ref().map(|s| &s.phases) else {
                continue;
            };
            if let Some(bound) = phases.input_bound_now() {
                *told = true;
                notices.push(format!("{}: {}", w.name, phases.input_bound_notice(bound)));
            }
        }
        for notice in notices {
            self.say(&notice);
        }
    }

    /// Says when other processes start taking a share of the CPUs, and when they stop: times measured meanwhile
    /// are not a quiet machine's.
    fn tell_busy(&mut self, state: &State) {
        let busy = state.machine.busy_now();
        if busy.is_some() == self.busy_told {
            return;
        }
        self.busy_told = busy.is_some();
        self.say(&busy_notice(busy));
    }

    fn redraw(&mut self, state: &State) {
        self.last_redraw = Some(Instant::now());
        let total = total(state);
        for (i, w) in state.workers.iter().enumerate() {
            if i == self.shown.len() {
                self.shown.push(String::new());
            }
            let text = line(state, w, total);
            if text != self.shown[i] {
                self.shown[i].clone_from(&text);
                self.pending.push(Shown::WorkerLine(i, text));
            }
        }
    }

    fn report_tenths(&mut self, state: &State) {
        let total = total(state);
        self.reported_tenths.resize(state.workers.len(), 0);
        for (i, w) in state.workers.iter().enumerate() {
            // Past the last tenth once the process ended, so its final status gets a line too.
            let tenth = if w.activity().is_over() {
                11
            } else if w.hello.is_some() && total > 0 {
                (w.steps * 10) / total
            } else {
                0
            };
            if tenth > self.reported_tenths[i] {
                self.reported_tenths[i] = tenth;
                self.pending.push(Shown::Line(line(state, w, total)));
            }
        }
    }
}

/// The steps each built-in worker is to run (none for `--cmd` workers, which run until they end).
fn total(state: &State) -> u64 {
    state.session.as_ref().map_or(0, |s| s.steps)
}

/// What is said when the machine becomes busy (other processes' share of the CPUs) or quiet again.
fn busy_notice(busy: Option<f64>) -> String {
    match busy {
        Some(others) => format!(
            "golow: other processes are using {others:.0}% of the CPUs: times measured now are not a quiet machine's"
        ),
        None => format!(
            "golow: the machine is quiet again (other processes under {:.0}% of the CPUs)",
            crate::state::conditions::BUSY_OTHERS_PERCENT
        ),
    }
}

/// What a worker that shows no progress is told.
fn stall_notice(state: &State, w: &WorkerState) -> String {
    let quiet = state.stalled_for_s(w).unwrap_or(0.0);
    let what = if w.steps > 0 {
        format!("no step for {quiet:.0} s")
    } else {
        format!("no step in {quiet:.0} s")
    };
    match state.unmeasured(w) {
        Some(why) => format!("golow: {}: {what} ({why} so far)", w.name),
        None => format!("golow: {}: {what}", w.name),
    }
}

fn line(state: &State, w: &WorkerState, total: u64) -> String {
    let passes = w.script.as_ref().map_or(0, |s| s.forward.passes);
    // A `--cmd` worker runs until it ends: its step count has no known total.
    let progress = if w.hello.is_some() && total > 0 {
        let filled = (((w.steps as usize) * BAR_WIDTH) / (total as usize)).min(BAR_WIDTH);
        let bar = format!("{}{}", "#".repeat(filled), ".".repeat(BAR_WIDTH - filled));
        format!("[{bar}] {:>6}/{total:<6}", w.steps)
    } else if w.steps == 0 && passes > 0 {
        format!("{:>26} {:<6}", format!("{passes} forward passes"), "")
    } else {
        format!("{:>26} {:<6}", format!("{} steps", w.steps), "")
    };
    let stalled = state
        .stalled_for_s(w)
        .map(|quiet| format!("no step for {quiet:.0} s"));
    let status = match w.activity() {
        Activity::Stopped => "stopped",
        Activity::Done => "done",
        Activity::Failed => "FAILED",
        Activity::Waiting => "waiting",
        Activity::Ended => "ended",
        Activity::Detached => "detached",
        Activity::Running if state.is_attached(w) && w.steps == 0 => "attached",
        Activity::Running if stalled.is_some() => stalled.as_deref().unwrap_or_default(),
        Activity::Running if state.compiling_for_s(w).is_some() => "compiling",
        Activity::Running if w.steps == 0 && passes == 0 => "loading",
        Activity::Running => "running",
    };
    let p50 = w
        .sample_time
        .percentiles()
        .map(|p| format!("{:8.3} ms/sample", p.p50))
        .unwrap_or_else(|| format!("{:>17}", "-"));
    let loss = w
        .last_loss()
        .map(|loss| format!("loss {}", super::words::number(loss, 4)))
        .unwrap_or_default();
    let line = format!("{:<12} {progress} {p50}  {loss:<12} {status}", w.name);
    golow_protocol::text::printable(&line).into_owned()
}

impl Observer for Progress {
    fn read(&mut self, record: &Record, state: &State) {
        match (&record.body, &record.worker) {
            (Body::RecordingFailed { reason }, _) => self.say(&format!(
                "golow: the recording failed ({reason}); the session goes on unrecorded"
            )),
            (Body::Output { line, .. }, Some(worker)) if self.pass_output => {
                // A --cmd worker's output, or golow's own lines of an attached worker (whose output is its own).
                let passed = state.session.as_ref().is_some_and(|s| {
                    s.commands.contains_key(worker.as_str())
                        || s.attached.contains_key(worker.as_str())
                });
                if passed {
                    // Tabs stop where they would in the script's own terminal: from its line's start.
                    let line = golow_protocol::text::printable(line);
                    self.say(&format!("{worker} | {line}"));
                }
            }
            _ => {}
        }
        self.tell_stalls(state);
        if matches!(record.body, Body::OptimizerStep(_) | Body::BackwardPass(_)) {
            self.tell_input_bound(state);
        }
        if matches!(record.body, Body::MachineLoad { .. }) {
            self.tell_busy(state);
        }
        let ended = matches!(
            record.body,
            Body::WorkerExited { .. } | Body::AttachedEnd { .. } | Body::SessionEnd
        );
        match &self.lines {
            Some(_) if ended || self.last_redraw.is_none_or(|t| t.elapsed() >= REDRAW) => {
                self.redraw(state)
            }
            None if matches!(
                record.body,
                Body::Step(_) | Body::WorkerExited { .. } | Body::AttachedEnd { .. }
            ) =>
            {
                self.report_tenths(state)
            }
            Some(_) | None => {}
        }
    }

    fn on_record(&mut self, _: &Record) {
        self.show_pending();
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use golow_protocol::samples::every_body;

    use super::*;

    /// A terminal that counts the frames drawn on it.
    #[derive(Debug)]
    struct Counting(Arc<AtomicUsize>);

    impl indicatif::TermLike for Counting {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, _: &str) -> std::io::Result<()> {
            Ok(())
        }
        fn write_str(&self, _: &str) -> std::io::Result<()> {
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn body(pick: fn(&Body) -> bool) -> Body {
        every_body().into_iter().find(pick).expect("a sample body")
    }

    #[test]
    fn a_reading_that_changes_no_line_draws_nothing_and_a_step_does() {
        let frames = Arc::new(AtomicUsize::new(0));
        let terminal = ProgressDrawTarget::term_like(Box::new(Counting(frames.clone())));
        let mut progress = Progress::drawing_to(Some(terminal));
        let mut state = State::default();
        let mut feed = |body: Body| {
            // Past the 100 ms limit, every record may redraw.
            progress.last_redraw = None;
            let record = Record::new(0.0, Some("libtorch".into()), body);
            state.apply(&record);
            progress.read(&record, &state);
            progress.on_record(&record);
        };
        feed(body(|b| matches!(b, Body::SessionStart(_))));
        feed(body(|b| matches!(b, Body::WorkerStarted { .. })));
        feed(body(|b| matches!(b, Body::Hello(_))));
        feed(body(|b| matches!(b, Body::Step(_))));
        let drawn = frames.load(Ordering::SeqCst);
        assert!(drawn > 0, "the worker's line was drawn");
        for _ in 0..10 {
            feed(body(|b| matches!(b, Body::Process { .. })));
        }
        assert_eq!(
            frames.load(Ordering::SeqCst),
            drawn,
            "readings redrew lines that show none of them"
        );
        feed(body(|b| matches!(b, Body::Step(_))));
        assert!(
            frames.load(Ordering::SeqCst) > drawn,
            "a step moves the line"
        );
    }
}
