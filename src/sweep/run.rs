//! Runs a sweep's cells one after another, each a headless session like `golow run`'s (same preparation, schedule
//! and recording), and after each cell rewrites the results and figures, so a sweep stopped at any point keeps
//! every finished cell.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use golow_protocol::event::{Body, Record};
use tokio::sync::mpsc::UnboundedSender;

use super::{Cell, RESULTS_CSV, RESULTS_JSON, Results, Row, RowStatus};
use crate::channels::{Control, Notifier, ViewChannel};
use crate::session::{Observer, OpenError, Plan, PrepareError, RecordTo, Session};
use crate::state::WorkerStatus;
use crate::store::Store;

/// What a running sweep tells whoever follows it.
pub enum SweepUpdate {
    /// A cell starts.
    Started(Cell),
    /// A worker of the running cell took a step.
    Step,
    /// The cell ended with this verdict ("ok", "pytorch oom", …); the results now hold its rows.
    Ended(String, Results),
    /// The sweep could not go on (its results could not be written, say).
    Failed(String),
}

/// Who follows a sweep: the progress bar of a headless sweep, or the sweep view. Records of the running cell
/// reach it as to any session observer.
pub trait Reporter: Observer + Send {
    fn start_cell(&mut self, cell: Cell);
    /// The cell's verdict ("ok", "pytorch oom", …) and the results with its rows.
    fn end_cell(&mut self, verdict: &str, results: &Results);
}

/// Lets another thread (the sweep view) stop a sweep: the running cell's workers, and every cell after it.
#[derive(Default)]
pub struct StopHandle {
    requested: AtomicBool,
    running: Mutex<Option<UnboundedSender<Control>>>,
}

impl StopHandle {
    pub fn stop(&self) {
        self.requested.store(true, Ordering::SeqCst);
        if let Some(controls) = self.running.lock().ok().and_then(|r| r.clone()) {
            let _ = controls.send(Control::StopAll);
        }
    }

    fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
pub struct Sweep {
    /// The session every cell runs; each cell sets its batch size and resolution.
    pub plan: Plan,
    pub cells: Vec<Cell>,
    pub dir: PathBuf,
    pub interval: Duration,
    pub command_line: Vec<String>,
    /// What each cell's session folds into, one after another; `--metrics-addr`'s endpoint serves the running cell
    /// from it.
    pub store: Store,
    /// Sessions per cell (`--repeat`).
    pub repeat: u32,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Finished,
    /// Ctrl-C stopped a cell; it is not in the results and runs again on `--resume`.
    Interrupted,
}

/// What a cell is told by its results: `ok`, or which implementations ran out of memory or failed.
fn verdict(rows: &[Row]) -> String {
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.status != RowStatus::Ok)
        .map(|r| {
            let status = if r.status == RowStatus::Oom {
                "oom"
            } else {
                "failed"
            };
            format!("{} {status}", r.implementation)
        })
        .collect();
    if bad.is_empty() {
        "ok".into()
    } else {
        bad.join(", ")
    }
}

/// The cells `results` does not have yet, in order.
pub fn todo(sweep: &Sweep, results: &Results) -> Vec<Cell> {
    sweep
        .cells
        .iter()
        .copied()
        .filter(|&c| !results.has(c))
        .collect()
}

/// Runs every cell `results` does not have yet, saving after each.
pub fn run(
    sweep: &Sweep,
    results: &mut Results,
    reporter: &mut dyn Reporter,
    stop: &StopHandle,
) -> Result<Outcome, String> {
    std::fs::create_dir_all(sweep.dir.join("cells"))
        .map_err(|e| format!("cannot create {}: {e}", sweep.dir.join("cells").display()))?;
    save(&sweep.dir, results)?;
    // Between cells too, SIGTERM and SIGHUP end the sweep as q does, not golow at once.
    let _catching = crate::termination::catch();
    for cell in todo(sweep, results) {
        if stop.requested() || crate::termination::received().is_some() {
            return Ok(Outcome::Interrupted);
        }
        reporter.start_cell(cell);
        let Some(rows) = run_cell(sweep, cell, reporter, stop)? else {
            return Ok(Outcome::Interrupted);
        };
        let verdict = verdict(&rows);
        results.record(cell, rows);
        save(&sweep.dir, results)?;
        reporter.end_cell(&verdict, results);
    }
    Ok(Outcome::Finished)
}

/// A sweep running on a thread of its own, for the sweep view; `stop` ends it early.
pub struct Running {
    pub stop: Arc<StopHandle>,
    thread: JoinHandle<(Result<Outcome, String>, Results)>,
}

impl Running {
    /// Waits for the sweep's end: how it ended, and its results.
    pub fn finish(self) -> std::io::Result<(Result<Outcome, String>, Results)> {
        self.thread
            .join()
            .map_err(|_| std::io::Error::other("the sweep thread panicked"))
    }
}

