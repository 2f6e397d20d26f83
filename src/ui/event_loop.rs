//! The one loop every full-screen view runs in: take in what arrived, draw at most [`FRAME`] times a second and
//! only when something changed, and wait for input from the one [`input`](super::input) source in between. The
//! view never waits on what it shows (a session, a player, a sweep: they run on threads of their own).

use std::io;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;

use super::input::{self, Input};
use super::render::terminal;

/// 10 frames a second: smooth enough to watch, cheap enough to leave open all day.
pub const FRAME: Duration = Duration::from_millis(100);

/// A view the loop can run.
pub trait FullScreen {
    /// Takes in what arrived since the last call; true when the screen must change.
    fn update(&mut self) -> bool;
    /// Draws over the last frame (the whole frame after a resize); returns the areas drawn.
    fn draw(&mut self, frame: &mut Frame) -> Vec<Rect>;
    /// A key, a click or a new size (the loop resizes the terminal itself); false leaves the loop.
    fn on_input(&mut self, input: Input) -> bool;
    /// True once the view has nothing more to show and should close by itself.
    fn done(&self) -> bool {
        false
    }
}

/// Runs `view` on the terminal until it leaves or is done.
pub fn run(view: &mut impl FullScreen) -> io::Result<()> {
    let (guard, mut terminal) = terminal::open()?;
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        dirty |= view.update();
        if dirty && last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
            terminal.draw(|frame| view.draw(frame))?;
            last_draw = Some(Instant::now());
            dirty = false;
        }
        if view.done() {
            break;
        }
        // Nothing to draw: sleep a whole frame (what arrives cannot wake the poll, and need not sooner).
        // Something to draw: wake when the next frame is due.
        let wait = match last_draw {
            Some(t) if dirty => FRAME.saturating_sub(t.elapsed()),
            _ => FRAME,
        };
        let Some(input) = input::next(wait)? else {
            continue;
        };
        dirty = true;
        if let Input::Resize(width, height) = input {
            terminal.resize(Rect::new(0, 0, width, height))?;
        }
        if !view.on_input(input) {
            break;
        }
    }
    drop(terminal);
    drop(guard);
    Ok(())
}
