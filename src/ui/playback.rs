//! The replay view: the same app and panes as a live session, fed by a recording's player instead of a session.
//! The timeline keeps a virtual clock; each update asks the player for the records up to it, and a jump asks for
//! the state at the new time. The player reads the file on its own thread.

use std::io;
use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;

use super::app::{Action, App};
use super::event_loop::{self, FullScreen};
use super::input::Input;
use crate::contracts::{PlayerLink, PlayerReply, PlayerRequest};
use crate::state::State;

/// Shows the recording `player` reads until the user quits. `app` must be `replaying` a timeline.
pub fn run(app: App, player: PlayerLink) -> io::Result<()> {
    let _ = player.requests.send(PlayerRequest::Seek(0.0));
    event_loop::run(&mut Playback {
        app,
        player,
        state: State::default(),
        last_tick: Instant::now(),
    })
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
