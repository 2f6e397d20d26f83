//! The live view: the session runs on its own thread and folds every record into the store, ringing once per
//! sampling tick; the loop draws from the store at most once a frame, only when something changed, and then only
//! the parts that show what changed. Steps show as they come; readings alone (/proc, NVML), which
//! come every sampling interval, are drawn at most every [`READINGS`], at the first ring after (the session rings at
//! every tick while it runs, and its end is drawn at once). Stopping workers is a control sent back.

use std::io;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;
use tokio::sync::mpsc::UnboundedSender;

use super::app::{Action, App};
use super::event_loop::{self, FullScreen, Wakes};
use super::input::Input;
use crate::contracts::Control;
use crate::recording::PlayerRequest;
use crate::store::{Changes, Store};

/// A player of the recording being written, and the store it folds into.
pub struct History {
    pub requests: Sender<PlayerRequest>,
    pub store: Store,
}

/// Shows a running session until the user quits: the session folds into `store`, `controls` go to it, and
/// `history` answers for times that memory no longer holds; both ring `wakes`' bell. At most one frame is drawn per
/// `frame`.
pub fn run(
    app: App,
    store: Store,
    controls: UnboundedSender<Control>,
    history: Option<History>,
    wakes: Wakes,
    frame: Duration,
) -> io::Result<()> {
    let mut live = Live {
        app,
        store,
        controls,
        history,
        changes: Changes::OTHER,
        drawn: Instant::now(),
    };
    event_loop::run(&mut live, wakes, frame)
}

/// Readings alone are drawn at most this often: twice a second is as often as a number can be read, and each frame
/// not drawn is a wake-up of the terminal the workers are spared.
const READINGS: Duration = Duration::from_millis(500);

struct Live {
    app: App,
    store: Store,
    controls: UnboundedSender<Control>,
    history: Option<History>,
    /// What changed since the last frame drawn.
    changes: Changes,
    /// When the last frame was drawn.
    drawn: Instant,
}

impl Live {
    /// Whether what changed is to be drawn now: steps and the rest at once, readings alone once they are due.
    fn due(&self) -> bool {
        self.changes.intersects(Changes::STEPS | Changes::OTHER)
            || (self.changes != Changes::NONE && self.drawn.elapsed() >= READINGS)
    }
}

impl FullScreen for Live {
    fn update(&mut self) -> bool {
        self.changes |= self.store.lock().take_changes();
        if let Some(history) = &self.history {
            let mut folded = history.store.lock();
            if folded.take_changes() != Changes::NONE {
                self.app.show_history((*folded).clone());
                self.changes |= Changes::OTHER;
            }
        }
        self.due()
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        self.drawn = Instant::now();
        let changes = std::mem::replace(&mut self.changes, Changes::NONE);
        self.app.redraw(frame, &self.store.lock(), changes)
    }

    fn on_input(&mut self, input: Input) -> bool {
        // Keys and the mouse may change anything on screen, a pane's own selection included.
        self.changes |= Changes::OTHER;
        match input {
            Input::Key(key) => match self.app.on_key(key, &self.store.lock()) {
                Action::Quit => return false,
                Action::Control(control) => {
                    let _ = self.controls.send(control);
                }
                Action::Seek(t_ms) => {
                    if let Some(history) = &self.history {
                        let _ = history.requests.send(PlayerRequest::Seek(t_ms));
                    }
                }
                Action::None => {}
            },
            Input::Mouse(mouse) => self.app.on_mouse(mouse),
            Input::Resize(..) => {}
        }
        true
    }

    fn done(&self) -> bool {
        self.app.is_quitting() && self.store.lock().ended
    }

    /// The workers are stopped (the session's hub stops them too on a signal; not when only the terminal went),
    /// and the view closes once the session has ended, its recording closed.
    fn on_termination(&mut self) -> bool {
        self.app.stop_for_good();
        if crate::termination::received().is_none() {
            let _ = self.controls.send(Control::StopAll);
        }
        self.changes |= Changes::OTHER;
        false
    }
}
