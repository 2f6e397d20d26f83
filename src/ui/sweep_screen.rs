//! The sweep view on the terminal: a running sweep reports its cells and steps here and this view keeps the sweep
//! view up to date; `q` stops the running cell and the sweep (it resumes with `--resume`). A recorded sweep
//! (`golow replay DIR`) is the same view with nothing running.

use std::io;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;

use super::event_loop::{self, FRAME, FullScreen, Wakes};
use super::input::Input;
use super::keys::{self, Command};
use super::sweep_charts::SweepView;
use crate::sweep::run::StopHandle;
use crate::sweep::run::SweepUpdate;
use crate::sweep::tracker::Tracker;

/// The clock in the status line moves even when nothing else does.
const CLOCK: Duration = Duration::from_secs(1);

/// Shows a running sweep until it ends and the user quits, or the user stops it: `updates` come from the sweep
/// (and disconnect when it ends), which notifies `wakes`' notifier; `stop` ends it early.
pub fn run(
    view: SweepView,
    tracker: Tracker,
    updates: Receiver<SweepUpdate>,
    stop: Arc<StopHandle>,
    wakes: Wakes,
) -> io::Result<()> {
    let mut running = Running {
        view,
        tracker,
        updates: Some(updates),
        stop,
        stopping: false,
        failed: None,
        clock: Instant::now(),
    };
    event_loop::run(&mut running, wakes, FRAME)
}

/// Shows a recorded sweep until the user quits.
pub fn show(mut view: SweepView, dir: &std::path::Path) -> io::Result<()> {
    view.finish(&format!("recorded sweep {}", dir.display()));
    event_loop::run(&mut Recorded(view), Wakes::default(), FRAME)
}

struct Running {
    view: SweepView,
    tracker: Tracker,
    /// `None` once the sweep has ended.
    updates: Option<Receiver<SweepUpdate>>,
    stop: Arc<StopHandle>,
    stopping: bool,
    failed: Option<String>,
    /// When the status line last moved.
    clock: Instant,
}

impl FullScreen for Running {
    fn update(&mut self) -> bool {
        let mut changed = false;
        while let Some(updates) = &self.updates {
            let update = match updates.try_recv() {
                Ok(update) => update,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.updates = None;
                    let how = match &self.failed {
                        Some(why) => format!("the sweep failed: {why}"),
                        None => "the sweep has ended".to_string(),
                    };
                    self.view.finish(&how);
                    changed = true;
                    break;
                }
            };
            changed = true;
            match update {
                SweepUpdate::Started(cell) => self.tracker.start_cell(cell),
                SweepUpdate::Step => self.tracker.count_step(),
                SweepUpdate::Failed(why) => self.failed = Some(why),
                SweepUpdate::Ended(verdict, results) => {
                    let ended = self.tracker.end_cell(&verdict).unwrap_or(verdict);
                    self.view.cell_ended(ended, results);
                }
            }
        }
        if self.updates.is_some() {
            self.view.set_status(if self.stopping {
                "stopping the running cell…".into()
            } else {
                self.tracker.line()
            });
        }
        if self.clock.elapsed() >= CLOCK {
            self.clock = Instant::now();
            changed = true;
        }
        changed
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        self.view.draw(frame);
        vec![frame.area()]
    }

    fn on_input(&mut self, input: Input) -> bool {
        let Input::Key(key) = input else { return true };
        if self.view.on_key(&key) {
            return true;
        }
        if keys::command(self.view.keys_view(), &key) != Some(Command::Quit) {
            return true;
        }
        if self.updates.is_none() {
            return false;
        }
        self.stopping = true;
        self.stop.stop();
        true
    }

    fn next_update(&self) -> Option<Instant> {
        self.updates.as_ref().map(|_| self.clock + CLOCK)
    }

    /// A stopped sweep closes the view by itself once its running cell has ended.
    fn done(&self) -> bool {
        self.stopping && self.updates.is_none()
    }

    /// As q does: no further cell starts, and the view closes once the running one has ended.
    fn on_termination(&mut self) -> bool {
        if self.updates.is_none() {
            return true;
        }
        self.stopping = true;
        self.stop.stop();
        false
    }
}

struct Recorded(SweepView);

impl FullScreen for Recorded {
    fn update(&mut self) -> bool {
        false
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        self.0.draw(frame);
        vec![frame.area()]
    }

    fn on_input(&mut self, input: Input) -> bool {
        match input {
            Input::Key(key) => {
                self.0.on_key(&key)
                    || keys::command(self.0.keys_view(), &key) != Some(Command::Quit)
            }
            Input::Mouse(_) | Input::Resize(..) => true,
        }
    }
}
