//! The replay view: the same app and panes as a live session, fed by a recording's player instead of a session.
//! The timeline keeps a virtual clock, which moves once a frame while it plays; each update asks the player to fold
//! the records up to it, and a jump asks for the state at the new time. The player reads the file and folds into
//! its store on its own thread, and rings the view's bell with each answer; the view draws from the store.

use std::io;
use std::sync::mpsc::Sender;
use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;

use super::app::{Action, App};
use super::event_loop::{self, FRAME, FullScreen, Wakes};
use super::input::Input;
use crate::recording::PlayerRequest;
use crate::store::{Changes, Store};

/// Shows the recording a player reads until the user quits: `player` takes its requests, and it folds into `store`.
/// `app` must be `replaying` a timeline; the player rings `wakes`' bell.
pub fn run(app: App, player: Sender<PlayerRequest>, store: Store, wakes: Wakes) -> io::Result<()> {
    let _ = player.send(PlayerRequest::Seek(0.0));
    let mut playback = Playback {
        app,
        player,
        store,
        last_tick: Instant::now(),
    };
    event_loop::run(&mut playback, wakes, FRAME)
}

struct Playback {
    app: App,
    player: Sender<PlayerRequest>,
    store: Store,
    last_tick: Instant,
}

impl FullScreen for Playback {
    fn update(&mut self) -> bool {
        let elapsed = std::mem::replace(&mut self.last_tick, Instant::now()).elapsed();
        let mut changed = false;
        if let Some(timeline) = self.app.timeline_mut()
            && timeline.tick(elapsed)
        {
            let _ = self
                .player
                .send(PlayerRequest::Advance(timeline.position_ms));
            changed = true;
        }
        changed | (self.store.lock().take_changes() != Changes::NONE)
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        self.app.draw(frame, &self.store.lock());
        vec![frame.area()]
    }

    fn next_update(&self) -> Option<Instant> {
        let playing = self.app.timeline().is_some_and(|t| t.playing);
        playing.then(|| self.last_tick + FRAME)
    }

    fn on_input(&mut self, input: Input) -> bool {
        match input {
            Input::Key(key) => match self.app.on_key(key, &self.store.lock()) {
                Action::Quit => return false,
                Action::Seek(t_ms) => {
                    let _ = self.player.send(PlayerRequest::Seek(t_ms));
                }
                Action::None | Action::Control(_) => {}
            },
            Input::Mouse(mouse) => self.app.on_mouse(mouse),
            Input::Resize(..) => {}
        }
        true
    }
}
