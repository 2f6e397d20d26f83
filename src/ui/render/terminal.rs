//! The real terminal every full-screen view draws on: raw mode, alternate screen, mouse, the cursor hidden; given
//! back however the view ends (panics included) or while golow is suspended, and taken again after.

use std::io::{self, BufWriter, Stdout};

use crossterm::cursor::{Hide, Show};
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

/// Gives the terminal back as golow found it: raw mode off, the main screen, no mouse tracking, the cursor shown.
pub fn give_back() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        LeaveAlternateScreen,
        DisableMouseCapture,
        Show
    );
}

fn take() -> io::Result<()> {
    enable_raw_mode()?;
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture, Hide)
}

impl Drop for Guard {
    fn drop(&mut self) {
        give_back();
    }
}

/// Takes over the terminal. Drop the terminal before the guard.
pub fn open() -> io::Result<(Guard, Terminal)> {
    take()?;
    let guard = Guard;
    give_back_on_panic();
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

/// A panic on any thread gives the terminal back before its message is printed, so that the message is readable.
/// Set once: each view opened after the first would otherwise wrap the hook again.
fn give_back_on_panic() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            give_back();
            default_hook(info);
        }));
    });
}

/// Takes the terminal again after golow was stopped and continued: the shell had it meanwhile, may have left its
/// own modes and drawn over the screen, and its size may have changed. The terminal is cleared; the next frame must
/// be drawn whole.
pub fn take_again(terminal: &mut Terminal) -> io::Result<()> {
    // Raw mode is set anew from the modes the terminal has now, not taken as still set.
    let _ = disable_raw_mode();
    take()?;
    let (width, height) = crossterm::terminal::size()?;
    terminal.resize(Rect::new(0, 0, width, height))
}
