//! The replay view: the same app and panes as a live session, fed by a recording's player instead of a session.
//! The timeline keeps a virtual clock, which moves once a frame while it plays; each update asks the player for the
//! records up to it, and a jump asks for the state at the new time. The player reads the file on its own thread and
//! rings the view's bell with each answer.

use std::io;
use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;

use super::app::{Action, App};
use super::event_loop::{self, FRAME, FullScreen, Wakes};
use super::input::Input;
use crate::contracts::{PlayerLink, PlayerReply, PlayerRequest};
use crate::state::State;

/// Shows the recording `player` reads until the user quits. `app` must be `replaying` a timeline; the player rings
/// `wakes`' bell.
pub fn run(app: App, player: PlayerLink, wakes: Wakes) -> io::Result<()> {
    let _ = player.requests.send(PlayerRequest::Seek(0.0));
    let mut playback = Playback {
        app,
        player,
        state: State::default(),
        last_tick: Instant::now(),
    };
    event_loop::run(&mut playback, wakes, FRAME)
}

struct Playback {
    app: App,
    player: PlayerLink,
    state: State,
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
                .requests
                .send(PlayerRequest::Advance(timeline.position_ms));
            changed = true;
        }
        while let Ok(reply) = self.player.replies.try_recv() {
            match reply {
                PlayerReply::Records(records) => records.iter().for_each(|r| self.state.apply(r)),
                PlayerReply::Reset(at) => self.state = *at,
            }
            changed = true;
        }
        changed
    }

    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect> {
        self.app.draw(frame, &self.state);
        vec![frame.area()]
    }

    fn next_update(&self) -> Option<Instant> {
        let playing = self.app.timeline().is_some_and(|t| t.playing);
        playing.then(|| self.last_tick + FRAME)
    }

    fn on_input(&mut self, input: Input) -> bool {
        match input {
            Input::Key(key) => match self.app.on_key(key, &self.state) {
                Action::Quit => return false,
                Action::Seek(t_ms) => {
                    let _ = self.player.requests.send(PlayerRequest::Seek(t_ms));
                }
                Action::None | Action::Control(_) => {}
            },
            Input::Mouse(mouse) => self.app.on_mouse(mouse),
            Input::Resize(..) => {}
        }
        true
    }
}
