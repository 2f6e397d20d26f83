//! Copies of the state kept as a player reads a recording, so that a seek folds from the nearest one before it
//! rather than from the start. A copy is small (a series shares its points with its copies, a histogram's copy keeps
//! only the buckets that are not empty), so hundreds are kept.

use super::format::FrameInfo;
use crate::state::State;

/// At most this many checkpoints, whatever the length: memory stays bounded. Even, so that thinning them keeps the
/// latest.
const MAX_CHECKPOINTS: usize = 256;
/// Records between checkpoints at least: closer ones would cost a copy of the state each and save little folding.
pub(super) const MIN_CHECKPOINT_RECORDS: u64 = 5_000;

pub(super) struct Checkpoints {
    /// (frame index, the state before that frame), in frame order; the first is the empty state.
    kept: Vec<(usize, State)>,
    /// Records between checkpoints, and those read since the latest checkpoint's frame.
    spacing: u64,
    unsaved: u64,
}

impl Checkpoints {
    /// Checkpoints for a file of `records`: a finished file's fit in `MAX_CHECKPOINTS` (the first is the empty state);
    /// a growing one's are thinned as it grows.
    pub(super) fn for_records(records: u64) -> Checkpoints {
        Checkpoints {
            kept: vec![(0, State::default())],
            spacing: (records / (MAX_CHECKPOINTS as u64 - 1)).max(MIN_CHECKPOINT_RECORDS),
            unsaved: 0,
        }
    }

    /// Keeps none but the empty state from now on: for a fold that is never sought back in.
    pub(super) fn keep_none(&mut self) {
        self.kept.truncate(1);
        self.spacing = u64::MAX;
    }

    /// Drops all but the empty state: what they were folded from has changed.
    pub(super) fn forget(&mut self) {
        self.kept.truncate(1);
        self.unsaved = 0;
    }

    /// Counts the records of frame `frame` as read; those of frames past the latest checkpoint count towards the next.
    pub(super) fn read(&mut self, frame: usize, records: usize) {
        if frame >= self.latest_frame() {
            self.unsaved += records as u64;
        }
    }

    /// Keeps `state`, the state before frame `frame`, once `spacing` records have been read past the latest
    /// checkpoint. Past `MAX_CHECKPOINTS`, every other one is dropped and the spacing doubles: a growing file keeps
    /// as many.
    pub(super) fn keep_if_due(&mut self, frame: usize, state: &State) {
        if self.unsaved < self.spacing {
            return;
        }
        self.kept.push((frame, state.clone()));
        self.unsaved = 0;
        if self.kept.len() > MAX_CHECKPOINTS {
            let mut kept = 0;
            self.kept.retain(|_| {
                kept += 1;
                kept % 2 == 1
            });
            self.spacing = self.spacing.saturating_mul(2);
        }
    }

    /// The frame of the latest checkpoint whose frame starts no later than `t_ms`.
    pub(super) fn best_for(&self, frames: &[FrameInfo], t_ms: f64) -> usize {
        let usable = self
            .kept
            .partition_point(|(frame, _)| frames.get(*frame).is_none_or(|f| f.first_t_ms <= t_ms));
        self.kept[usable.saturating_sub(1)].0
    }

    /// The latest checkpoint at or before `frame`: its frame and a copy of its state. Nothing read since counts.
    pub(super) fn restore(&mut self, frame: usize) -> (usize, State) {
        let at = self.kept.partition_point(|(f, _)| *f <= frame);
        let (frame, state) = &self.kept[at.saturating_sub(1)];
        self.unsaved = 0;
        (*frame, state.clone())
    }

    fn latest_frame(&self) -> usize {
        self.kept.last().map_or(0, |(frame, _)| *frame)
    }
}
