//! The one source of terminal input for every full-screen view: key presses, mouse events and resizes, read on a
//! thread of their own that sleeps until there is input, and handed to the view that follows them. Ctrl-Z is not
//! the view's: in raw mode it reaches golow as a key rather than as the terminal's SIGTSTP, and the view's loop
//! suspends golow as the terminal would have.

use std::io;
use std::sync::Mutex;
use std::sync::mpsc::Sender;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent};

use super::event_loop::Wake;

pub enum Input {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize(u16, u16),
}

/// What wakes the view for `event`. Key releases and repeats (on terminals that report them) and focus or paste
/// events are not input to golow's views.
fn wake_of(event: Event) -> Option<Wake> {
    match event {
        Event::Key(key) if key.kind == KeyEventKind::Press && suspends(&key) => Some(Wake::Suspend),
        Event::Key(key) if key.kind == KeyEventKind::Press => Some(Wake::Input(Input::Key(key))),
        Event::Mouse(mouse) => Some(Wake::Input(Input::Mouse(mouse))),
        Event::Resize(width, height) => Some(Wake::Input(Input::Resize(width, height))),
        _ => None,
    }
}

/// Ctrl-Z, the terminal's suspend key.
fn suspends(key: &KeyEvent) -> bool {
    key.code == KeyCode::Char('z') && key.modifiers.contains(KeyModifiers::CONTROL)
}

/// Where input goes: the open view's loop, if any.
static FOLLOWER: Mutex<Option<Sender<Wake>>> = Mutex::new(None);
/// Whether the reader thread runs. It is started once and reads for the life of the process: crossterm's reader
/// cannot be interrupted, and a second reader would wait on the first.
static READING: Mutex<bool> = Mutex::new(false);

/// Input goes to `view` until the returned guard is dropped.
pub struct Following(());

impl Drop for Following {
    fn drop(&mut self) {
        if let Ok(mut follower) = FOLLOWER.lock() {
            *follower = None;
        }
    }
}

pub fn follow(view: Sender<Wake>) -> io::Result<Following> {
    if let Ok(mut follower) = FOLLOWER.lock() {
        *follower = Some(view);
    }
    let mut reading = READING
        .lock()
        .map_err(|_| io::Error::other("input reader"))?;
    if !*reading {
        std::thread::Builder::new()
            .name("golow-input".into())
            .spawn(read_forever)?;
        *reading = true;
    }
    Ok(Following(()))
}

fn read_forever() {
    loop {
        let wake = match event::read() {
            Ok(event) => match wake_of(event) {
                Some(wake) => wake,
                None => continue,
            },
            Err(e) => Wake::InputLost(e),
        };
        let lost = matches!(wake, Wake::InputLost(_));
        if let Ok(follower) = FOLLOWER.lock()
            && let Some(view) = follower.as_ref()
        {
            let _ = view.send(wake);
        }
        if lost {
            // Nothing more can be read now; a view that follows later starts a reader anew.
            if let Ok(mut reading) = READING.lock() {
                *reading = false;
            }
            return;
        }
    }
}
