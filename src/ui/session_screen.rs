//! The one full-screen view of a session, over either of its sources: a session running now, or a recording's player.
//! Either source folds into the store and notifies the view; the loop draws from the store at most once a
//! frame, only when something changed, and then only the parts that show what changed. What differs between the two is
//! the header's words, the keys (a replay has a timeline, a session workers to stop) and who is asked for what: a
//! session takes controls, a player takes the times its timeline reaches.
//!
//! A running session notifies at a sampling tick once what it brought is due to be shown (steps and readings twice a
//! second, the rest at once: [`Changes::due`]), so the view draws whenever it is woken; keys draw at once. A
//! replay's timeline keeps a virtual clock, which moves once a frame while it plays.

use std::io;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;
use tokio::sync::mpsc::UnboundedSender;

use super::app::{Action, App};
use super::event_loop::{self, FRAME, FullScreen, Wakes};
use super::input::Input;
use crate::channels::Control;
use crate::recording::PlayerRequest;
use crate::store::{Changes, Store};

/// Where what the view shows comes from; either folds into the store the view is given.
pub enum Source {
    /// A session running now: stopping workers is a control sent back, and `history` answers for times that memory
    /// no longer holds.
    Session {
        controls: UnboundedSender<Control>,
        history: Option<History>,
    },
    /// A recording's player, asked for the records up to where the timeline is, or for the state at a time.
    Recording { player: Sender<PlayerRequest> },
}

/// A player of the recording a running session writes, and the store it folds into: live scroll-back past what
/// memory holds seeks it as a replay seeks its recording.
pub struct History {
    pub requests: Sender<PlayerRequest>,
    pub store: Store,
}

/// Shows what `source` folds into `store` until the user quits (or, for a session, until it ended after a quit).
/// `app` must be `replaying` a timeline for a recording. At most one frame is drawn per `frame`.
pub fn run(
    app: App,
    store: Store,
    source: Source,
    wakes: Wakes,
    frame: Duration,
) -> io::Result<()> {
    if let Source::Recording { player } = &source {
        let _ = player.send(PlayerRequest::Seek(0.0));
    }
    let mut screen = SessionScreen {
        app,
        store,
        source,
        changes: Changes::OTHER,
        last_tick: Instant::now(),
    };
    event_loop::run(&mut screen, wakes, frame)
}

struct SessionScreen {
    app: App,
    store: Store,
    source: Source,
    /// What changed since the last frame drawn.
    changes: Changes,
    /// When a replay's timeline last moved.
    last_tick: Instant,
}

impl SessionScreen {
    fn seek(&self, t_ms: f64) {
        let requests = match &self.source {
            Source::Session {
                history: Some(history),
                ..
            } => &history.requests,
            Source::Session { history: None, .. } => return,
            Source::Recording { player } => player,
        };
        let _ = requests.send(PlayerRequest::Seek(t_ms));
    }
}

impl FullScreen for SessionScreen {
    fn update(&mut self) -> bool {
        self.changes |= self.store.lock().take_changes();
        match &self.source {
            Source::Session {
                history: Some(history),
                ..
            } => {
                if history.store.lock().take_changes() != Changes::NONE {
                    self.app.show_history();
                    self.changes |= Changes::OTHER;
                }
            }
            Source::Session { history: None, .. } => {}
            Source::Recording { player } => {
                let elapsed = std::mem::replace(&mut self.last_tick, Instant::now()).elapsed();
                if let Some(timeline) = self.app.timeline_mut()
                    && timeline.tick(elapsed)
                {
                    let _ = player.send(PlayerRequest::Advance(timeline.position_ms));
                    self.changes |= Changes::OTHER;
                }
            }
        }
        self.changes != Changes::NONE
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        let changes = std::mem::replace(&mut self.changes, Changes::NONE);
        let history = match &self.source {
            Source::Session {
                history: Some(history),
                ..
            } => Some(history.store.lock()),
            _ => None,
        };
        let history = history.as_deref().map(|folded| &**folded);
        self.app.redraw(frame, &self.store.lock(), history, changes)
    }

    /// A playing timeline moves once a frame. A running session needs no wake-up of the view's own: it notifies once
    /// what it brought is due.
    fn next_update(&self) -> Option<Instant> {
        let playing = self.app.timeline().is_some_and(|t| t.playing);
        playing.then(|| self.last_tick + FRAME)
    }

    fn on_input(&mut self, input: Input) -> bool {
        // Keys and the mouse may change anything on screen, a pane's own selection included.
        self.changes |= Changes::OTHER;
        match input {
            Input::Key(key) => match self.app.on_key(key, &self.store.lock()) {
                Action::Quit => return false,
                Action::Control(control) => {
                    if let Source::Session { controls, .. } = &self.source {
                        let _ = controls.send(control);
                    }
                }
                Action::Seek(t_ms) => self.seek(t_ms),
                Action::None => {}
            },
            Input::Mouse(mouse) => self.app.on_mouse(mouse),
            Input::Resize(..) => {}
        }
        true
    }

    /// Drawn whole; a replay's timeline goes on from where it was when golow stopped.
    fn on_continue(&mut self) {
        self.changes |= Changes::OTHER;
        self.last_tick = Instant::now();
    }

    fn done(&self) -> bool {
        matches!(self.source, Source::Session { .. })
            && self.app.is_quitting()
            && self.store.lock().ended
    }

    /// A session's workers are stopped (the session's hub stops them too on a signal; not when only the terminal
    /// went), and the view closes once the session has ended, its recording closed. A replay closes at once.
    fn on_termination(&mut self) -> bool {
        let Source::Session { controls, .. } = &self.source else {
            return true;
        };
        self.app.stop_for_good();
        if crate::termination::received().is_none() {
            let _ = controls.send(Control::StopAll);
        }
        self.changes |= Changes::OTHER;
        false
    }
}
