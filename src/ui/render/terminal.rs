//! The real terminal every full-screen view draws on: raw mode, alternate screen, mouse, restored however the
//! view ends (panics included).

use std::io::{self, BufWriter, Stdout};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{TerminalOptions, Viewport};

use super::screen::Screen;

pub type Terminal = Screen<CrosstermBackend<BufWriter<Stdout>>>;

/// Puts the terminal back when dropped.
pub struct Guard;

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, DisableMouseCapture);
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Takes over the terminal. Drop the terminal before the guard.
pub fn open() -> io::Result<(Guard, Terminal)> {
    enable_raw_mode()?;
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)?;
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        default_hook(info);
    }));
    let guard = Guard;
    // A fixed viewport, resized on resize events: ratatui would otherwise ask the terminal for its
    // size before every frame.
    let (width, height) = crossterm::terminal::size()?;
    let viewport = Viewport::Fixed(Rect::new(0, 0, width, height));
    // One write per frame: stdout's own line buffer would split a frame into many.
    let out = BufWriter::with_capacity(1 << 16, io::stdout());
    let terminal =
        ratatui::Terminal::with_options(CrosstermBackend::new(out), TerminalOptions { viewport })?;
    Ok((guard, Screen::new(terminal)?))
}
