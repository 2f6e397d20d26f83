//! The live view: the session runs on its own thread and sends every record here; this view folds them into its
//! own state and the loop draws at most [`FRAME`](super::event_loop::FRAME) times a second, only when something
//! changed, and then only the parts that show what changed. Stopping workers is a control sent back.

use std::io;
use std::sync::mpsc::Receiver;

use golow_protocol::event::Record;
use ratatui::Frame;
use ratatui::layout::Rect;
use tokio::sync::mpsc::UnboundedSender;

use super::app::{Action, App};
use super::changes::Changes;
use super::event_loop::{self, FullScreen};
use super::input::Input;
use crate::contracts::{Control, PlayerLink, PlayerReply, PlayerRequest};
use crate::state::State;

/// Shows a running session until the user quits: `records` come from the session, `controls` go to it, and
/// `history` (a player of the recording being written) answers for times that memory no longer holds.
pub fn run(
    app: App,
    records: Receiver<Record>,
    controls: UnboundedSender<Control>,
    history: Option<PlayerLink>,
) -> io::Result<()> {
    event_loop::run(&mut Live {
        app,
        records,
        controls,
        history,
        state: State::default(),
        changes: Changes::OTHER,
    })
}

struct Live {
    app: App,
    records: Receiver<Record>,
    controls: UnboundedSender<Control>,
    history: Option<PlayerLink>,
    state: State,
    /// What changed since the last frame drawn.
    changes: Changes,
}

impl FullScreen for Live {
    fn update(&mut self) -> bool {
        let mut changed = false;
        while let Ok(record) = self.records.try_recv() {
            self.state.apply(&record);
            self.changes |= Changes::of(&record.body);
            changed = true;
        }
        while let Some(Ok(reply)) = self.history.as_ref().map(|h| h.replies.try_recv()) {
            if let PlayerReply::Reset(at) = reply {
                self.app.show_history(*at);
            }
            self.changes |= Changes::OTHER;
            changed = true;
        }
        changed
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
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
}
