//! The sweep's TUI loop: the sweep runs on its own thread and reports cells and steps here; this thread keeps the
//! sweep view and draws it. `q` stops the running cell and the sweep (it resumes with `--resume`). A recorded sweep
//! (`golow replay DIR`) is the same view with nothing running.

use std::io;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::Rect;

use super::live::FRAME;
use super::sweep_view::SweepView;
use super::terminal;
use crate::session::Observer;
use crate::state::State;
use crate::sweep::progress::SweepProgress;
use crate::sweep::run::{self, Outcome, Reporter, StopHandle, Sweep};
use crate::sweep::{Cell, Results};
use golow_protocol::event::{Body, Record};

/// The clock in the status line moves even when nothing else does.
const CLOCK: Duration = Duration::from_secs(1);

enum Update {
    Started(Cell),
    Step,
    Ended(String, Results),
    /// The sweep could not go on (its results could not be written, say).
    Failed(String),
}

struct Forward(mpsc::Sender<Update>);

impl Observer for Forward {
    fn on_record(&mut self, record: &Record, _state: &State) {
        if matches!(record.body, Body::Step(_)) {
            let _ = self.0.send(Update::Step);
        }
    }
}

impl Reporter for Forward {
    fn start_cell(&mut self, cell: Cell) {
        let _ = self.0.send(Update::Started(cell));
    }

    fn end_cell(&mut self, verdict: &str, results: &Results) {
        let _ = self
            .0
            .send(Update::Ended(verdict.to_string(), results.clone()));
    }
}

/// Runs the sweep under the sweep view until it ends and the user quits, or the user stops it.
pub fn run(
    sweep: Sweep,
    results: Results,
    view: SweepView,
    steps_per_worker: u64,
) -> io::Result<(Result<Outcome, String>, Results)> {
    let todo = run::todo(&sweep, &results);
    let mut progress = SweepProgress::new(
        io::sink(),
        false,
        &todo,
        results.config.impls.len(),
        steps_per_worker,
    );
    let stop = Arc::new(StopHandle::default());
    let (updates, incoming) = mpsc::channel();
    let stopper = stop.clone();
    let runner = std::thread::Builder::new()
        .name("golow-sweep".into())
        .spawn(move || {
            let mut results = results;
            let failures = updates.clone();
            let outcome = run::run(&sweep, &mut results, &mut Forward(updates), &stopper);
            if let Err(why) = &outcome {
                let _ = failures.send(Update::Failed(why.clone()));
            }
            (outcome, results)
        })?;
    let mut view = view;
    let stopping = std::cell::Cell::new(false);
    let mut failed = None;
    show(
        &mut view,
        |view| {
            let mut changed = false;
            for update in incoming.try_iter() {
                changed = true;
                match update {
                    Update::Started(cell) => progress.start_cell(cell),
                    Update::Step => progress.count_step(),
                    Update::Failed(why) => failed = Some(why),
                    Update::Ended(verdict, results) => {
                        progress.end_cell(&verdict, &results);
                        view.cell_ended(progress.last_ended.take().unwrap_or(verdict), results);
                    }
                }
            }
            if runner.is_finished() {
                if stopping.get() {
                    return Tick::Quit;
                }
                match &failed {
                    Some(why) => view.finish(&format!("the sweep failed: {why}")),
                    None => view.finish("the sweep has ended"),
                }
            } else if stopping.get() {
                view.set_status("stopping the running cell…".into());
            } else {
                view.set_status(progress.line());
            }
            Tick::Go { changed }
        },
        |key| {
            if key == KeyCode::Char('q') && !runner.is_finished() {
                stopping.set(true);
                stop.stop();
                return false;
            }
            key == KeyCode::Char('q')
        },
    )?;
    let joined = runner
        .join()
        .map_err(|_| io::Error::other("the sweep thread panicked"))?;
    Ok(joined)
}

enum Tick {
    Go { changed: bool },
    Quit,
}

/// Shows a recorded sweep until the user quits.
pub fn replay(mut view: SweepView, dir: &std::path::Path) -> io::Result<()> {
    view.finish(&format!("recorded sweep {}", dir.display()));
    show(
        &mut view,
        |_| Tick::Go { changed: false },
        |key| key == KeyCode::Char('q'),
    )
}

/// The loop both share: `tick` brings the view up to date, `quit` says whether a key ends the loop.
fn show(
    view: &mut SweepView,
    mut tick: impl FnMut(&mut SweepView) -> Tick,
    mut quit: impl FnMut(KeyCode) -> bool,
) -> io::Result<()> {
    let (guard, mut terminal) = terminal::open()?;
    let mut last_draw: Option<Instant> = None;
    let mut dirty = true;
    loop {
        match tick(view) {
            Tick::Quit => break,
            Tick::Go { changed } => dirty |= changed,
        }
        if dirty || last_draw.is_none_or(|t| t.elapsed() >= CLOCK) {
            terminal.draw(|frame| {
                view.draw(frame);
                vec![frame.area()]
            })?;
            last_draw = Some(Instant::now());
            dirty = false;
        }
        if event::poll(FRAME)? {
            dirty = true;
            match event::read()? {
                Event::Key(key) if key.kind == KeyEventKind::Press => {
                    let ctrl_c = key.code == KeyCode::Char('c')
                        && key.modifiers.contains(event::KeyModifiers::CONTROL);
                    let code = if ctrl_c { KeyCode::Char('q') } else { key.code };
                    if !view.on_key(code) && quit(code) {
                        break;
                    }
                }
                Event::Resize(width, height) => terminal.resize(Rect::new(0, 0, width, height))?,
                _ => {}
            }
        }
    }
    drop(terminal);
    drop(guard);
    Ok(())
}
