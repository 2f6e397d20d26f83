//! The contracts between the monitor's parts, in one place beside the wire contracts of golow-protocol (the event
//! schema, configurations, the collector's windows and the worker channels). Parts meet only through these:
//!
//! - a running session hands every record it stamps to an [`Observer`] (the recorder, a progress display, the
//!   channel to the UI), and takes [`Control`]s (from the UI or a sweep) to stop workers;
//! - a viewer of a recording asks its player, over a [`PlayerLink`], for records up to a time or the state at one;
//! - whatever feeds a full-screen view (a session, a player, a sweep) rings the view's [`Bell`] once it has sent
//!   something, so that the view sleeps until then.

use std::sync::{Arc, mpsc};

use crate::state::State;
use golow_protocol::event::Record;

/// What the UI (or a sweep being stopped) may ask of a running session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Stop every worker (quit, or Ctrl-C).
    StopAll,
    /// Stop one worker, by its index in the session's worker list.
    Stop(usize),
}

/// Anything that follows a session's records as the hub stamps them, on the session's thread.
pub trait Observer {
    fn on_record(&mut self, record: &Record);
    /// Called at every sampling interval, records or not (for what must not wait for the next one).
    fn tick(&mut self) {}
    /// Why the observer can no longer do its work (a recording that failed), said once; the hub records it so that
    /// every view and the summary tell it while the session goes on.
    fn failure(&mut self) -> Option<String> {
        None
    }
}

/// An observer that may be absent (a run with `--no-record`).
impl<T: Observer> Observer for Option<T> {
    fn on_record(&mut self, record: &Record) {
        if let Some(observer) = self {
            observer.on_record(record);
        }
    }

    fn tick(&mut self) {
        if let Some(observer) = self {
            observer.tick();
        }
    }

    fn failure(&mut self) -> Option<String> {
        self.as_mut().and_then(Observer::failure)
    }
}

/// An observer lent for one session (a sweep's progress lives across its cells).
impl<T: Observer + ?Sized> Observer for &mut T {
    fn on_record(&mut self, record: &Record) {
        (**self).on_record(record);
    }

    fn tick(&mut self) {
        (**self).tick();
    }

    fn failure(&mut self) -> Option<String> {
        (**self).failure()
    }
}

/// Two observers as one, each seeing every record in turn.
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn on_record(&mut self, record: &Record) {
        self.0.on_record(record);
        self.1.on_record(record);
    }

    fn tick(&mut self) {
        self.0.tick();
        self.1.tick();
    }

    fn failure(&mut self) -> Option<String> {
        self.0.failure().or_else(|| self.1.failure())
    }
}

/// Rung by whatever feeds a view once it has sent something. A view sleeps until a key or a ring rather than
/// waking on a timer of its own: the moments it runs are the moments its feed ran anyway, which is what keeps a
/// monitor's wake-ups from preempting the workers it watches more often than it must.
#[derive(Clone)]
pub struct Bell(Arc<dyn Fn() + Send + Sync>);

impl Bell {
    pub fn new(ring: impl Fn() + Send + Sync + 'static) -> Bell {
        Bell(Arc::new(ring))
    }

    pub fn ring(&self) {
        (self.0)();
    }
}

/// Items a view may be behind its feed: past them the feed waits for the view (a flood from a worker), so that
/// memory stays bounded; a view drains its feed at every wake, so in practice it never waits.
pub const FEED_CAPACITY: usize = 65_536;

/// A channel to a view's thread with the view's bell. What comes as it happens is sent and rung at once; what comes
/// often (records, steps) is sent and rung at the session's next tick, when the hub is awake anyway. Dropping the
/// feed closes the channel and rings, so that the view hears of the end.
pub struct Feed<T> {
    sender: Option<mpsc::SyncSender<T>>,
    bell: Bell,
    /// Something was sent since the last ring.
    unrung: bool,
}

impl<T> Feed<T> {
    /// A feed of at most `FEED_CAPACITY` items in flight, and the view's end of it.
    pub fn channel(bell: Bell) -> (Feed<T>, mpsc::Receiver<T>) {
        let (sender, receiver) = mpsc::sync_channel(FEED_CAPACITY);
        let feed = Feed {
            sender: Some(sender),
            bell,
            unrung: false,
        };
        (feed, receiver)
    }

    /// Sends `item`, waiting for the view when it is `FEED_CAPACITY` behind (after ringing it, or it would never
    /// come); false once the view is gone.
    fn send(&mut self, item: T) -> bool {
        let Some(sender) = &self.sender else {
            return false;
        };
        match sender.try_send(item) {
            Ok(()) => true,
            Err(mpsc::TrySendError::Full(item)) => {
                self.bell.ring();
                sender.send(item).is_ok()
            }
            Err(mpsc::TrySendError::Disconnected(_)) => false,
        }
    }

    /// Sends `item`; the view hears of it at the next tick.
    pub fn send_at_tick(&mut self, item: T) {
        let sent = self.send(item);
        self.unrung |= sent;
    }

    /// Sends `item` and rings now.
    pub fn send_now(&mut self, item: T) {
        self.send(item);
        self.unrung = false;
        self.bell.ring();
    }

    /// Rings when something was sent since the last ring.
    pub fn tick(&mut self) {
        if std::mem::take(&mut self.unrung) {
            self.bell.ring();
        }
    }
}

impl<T> Drop for Feed<T> {
    fn drop(&mut self) {
        drop(self.sender.take());
        self.bell.ring();
    }
}

/// Every record, into the live view's channel, rung once per sampling tick that brought some: a step that came
/// between two ticks shows at most one sampling interval late.
impl Observer for Feed<Record> {
    fn on_record(&mut self, record: &Record) {
        self.send_at_tick(record.clone());
    }

    fn tick(&mut self) {
        Feed::tick(self);
    }
}

/// What a viewer asks a recording's player: the viewer keeps the clock, the player reads the file on its own thread.
pub enum PlayerRequest {
    /// The records after the last ones sent, up to this time (ms).
    Advance(f64),
    /// The state as it was at this time (ms); later `Advance`s continue from there.
    Seek(f64),
}

pub enum PlayerReply {
    Records(Vec<Record>),
    Reset(Box<State>),
}

/// The viewer's end of a player.
pub struct PlayerLink {
    pub requests: mpsc::Sender<PlayerRequest>,
    pub replies: mpsc::Receiver<PlayerReply>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The view drains its feed only when rung, as the live view does: a full feed that did not ring would leave
    /// both waiting for ever.
    #[test]
    fn a_flood_into_a_feed_rings_the_view_waits_for_it_and_loses_nothing() {
        let (ring, rung) = mpsc::channel();
        let (mut feed, view) = Feed::channel(Bell::new(move || {
            let _ = ring.send(());
        }));
        let items = 3 * FEED_CAPACITY + 7;
        let sender = std::thread::spawn(move || {
            // Never a tick: only a full feed, and the end, ring the view.
            for i in 0..items {
                feed.send_at_tick(i);
            }
        });
        let mut received = 0;
        loop {
            rung.recv_timeout(Duration::from_secs(10))
                .expect("a full feed rings its view");
            let mut ended = false;
            loop {
                match view.try_recv() {
                    Ok(i) => {
                        assert_eq!(i, received);
                        received += 1;
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        ended = true;
                        break;
                    }
                }
            }
            if ended {
                break;
            }
        }
        sender.join().unwrap();
        assert_eq!(received, items);
    }
}
