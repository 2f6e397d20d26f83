//! The store: what one source's records fold into, shared by all who show it. Whoever drains a source folds it here,
//! once: the session's hub in a live or headless run, the player's thread in a replay. The views, headless progress
//! and the metrics endpoint only read it, locking it once per frame or scrape; a reader that keeps something beside
//! the state (the kernels a scrape named) starts it afresh when the store's generation moves on.

mod changes;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use golow_protocol::event::Record;

pub use changes::{Changes, SHOW_EVERY};

use crate::state::State;

/// One source's fold, shared: cloning it shares it.
#[derive(Clone, Default)]
pub struct Store(Arc<Mutex<Contents>>);

impl Store {
    /// The fold, locked: hold it for a frame or a scrape, not longer.
    pub fn lock(&self) -> MutexGuard<'_, Contents> {
        // A reader that panicked while drawing left the state as whole as the last record made it.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state as the source left it, the store emptied.
    pub fn take_state(&self) -> State {
        std::mem::take(&mut self.lock().state)
    }
}

/// The state, what changed in it since a view last drew, and how many times it was started afresh.
#[derive(Default)]
pub struct Contents {
    state: State,
    changes: Changes,
    generation: u64,
}

impl Contents {
    pub fn apply(&mut self, record: &Record) {
        self.state.apply(record);
        self.changes |= Changes::of(&record.body);
    }

    /// Replaces the state whole (a seek, or the next session of a sweep or a run of several): everything on screen
    /// changed.
    pub fn restart(&mut self, state: State) {
        self.state = state;
        self.changes = Changes::OTHER;
        self.generation += 1;
    }

    /// What changed since the last call; a view draws it.
    pub fn take_changes(&mut self) -> Changes {
        std::mem::replace(&mut self.changes, Changes::NONE)
    }

    /// Moves on each time the state is started afresh.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl std::ops::Deref for Contents {
    type Target = State;

    fn deref(&self) -> &State {
        &self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::event::Body;
    use golow_protocol::samples::every_body;

    #[test]
    fn changes_are_taken_once_and_a_restart_changes_everything_and_moves_the_generation_on() {
        let store = Store::default();
        let step = every_body()
            .into_iter()
            .find(|b| matches!(b, Body::Step(_)))
            .unwrap();
        let mut folded = store.lock();
        folded.apply(&Record::new(1.0, Some("libtorch".into()), step));
        assert_eq!(folded.take_changes(), Changes::STEPS);
        assert_eq!(folded.take_changes(), Changes::NONE);
        let first = folded.generation();
        folded.restart(State::default());
        assert_eq!(folded.take_changes(), Changes::OTHER);
        assert!(folded.generation() > first);
        drop(folded);
        assert_eq!(store.take_state().t_ms, 0.0);
    }
}
