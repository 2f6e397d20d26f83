//! The live TUI loop: the session runs on its own thread and sends every record here; this thread
//! folds them into its own state and draws at a fixed frame rate, only when something changed, and
//! only the parts that show what changed. Input never waits on the session, and the session never
//! waits on drawing.

use std::io;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event};
use ratatui::layout::Rect;

use super::app::{Action, App};
use super::changes::Changes;
use super::terminal;
use crate::replay::{Reply, Request, Source};
use crate::session::{self, Control, Observer, Prepared};
use crate::state::State;
use golow_protocol::event::Record;

/// 10 frames a second: smooth enough to watch, cheap enough to leave open all day.
pub const FRAME: Duration = Duration::from_millis(100);

/// Hands each record to the UI thread.
struct Forward(mpsc::Sender<Record>);

impl Observer for Forward {
    fn on_record(&mut self, record: &Record, _state: &State) {
        let _ = self.0.send(record.clone());
    }
}

/// Runs the session under the TUI until the user quits; returns the session's final state. `also`
/// sees every record too (the recorder), on the session's thread; `history` answers for times that
/// memory no longer holds (a player of the recording being written).
pub fn run(
    prepared: &Prepared,
    interval: Duration,
    app: App,
    also: impl Observer + Send + 'static,
    history: Option<Source>,
) -> io::Result<State> {
    let (records, incoming) = mpsc::channel();
    let (controls, control_rx) = tokio::sync::mpsc::unbounded_channel();
    let (config, workers) = (prepared.session.clone(), prepared.workers.clone());
    let session = std::thread::Builder::new()
        .name("golow-session".into())
        .spawn(move || {
            let mut observers = (Forward(records), also);
            session::run_blocking(config, workers, interval, &mut observers, control_rx)
        })?;

    let (guard, mut terminal) = terminal::open()?;
    let mut app = app;
    let mut state = State::default();
    let mut dirty = true;
    let mut changes = Changes::OTHER;
    let mut last_draw: Option<Instant> = None;
    loop {
        while let Ok(record) = incoming.try_recv() {
            state.apply(&record);
            changes |= Changes::of(&record.body);
            dirty = true;
        }
        while let Some(Ok(reply)) = history.as_ref().map(|h| h.replies.try_recv()) {
            if let Reply::Reset(at) = reply {
                app.show_history(*at);
            }
            changes |= Changes::OTHER;
            dirty = true;
        }
        let due = last_draw.is_none_or(|t| t.elapsed() >= FRAME);
        if dirty && due {
            terminal.draw(|frame| app.redraw(frame, &state, changes))?;
            last_draw = Some(Instant::now());
            dirty = false;
            changes = Changes::NONE;
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
            // Keys and the mouse may change anything on screen, a pane's own selection included.
            changes |= Changes::OTHER;
            match event::read()? {
                Event::Key(key) if key.kind == event::KeyEventKind::Press => {
                    match app.on_key(key, &state) {
                        Action::Quit => break,
                        Action::Control(control) => {
                            let _ = controls.send(control);
                        }
                        Action::Seek(t_ms) => {
                            if let Some(h) = &history {
                                let _ = h.requests.send(Request::Seek(t_ms));
                            }
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