/// Starts [`run`] on its own thread; what happens comes out of the returned channel, which disconnects when the
/// sweep has ended, and `notifier` notifies when something was sent (steps at the session's tick).
pub fn start(
    sweep: Sweep,
    mut results: Results,
    notifier: Notifier,
) -> std::io::Result<(Running, mpsc::Receiver<SweepUpdate>)> {
    let stop = Arc::new(StopHandle::default());
    let (feed, incoming) = ViewChannel::channel(notifier);
    let stopper = stop.clone();
    let thread = std::thread::Builder::new()
        .name("golow-sweep".into())
        .spawn(move || {
            let mut forward = Forward(feed);
            let outcome = run(&sweep, &mut results, &mut forward, &stopper);
            if let Err(why) = &outcome {
                forward.0.send_now(SweepUpdate::Failed(why.clone()));
            }
            // Dropping the feed disconnects the channel and notifies: the view hears that the sweep ended.
            drop(forward);
            (outcome, results)
        })?;
    Ok((Running { stop, thread }, incoming))
}

/// Tells the sweep view what happens: cells at once, steps at the session's tick.
struct Forward(ViewChannel<SweepUpdate>);

impl Observer for Forward {
    fn on_record(&mut self, record: &Record) {
        if matches!(record.body, Body::Step(_)) {
            self.0.send_at_tick(SweepUpdate::Step);
        }
    }

    fn tick(&mut self) {
        self.0.tick();
    }
}

impl Reporter for Forward {
    fn start_cell(&mut self, cell: Cell) {
        self.0.send_now(SweepUpdate::Started(cell));
    }

    fn end_cell(&mut self, verdict: &str, results: &Results) {
        self.0
            .send_now(SweepUpdate::Ended(verdict.to_string(), results.clone()));
    }
}

/// One cell's rows: of its one session, or with `--repeat` of its sessions one after another, each implementation's
/// taken across them; `None` when the user stopped it.
fn run_cell(
    sweep: &Sweep,
    cell: Cell,
    reporter: &mut dyn Reporter,
    stop: &StopHandle,
) -> Result<Option<Vec<Row>>, String> {
    let mut sessions: Vec<Vec<Row>> = Vec::new();
    for k in 1..=sweep.repeat {
        let Some(rows) = run_session(sweep, cell, k, reporter, stop)? else {
            return Ok(None);
        };
        // A cell that could not even start would not on a second try either.
        let unstarted = rows.iter().all(|r| r.recording.is_none());
        sessions.push(rows);
        if unstarted {
            break;
        }
    }
    if sessions.len() == 1 {
        return Ok(sessions.pop());
    }
    let mut names: Vec<&str> = Vec::new();
    for row in sessions.iter().flatten() {
        if !names.contains(&row.implementation.as_str()) {
            names.push(&row.implementation);
        }
    }
    let rows = names
        .iter()
        .filter_map(|name| {
            let each: Vec<Row> = sessions
                .iter()
                .flatten()
                .filter(|r| r.implementation == *name)
                .cloned()
                .collect();
            Row::across(&each)
        })
        .collect();
    Ok(Some(rows))
}

/// The rows of the cell's session `k`; `None` when the user stopped it.
fn run_session(
    sweep: &Sweep,
    cell: Cell,
    k: u32,
    mut reporter: &mut dyn Reporter,
    stop: &StopHandle,
) -> Result<Option<Vec<Row>>, String> {
    let mut plan = sweep.plan.clone();
    plan.session.batch_size = cell.batch_size;
    plan.session.resolution = cell.resolution;
    let relative = cell.recording(k, sweep.repeat);
    let path = sweep.dir.join(&relative);
    // Only an unfinished cell leaves its recording behind; its rerun replaces it.
    remove_stale(&path)?;
    // The sweep's progress already says which cell is being prepared.
    let session = match Session::open(
        &plan,
        &RecordTo::Path(path.clone()),
        sweep.command_line.clone(),
        sweep.interval,
        &mut |_| {},
    ) {
        Ok(session) => session,
        // A cell that cannot even be prepared (a batch larger than the split, say) is a failed cell, not a failed
        // sweep.
        Err(OpenError::Prepare(PrepareError::BadInput(why) | PrepareError::Setup(why))) => {
            return Ok(Some(Row::unstarted(cell, &plan.session.workers, &why)));
        }
        Err(OpenError::Recording(why)) => return Err(why),
    };
    let (controls, control_rx) = tokio::sync::mpsc::unbounded_channel();
    if let Ok(mut running) = stop.running.lock() {
        *running = Some(controls);
    }
    // A stop asked for between cells reaches this cell as soon as its hub listens.
    if stop.requested() {
        stop.stop();
    }
    let finished = session.run(&sweep.store, &mut reporter, control_rx);
    if let Ok(mut running) = stop.running.lock() {
        *running = None;
    }
    if let Some(recorded) = finished.recorded {
        recorded.map_err(|e| format!("the recording {} failed: {e}", path.display()))?;
    }
    let summary = finished.summary?;
    if summary
        .workers
        .iter()
        .any(|w| w.status == WorkerStatus::Stopped)
    {
        return Ok(None);
    }
    Ok(Some(Row::from_summary(cell, &summary, &relative)))
}

fn remove_stale(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot replace {}: {e}", path.display())),
    }
}

/// Results as JSON and CSV, and the figures, each file replaced whole.
pub fn save(dir: &Path, results: &Results) -> Result<(), String> {
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        crate::output_files::write_atomically(&path, |file| {
            std::io::Write::write_all(file, text.as_bytes())
        })
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write(RESULTS_JSON, results.to_json())?;
    write(RESULTS_CSV, results.to_csv())?;
    super::figures::write_all(dir, results)
}
