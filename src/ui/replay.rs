//! The replay TUI loop: the same app and panes as a live session, fed by a player instead of a
//! session. The timeline keeps a virtual clock; each frame asks the player for the records up to it,
//! and a jump asks for the state at the new time. The player reads the file on its own thread.

use std::io;
use std::time::Instant;

use crossterm::event::{self, Event};
use ratatui::layout::Rect;

use super::app::{Action, App};
use super::live::FRAME;
use super::terminal;
use crate::replay::{Reply, Request, Source};
use crate::state::State;

/// Runs until the user quits. `app` must be `replaying` a timeline.
pub fn run(mut app: App, source: &Source) -> io::Result<()> {
    let (guard, mut terminal) = terminal::open()?;
    let mut state = State::default();
    let mut dirty = true;
    let mut last_tick = Instant::now();
    let _ = source.requests.send(Request::Seek(0.0));
    loop {
        let elapsed = last_tick.elapsed();
        last_tick = Instant::now();
        if let Some(timeline) = app.timeline_mut()
            && timeline.tick(elapsed)
        {
            let _ = source.requests.send(Request::Advance(timeline.position_ms));
            dirty = true;
        }
        while let Ok(reply) = source.replies.try_recv() {
            match reply {
                Reply::Records(records) => records.iter().for_each(|r| state.apply(r)),
                Reply::Reset(at) => state = *at,
            }
            dirty = true;
        }
        if dirty {
            terminal.draw(|frame| {
                app.draw(frame, &state);
                vec![frame.area()]
            })?;
            dirty = false;
        }
        if event::poll(FRAME)? {
            dirty = true;
            match event::read()? {
                Event::Key(key) if key.kind == event::KeyEventKind::Press => {
                    match app.on_key(key, &state) {
                        Action::Quit => break,
                        Action::Seek(t_ms) => {
                            let _ = source.requests.send(Request::Seek(t_ms));
                        }
                        Action::None | Action::Control(_) => {}
                    }
                }
                Event::Mouse(mouse) => app.on_mouse(mouse),
                Event::Resize(width, height) => terminal.resize(Rect::new(0, 0, width, height))?,
                _ => {}
            }
        }
    }
    drop(terminal);
    drop(guard);
    Ok(())
}
