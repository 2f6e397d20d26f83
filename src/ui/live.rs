//! The live TUI loop: the session runs on its own thread and sends every record here; this thread
//! folds them into its own state and draws at a fixed frame rate, only when something changed. Input
//! never waits on the session, and the session never waits on drawing.

use std::io;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::app::{Action, App};
use super::theme::Theme;
use crate::event::Record;
use crate::session::{self, Control, Observer, Prepared};
use crate::state::State;

/// 10 frames a second: smooth enough to watch, cheap enough to leave open all day.
const FRAME: Duration = Duration::from_millis(100);

/// Hands each record to the UI thread.
struct Forward(mpsc::Sender<Record>);

impl Observer for Forward {
    fn on_record(&mut self, record: &Record, _state: &State) {
        let _ = self.0.send(record.clone());
    }
}

/// Puts the terminal back however the TUI ends, panics included.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> io::Result<TerminalGuard> {
        enable_raw_mode()?;
        execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)?;
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            default_hook(info);
        }));
        Ok(TerminalGuard)
    }
}

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, DisableMouseCapture);
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Runs the session under the TUI until the user quits; returns the session's final state.
pub fn run(
    prepared: &Prepared,
    interval: Duration,
    theme: Theme,
    compare: Option<(String, String)>,
) -> io::Result<State> {
    let (records, incoming) = mpsc::channel();
    let (controls, control_rx) = tokio::sync::mpsc::unbounded_channel();
    let (config, workers) = (prepared.session.clone(), prepared.workers.clone());
    let session = std::thread::Builder::new()
        .name("golow-session".into())
        .spawn(move || {
            let mut forward = Forward(records);
            session::run_blocking(config, workers, interval, &mut forward, control_rx)
        })?;

    let guard = TerminalGuard::enter()?;
    // A fixed viewport, resized on resize events: ratatui would otherwise ask the terminal for its
    // size before every frame.
    let (width, height) = crossterm::terminal::size()?;
    let viewport = Viewport::Fixed(Rect::new(0, 0, width, height));
    // One write per frame: stdout's own line buffer would split a frame into many.
    let out = io::BufWriter::with_capacity(1 << 16, io::stdout());
    let mut terminal =
        Terminal::with_options(CrosstermBackend::new(out), TerminalOptions { viewport })?;
    let mut app = App::new(theme, compare);
    let mut state = State::default();
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        while let Ok(record) = incoming.try_recv() {
            state.apply(&record);
            dirty = true;
        }
        let due = last_draw.is_none_or(|t| t.elapsed() >= FRAME);
        if dirty && due {
            terminal.draw(|frame| app.draw(frame, &state))?;
            last_draw = Some(Instant::now());
            dirty = false;
        }
        if app.is_quitting() && state.ended {
            break;
        }
        // Nothing to draw: sleep a whole frame (records cannot wake the poll, and need not sooner).
        // Something to draw: wake when the next frame is due.
        let wait = match last_draw {
            Some(t) if dirty => FRAME.saturating_sub(t.elapsed()),
            _ => FRAME,
        };
        if event::poll(wait)? {
            dirty = true;
            match event::read()? {
                Event::Key(key) if key.kind == event::KeyEventKind::Press => {
                    match app.on_key(key, &state) {
                        Action::Quit => break,
                        Action::Control(control) => {
                            let _ = controls.send(control);
                        }
                        Action::None => {}
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
    // The user left while workers still ran: stop them before collecting the final state.
    let _ = controls.send(Control::StopAll);
    session
        .join()
        .map_err(|_| io::Error::other("the session thread panicked"))?
}
