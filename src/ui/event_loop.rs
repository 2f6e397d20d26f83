//! The one loop every full-screen view runs in. It sleeps until something happens — a key, a click or a resize from the
//! [`input`](super::input) reader, a notification ([`Notifier`]) from its feed (a session, a player, a sweep)
//! once it sent something, or a moment the view asked for — then takes in what arrived and draws at most once a frame,
//! only when something changed. It never wakes on a timer of its own: on a machine whose workers fill every core, each
//! needless wake-up preempts one of them. Ctrl-Z or a SIGTSTP suspends golow with the terminal given back
//! ([`suspension`](crate::suspension)); once continued, the loop takes the terminal again and draws the view whole.

use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;

use super::input::{self, Input};
use super::render::terminal::{self, Terminal};
use crate::channels::Notifier;

/// 10 frames a second at most, unless the user asks otherwise (`--fps`).
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
    /// golow is to end (SIGTERM, SIGHUP) or its terminal is gone: true to close now; a view with something still
    /// running stops it and closes through `done` once it has ended.
    fn on_termination(&mut self) -> bool {
        true
    }
    /// When the view must be updated although nothing arrived (a clock of its own that moves); `None` when only
    /// what arrives changes it.
    fn next_update(&self) -> Option<Instant> {
        None
    }
    /// golow was stopped and is running again, on a cleared terminal: the next frame must be drawn whole, and a
    /// clock of the view's own must not count the time stopped.
    fn on_continue(&mut self) {}
}

/// Why the loop woke.
pub enum Wake {
    Input(Input),
    /// The view's feed sent something.
    Ring,
    /// The terminal can no longer be read.
    InputLost(io::Error),
    /// Ctrl-Z.
    Suspend,
}

/// What wakes a view: make it first, hand its [`notifier`](Wakes::notifier) to what feeds the view, then run the view.
pub struct Wakes {
    sender: Sender<Wake>,
    receiver: Receiver<Wake>,
}

impl Default for Wakes {
    fn default() -> Wakes {
        let (sender, receiver) = mpsc::channel();
        Wakes { sender, receiver }
    }
}

impl Wakes {
    pub fn notifier(&self) -> Notifier {
        let sender = self.sender.clone();
        Notifier::new(move || {
            let _ = sender.send(Wake::Ring);
        })
    }

    /// The next wake-up, waiting at most until `deadline` (for ever without one); `None` when it passed. The loop
    /// holds a sender, so the channel never disconnects.
    fn next(&self, deadline: Option<Instant>) -> Option<Wake> {
        match deadline {
            None => self.receiver.recv().ok(),
            Some(at) => self
                .receiver
                .recv_timeout(at.saturating_duration_since(Instant::now()))
                .ok(),
        }
    }
}

/// Runs `view` on the terminal until it leaves or is done, drawing at most once per `frame`.
///
/// A terminating signal, or a terminal that can no longer be read, ends the view as its `on_termination` says;
/// from then on nothing is drawn if drawing fails (a closed terminal), and a lost terminal is an error only when no
/// signal explains it.
pub fn run(view: &mut impl FullScreen, wakes: Wakes, frame: Duration) -> io::Result<()> {
    let (guard, mut terminal) = terminal::open()?;
    let _following = input::follow(wakes.sender.clone())?;
    let notifier = wakes.notifier();
    let _catching = crate::termination::catch_telling(move |_| notifier.notify());
    let _watching = crate::suspension::watch(wakes.notifier());
    let mut continued = crate::suspension::continued();
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let (mut ending, mut lost, mut drawing) = (false, None, true);
    let mut suspend = false;
    // A frame is due a little early: a feed that notifies once a frame would otherwise find it due a hair late, and
    // the loop would wake again for it.
    let early = frame / 8;
    'view: loop {
        if drawing {
            match job_control(std::mem::take(&mut suspend), &mut continued, &mut terminal) {
                Ok(false) => {}
                Ok(true) => {
                    view.on_continue();
                    (dirty, last_draw) = (true, None);
                }
                Err(e) => {
                    drawing = false;
                    lost = Some(e);
                    if !std::mem::replace(&mut ending, true) && view.on_termination() {
                        break;
                    }
                }
            }
        }
        let woke = Instant::now();
        dirty |= view.update();
        if !ending && crate::termination::received().is_some() {
            ending = true;
            if view.on_termination() {
                break;
            }
        }
        if dirty && drawing && last_draw.is_none_or(|t| woke + early >= t + frame) {
            // A terminal that cannot be drawn on is gone, as one that cannot be read is.
            if let Err(e) = terminal.draw(|f| view.draw(f)) {
                drawing = false;
                lost = Some(e);
                if !std::mem::replace(&mut ending, true) && view.on_termination() {
                    break;
                }
            }
            last_draw = Some(woke);
            dirty = false;
        }
        if view.done() {
            break;
        }
        let frame_owed = last_draw.filter(|_| dirty).map(|t| t + frame);
        let deadline = frame_owed.into_iter().chain(view.next_update()).min();
        let first = wakes.next(deadline);
        // Everything already queued is taken in at once: one update and at most one frame for a burst.
        let queued = std::iter::from_fn(|| wakes.receiver.try_recv().ok());
        for wake in first.into_iter().chain(queued) {
            match wake {
                Wake::Ring => {}
                Wake::Suspend => suspend = true,
                Wake::InputLost(e) => {
                    lost.get_or_insert(e);
                    if !std::mem::replace(&mut ending, true) && view.on_termination() {
                        break 'view;
                    }
                }
                Wake::Input(_) if ending => {}
                Wake::Input(input) => {
                    dirty = true;
                    if let Input::Resize(width, height) = input {
                        terminal.resize(Rect::new(0, 0, width, height))?;
                    }
                    if !view.on_input(input) {
                        break 'view;
                    }
                }
            }
        }
    }
    terminal.close();
    drop(guard);
    match lost {
        Some(e) if crate::termination::received().is_none() => Err(e),
        _ => Ok(()),
    }
}

/// Suspends golow with the terminal given back when `suspend` (Ctrl-Z) or a SIGTSTP asks, and takes the terminal
/// again once golow was continued, after its own stop or any other (`continued` is the count last seen); true when
/// the terminal was taken again, cleared.
fn job_control(suspend: bool, continued: &mut u64, terminal: &mut Terminal) -> io::Result<bool> {
    // Taken again after its own stop whether or not the SIGCONT has been counted yet: where nothing stopped golow
    // (no job control), none comes.
    let mut take_again = (suspend | crate::suspension::asked()) && crate::suspension::possible();
    if take_again {
        terminal::give_back();
        crate::suspension::stop_job();
    }
    let now = crate::suspension::continued();
    take_again |= std::mem::replace(continued, now) != now;
    if take_again {
        terminal::take_again(terminal)?;
    }
    Ok(take_again)
}
