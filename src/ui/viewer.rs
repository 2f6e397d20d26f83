//! The one full-screen view of a session, over either of its sources: a session running now, or a recording's
//! player. Either source folds into the store and rings the view's bell; the loop draws from the store at most once
//! a frame, only when something changed, and then only the parts that show what changed. What differs between the
//! two is the header's words, the keys (a replay has a timeline, a session workers to stop) and who is asked for
//! what: a session takes controls, a player takes the times its timeline reaches.
//!
//! A running session rings once per sampling tick that brought records. Steps are drawn at most every [`STEPS`],
//! readings alone (/proc, NVML), which come every sampling interval, at most every [`READINGS`]; keys and everything
//! else at once. A replay's timeline keeps a virtual clock, which moves once a frame while it plays.

use std::io;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;
use tokio::sync::mpsc::UnboundedSender;

use super::app::{Action, App};
use super::event_loop::{self, FRAME, FullScreen, Wakes};
use super::input::Input;
use crate::contracts::Control;
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
    let mut viewer = Viewer {
        app,
        store,
        source,
        changes: Changes::OTHER,
        drawn: Instant::now(),
        last_tick: Instant::now(),
    };
    event_loop::run(&mut viewer, wakes, frame)
}

/// Readings alone are drawn at most this often: twice a second is as often as a number can be read, and each frame
/// not drawn is a wake-up of the terminal the workers are spared.
const READINGS: Duration = Duration::from_millis(500);

/// Steps are drawn at most this often: four times a second moves every chart and counter as the steps come, while a
/// session of fast steps drawn at the frame cap (ten a second) cost the monitor 1.7 times the CPU at 200×60.
const STEPS: Duration = Duration::from_millis(250);

/// Whether `changes`, `since` the last frame, are to be drawn now: keys and the rest at once, steps and readings once
/// they are due.
fn due(changes: Changes, since: Duration) -> bool {
    changes.intersects(Changes::OTHER)
        || (changes.intersects(Changes::STEPS) && since >= STEPS)
        || (changes != Changes::NONE && since >= READINGS)
}

struct Viewer {
    app: App,
    store: Store,
    source: Source,
    /// What changed since the last frame drawn.
    changes: Changes,
    /// When the last frame was drawn.
    drawn: Instant,
    /// When a replay's timeline last moved.
    last_tick: Instant,
}

impl Viewer {
    fn due(&self) -> bool {
        due(self.changes, self.drawn.elapsed())
    }

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

impl FullScreen for Viewer {
    fn update(&mut self) -> bool {
        self.changes |= self.store.lock().take_changes();
        match &self.source {
            Source::Session {
                history: Some(history),
                ..
            } => {
                let mut folded = history.store.lock();
                if folded.take_changes() != Changes::NONE {
                    self.app.show_history((*folded).clone());
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
        self.due()
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        self.drawn = Instant::now();
        let changes = std::mem::replace(&mut self.changes, Changes::NONE);
        self.app.redraw(frame, &self.store.lock(), changes)
    }

    /// A playing timeline moves once a frame. Steps or readings held back need no wake-up of their own: a running
    /// session rings every sampling tick, and the first ring after they are due draws them.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_draw_at_once_steps_four_times_a_second_and_readings_twice() {
        let ms = Duration::from_millis;
        assert!(due(Changes::OTHER, ms(0)));
        assert!(due(Changes::OTHER | Changes::PROCESS, ms(0)));
        assert!(!due(Changes::STEPS, ms(240)));
        assert!(due(Changes::STEPS, ms(250)));
        assert!(!due(Changes::STEPS | Changes::GPU, ms(100)));
        assert!(!due(Changes::PROCESS | Changes::GPU, ms(490)));
        assert!(due(Changes::PROCESS, ms(500)));
        assert!(!due(Changes::NONE, ms(10_000)));
    }
}
