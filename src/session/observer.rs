//! What a running session hands to those who follow it record by record, on the session's thread: each record as
//! the hub stamps it, with the state the hub's one fold made of it. Most followers need only the state, and read the
//! session's store instead; an observer is for what needs every record (the recorder, a progress display that
//! passes a command's output through, a sweep's step counter).

use golow_protocol::event::Record;

use crate::contracts::Bell;
use crate::recording::Sink;
use crate::state::State;

pub trait Observer {
    /// `record`, and `state` as folding it left it.
    fn on_record(&mut self, record: &Record, state: &State);
    /// Called at every sampling interval, records or not (for what must not wait for the next one).
    fn tick(&mut self, _state: &State) {}
    /// Why the observer can no longer do its work (a recording that failed), said once; the hub records it so that
    /// every view and the summary tell it while the session goes on.
    fn failure(&mut self) -> Option<String> {
        None
    }
}

/// An observer that may be absent (a run with `--no-record`).
impl<T: Observer> Observer for Option<T> {
    fn on_record(&mut self, record: &Record, state: &State) {
        if let Some(observer) = self {
            observer.on_record(record, state);
        }
    }

    fn tick(&mut self, state: &State) {
        if let Some(observer) = self {
            observer.tick(state);
        }
    }

    fn failure(&mut self) -> Option<String> {
        self.as_mut().and_then(Observer::failure)
    }
}

/// An observer lent for one session (a sweep's progress lives across its cells).
impl<T: Observer + ?Sized> Observer for &mut T {
    fn on_record(&mut self, record: &Record, state: &State) {
        (**self).on_record(record, state);
    }

    fn tick(&mut self, state: &State) {
        (**self).tick(state);
    }

    fn failure(&mut self) -> Option<String> {
        (**self).failure()
    }
}

/// Two observers as one, each seeing every record in turn.
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn on_record(&mut self, record: &Record, state: &State) {
        self.0.on_record(record, state);
        self.1.on_record(record, state);
    }

    fn tick(&mut self, state: &State) {
        self.0.tick(state);
        self.1.tick(state);
    }

    fn failure(&mut self) -> Option<String> {
        self.0.failure().or_else(|| self.1.failure())
    }
}

/// The recorder writes every record as it was stamped; it never reads the state.
impl Observer for Sink {
    fn on_record(&mut self, record: &Record, _: &State) {
        self.write(record);
    }

    fn tick(&mut self, _: &State) {
        Sink::tick(self);
    }

    fn failure(&mut self) -> Option<String> {
        Sink::failure(self)
    }
}

/// Rings a view's bell once per sampling tick that brought records, and once at the end: what the view shows is in
/// the store, and a step that came between two ticks shows at most one sampling interval late.
pub struct TickBell {
    bell: Bell,
    unrung: bool,
}

impl TickBell {
    pub fn new(bell: Bell) -> TickBell {
        TickBell {
            bell,
            unrung: false,
        }
    }
}

impl Observer for TickBell {
    fn on_record(&mut self, _: &Record, _: &State) {
        self.unrung = true;
    }

    fn tick(&mut self, _: &State) {
        if std::mem::take(&mut self.unrung) {
            self.bell.ring();
        }
    }
}

impl Drop for TickBell {
    /// The session's last records (its end) come after its last tick.
    fn drop(&mut self) {
        self.bell.ring();
    }
}
