//! The live view: the session runs on its own thread and sends every record here, ringing once per sampling tick;
//! this view folds them into its own state and the loop draws at most once a frame, only when something changed,
//! and then only the parts that show what changed. Steps show as they come; readings alone (/proc, NVML), which
//! come every sampling interval, are drawn at most every [`READINGS`], at the first ring after (the session rings at
//! every tick while it runs, and its end is drawn at once). Stopping workers is a control sent back.

use std::io;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use golow_protocol::event::Record;
use ratatui::Frame;
use ratatui::layout::Rect;
use tokio::sync::mpsc::UnboundedSender;

use super::app::{Action, App};
use super::changes::Changes;
use super::event_loop::{self, FullScreen, Wakes};
use super::input::Input;
use crate::contracts::{Control, PlayerLink, PlayerReply, PlayerRequest};
use crate::state::State;

/// Shows a running session until the user quits: `records` come from the session, `controls` go to it, and
/// `history` (a player of the recording being written) answers for times that memory no longer holds; both ring
/// `wakes`' bell. At most one frame is drawn per `frame`.
pub fn run(
    app: App,
    records: Receiver<Record>,
    controls: UnboundedSender<Control>,
    history: Option<PlayerLink>,
    wakes: Wakes,
    frame: Duration,
) -> io::Result<()> {
    let mut live = Live {
        app,
        records,
        controls,
        history,
        state: State::default(),
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
    records: Receiver<Record>,
    controls: UnboundedSender<Control>,
    history: Option<PlayerLink>,
    state: State,
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
        while let Ok(record) = self.records.try_recv() {
            self.state.apply(&record);
            self.changes |= Changes::of(&record.body);
        }
        while let Some(Ok(reply)) = self.history.as_ref().map(|h| h.replies.try_recv()) {
            if let PlayerReply::Reset(at) = reply {
                self.app.show_history(*at);
            }
            self.changes |= Changes::OTHER;
        }
        self.due()
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        self.drawn = Instant::now();
        let changes = std::mem::replace(&mut self.changes, Changes::NONE);
        self.app.redraw(frame, &self.state, changes)
    }

    fn on_input(&mut self, input: Input) -> bool {
        // Keys and the mouse may change anything on screen, a pane's own selection included.
        self.changes |= Changes::OTHER;
        match input {
            Input::Key(key) => match self.app.on_key(key, &self.state) {
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
        self.app.is_quitting() && self.state.ended
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
