//! The one source of terminal input for every full-screen view: key presses, mouse events and resizes, each
//! waited for at most as long as the view can wait.

use std::io;
use std::time::Duration;

use crossterm::event::{self, Event, KeyEvent, KeyEventKind, MouseEvent};

pub enum Input {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize(u16, u16),
}

/// The next input within `wait`, or `None`. Key releases and repeats (on terminals that report them) and focus
/// or paste events are not input to golow's views.
pub fn next(wait: Duration) -> io::Result<Option<Input>> {
    if !event::poll(wait)? {
        return Ok(None);
    }
    Ok(match event::read()? {
        Event::Key(key) if key.kind == KeyEventKind::Press => Some(Input::Key(key)),
        Event::Mouse(mouse) => Some(Input::Mouse(mouse)),
        Event::Resize(width, height) => Some(Input::Resize(width, height)),
        _ => None,
    })
}
