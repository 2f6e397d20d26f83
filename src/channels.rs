//! The contracts between the monitor's parts, in one place beside the wire contracts of golow-protocol (the event
//! schema, configurations, the collector's windows and the worker channels). Parts meet only through these:
//!
//! - a running session takes [`Control`]s (from the UI or a sweep) to stop workers;
//! - whatever feeds a full-screen view (a session, a player, a sweep) notifies the view's [`Notifier`] once it has
//!   folded or sent something, so that the view sleeps until then; what comes item by item (a sweep's updates) travels
//!   in a [`ViewChannel`].
//!
//! What a source's records fold into is the store (`store`); who follows a session record by record is its
//! `Observer` (`session/observer.rs`); what a viewer asks a recording's player is beside the player.

use std::sync::{Arc, mpsc};

/// What the UI (or a sweep being stopped) may ask of a running session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Stop every worker (quit, or Ctrl-C).
    StopAll,
    /// Stop one worker, by its index in the session's worker list.
    Stop(usize),
}

/// Notified by whatever feeds a view once it has sent something. A view sleeps until a key or a notification rather
/// than waking on a timer of its own: the moments it runs are the moments its feed ran anyway, which is what keeps a
/// monitor's wake-ups from preempting the workers it watches more often than it must.
#[derive(Clone)]
pub struct Notifier(Arc<dyn Fn() + Send + Sync>);

impl Notifier {
    pub fn new(notify: impl Fn() + Send + Sync + 'static) -> Notifier {
        Notifier(Arc::new(notify))
    }

    pub fn notify(&self) {
        (self.0)();
    }
}

/// Items a view may be behind its feed: past them the feed waits for the view (a flood from a worker), so that
/// memory stays bounded; a view drains its feed at every wake, so in practice it never waits.
pub const FEED_CAPACITY: usize = 65_536;

/// A channel to a view's thread with the view's notifier. What comes as it happens is sent and notified at once; what
/// comes often (records, steps) is sent and notified at the session's next tick, when the hub is awake anyway. Dropping
/// the feed closes the channel and notifies, so that the view hears of the end.
pub struct ViewChannel<T> {
    sender: Option<mpsc::SyncSender<T>>,
    notifier: Notifier,
    /// Something was sent since the last notification.
    unnotified: bool,
}

impl<T> ViewChannel<T> {
    /// A feed of at most `FEED_CAPACITY` items in flight, and the view's end of it.
    pub fn channel(notifier: Notifier) -> (ViewChannel<T>, mpsc::Receiver<T>) {
        let (sender, receiver) = mpsc::sync_channel(FEED_CAPACITY);
        let feed = ViewChannel {
            sender: Some(sender),
            notifier,
            unnotified: false,
        };
        (feed, receiver)
    }

    /// Sends `item`, waiting for the view when it is `FEED_CAPACITY` behind (after notifying it, or it would never
    /// come); false once the view is gone.
    fn send(&mut self, item: T) -> bool {
        let Some(sender) = &self.sender else {
            return false;
        };
        match sender.try_send(item) {
            Ok(()) => true,
            Err(mpsc::TrySendError::Full(item)) => {
                self.notifier.notify();
                sender.send(item).is_ok()
            }
            Err(mpsc::TrySendError::Disconnected(_)) => false,
        }
    }

    /// Sends `item`; the view hears of it at the next tick.
    pub fn send_at_tick(&mut self, item: T) {
        let sent = self.send(item);
        self.unnotified |= sent;
    }

    /// Sends `item` and notifies now.
    pub fn send_now(&mut self, item: T) {
        self.send(item);
        self.unnotified = false;
        self.notifier.notify();
    }

    /// Notifies when something was sent since the last notification.
    pub fn tick(&mut self) {
        if std::mem::take(&mut self.unnotified) {
            self.notifier.notify();
        }
    }
}

impl<T> Drop for ViewChannel<T> {
    fn drop(&mut self) {
        drop(self.sender.take());
        self.notifier.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The view drains its feed only when notified, as the live view does: a full feed that did not notify would leave
    /// both waiting for ever.
    #[test]
    fn a_flood_into_a_feed_rings_the_view_waits_for_it_and_loses_nothing() {
        let (ring, rung) = mpsc::channel();
        let (mut feed, view) = ViewChannel::channel(Notifier::new(move || {
            let _ = ring.send(());
        }));
        let items = 3 * FEED_CAPACITY + 7;
        let sender = std::thread::spawn(move || {
            // Never a tick: only a full feed, and the end, notify the view.
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
