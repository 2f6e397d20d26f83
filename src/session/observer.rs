//! What a running session hands to those who follow it record by record, on the session's thread: each record as
//! the hub stamps it, and the state the hub's one fold made of it to read while the store is locked. Most followers
//! need only the state, and read the session's store instead; an observer is for what needs every record (the
//! recorder, a progress display that passes a command's output through, a sweep's step counter). What an observer
//! does that can wait (writing) happens after the store's lock is released, so that it holds up only the session's
//! thread: the views, their keys and `/metrics` read on.

use std::time::Instant;

use golow_protocol::event::Record;

use crate::channels::Notifier;
use crate::recording::Sink;
use crate::state::State;
use crate::store::Changes;

pub trait Observer {
    /// Takes from `state`, as folding `record` left it, what [`Observer::on_record`] will need. Called under the
    /// store's lock, which every view, key and scrape waits for meanwhile: it copies and computes, and never waits
    /// or writes.
    fn read(&mut self, _record: &Record, _state: &State) {}
    /// `record`, once the store's lock is released: the observer's own work, which may wait (the recorder's room, a
    /// stderr nobody reads) and so holds up the session's thread alone, never a reader of the store.
    fn on_record(&mut self, record: &Record);
    /// Called at every sampling interval, records or not (for what must not wait for the next one), outside the
    /// store's lock.
    fn tick(&mut self) {}
    /// Why the observer can no longer do its work (a recording that failed), said once; the hub records it so that
    /// every view and the summary tell it while the session goes on.
    fn failure(&mut self) -> Option<String> {
        None
    }
}

/// An observer that may be absent (a run with `--no-record`).
impl<T: Observer> Observer for Option<T> {
    fn read(&mut self, record: &Record, state: &State) {
        if let Some(observer) = self {
            observer.read(record, state);
        }
    }

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
    fn read(&mut self, record: &Record, state: &State) {
        (**self).read(record, state);
    }

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
    fn read(&mut self, record: &Record, state: &State) {
        self.0.read(record, state);
        self.1.read(record, state);
    }

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

/// The recorder writes every record as it was stamped; it never reads the state. Its writer's backpressure waits
/// here, outside the store's lock.
impl Observer for Sink {
    fn on_record(&mut self, record: &Record) {
        self.write(record);
    }

    fn failure(&mut self) -> Option<String> {
        Sink::failure(self)
    }
}

/// Notifies a view's notifier at a sampling tick once the records since its last notification are due to be shown
/// ([`Changes::due`]), and once at the end: what the view shows is in the store. A view woken only to find nothing
/// it would draw yet is a wake-up the workers pay for, ten times a second.
pub struct TickBell {
    notifier: Notifier,
    unnotified: Changes,
    rung: Instant,
}

impl TickBell {
    pub fn new(notifier: Notifier) -> TickBell {
        TickBell {
            notifier,
            unnotified: Changes::NONE,
            rung: Instant::now(),
        }
    }
}

impl Observer for TickBell {
    fn on_record(&mut self, record: &Record) {
        self.unnotified |= Changes::of(&record.body);
    }

    fn tick(&mut self) {
        if self.unnotified.due(self.rung.elapsed()) {
            self.notifier.notify();
            self.unnotified = Changes::NONE;
            self.rung = Instant::now();
        }
    }
}

impl Drop for TickBell {
    /// The session's last records (its end) come after its last tick.
    fn drop(&mut self) {
        self.notifier.notify();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use golow_protocol::event::Body;
    use golow_protocol::samples::every_body;

    use super::*;
    use crate::store::SHOW_EVERY;

    fn record(matching: impl Fn(&Body) -> bool) -> Record {
        let body = every_body().into_iter().find(matching).unwrap();
        Record::new(1.0, Some("libtorch".into()), body)
    }

    #[test]
    fn the_bell_rings_at_a_tick_once_what_came_is_due_and_at_the_end() {
        let rings = Arc::new(AtomicUsize::new(0));
        let counted = rings.clone();
        let mut notifier = TickBell::new(Notifier::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        let rung = || rings.load(Ordering::SeqCst);
        notifier.tick();
        assert_eq!(rung(), 0, "nothing came");
        notifier.on_record(&record(|b| matches!(b, Body::WorkerStarted { .. })));
        notifier.tick();
        assert_eq!(rung(), 1, "a worker started: at once");
        let step = record(|b| matches!(b, Body::Step(_)));
        notifier.on_record(&step);
        notifier.tick();
        notifier.on_record(&record(|b| matches!(b, Body::TurnEnd(_))));
        notifier.tick();
        assert_eq!(rung(), 1, "a step right after a ring waits");
        std::thread::sleep(SHOW_EVERY + Duration::from_millis(10));
        notifier.tick();
        assert_eq!(rung(), 2, "the step, once due");
        notifier.tick();
        assert_eq!(rung(), 2, "rung once");
        drop(notifier);
        assert_eq!(rung(), 3, "the end");
    }
}
