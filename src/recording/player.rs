//! A recording as an event source: the records in order, and the state at any moment, folded into the player's
//! store. The same fold as a live session (`State::apply`), so a replay's summary is the live one by construction.
//!
//! The first pass through the file is the playback itself: each record is folded once, as the replay reaches it, and
//! every so many records a copy of the state (a checkpoint) is kept on the way. A seek restarts from the nearest
//! checkpoint before it, so no seek folds more than one checkpoint interval of records once the pass has been there.
//! Frames are read and parsed on every core and folded in order by whichever thread read them.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::checkpoints::Checkpoints;
use super::format::FrameInfo;
use super::reader::{FrameRecords, OpenError, Recording, SessionStarts};
use crate::channels::Notifier;
use crate::state::State;
use crate::store::{Contents, Store};
use golow_protocol::event::Record;

pub struct Player {
    recording: Recording,
    store: Store,
    fold: Fold,
    /// Every record up to this time has been folded.
    position_ms: f64,
}

/// Where the fold is in the file and what it keeps on the way: what a thread folding a frame changes, beside the
/// store.
struct Fold {
    /// The next frame to read, and the records of the current one not folded yet.
    next_frame: usize,
    queue: VecDeque<Record>,
    checkpoints: Checkpoints,
    /// Records folded since the player opened, for those who count what a replay costs.
    applied: u64,
    damage: Damage,
}

/// Frames that could not be read (and the records their markers counted), lines that were not records, each
/// counted on its first reading; and where a second session begins, if one does.
#[derive(Debug, Default)]
pub struct Damage {
    pub frames: u64,
    pub records: u64,
    pub bad_lines: u64,
    counted_up_to: usize,
    /// A record was read before: a session's start from now on begins a second session.
    read_any: bool,
    second_session: Option<SecondSession>,
}

/// Where a second session begins in a file that holds two: its `session_start`, after another session's records
/// (one session's records written after another's into one file). Nothing from it on is read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SecondSession {
    /// The byte where the frame holding its start begins, and its time.
    pub at: u64,
    pub t_ms: f64,
    frame: usize,
    record: usize,
}

impl std::fmt::Display for SecondSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "it holds two sessions: a second session starts at {:.1} s, in the frame at byte {}; golow reads one \
             session a file: record each to its own",
            self.t_ms / 1e3,
            self.at
        )
    }
}

impl Damage {
    /// The records of frame `i` as read (none when it is damaged, none from a second session's start on), its
    /// damage counted.
    fn records(
        &mut self,
        i: usize,
        info: &FrameInfo,
        frame: std::io::Result<FrameRecords>,
    ) -> Vec<Record> {
        let first_reading = i >= self.counted_up_to;
        self.counted_up_to = self.counted_up_to.max(i + 1);
        let (mut records, starts) = match frame {
            Ok(frame) => {
                if first_reading {
                    self.bad_lines += frame.bad_lines;
                }
                (frame.records, frame.session_starts)
            }
            Err(_) => {
                if first_reading {
                    self.frames += 1;
                    self.records += u64::from(info.events);
                }
                (Vec::new(), SessionStarts::default())
            }
        };
        if first_reading && self.second_session.is_none() {
            self.find_second_session(i, info, &records, starts);
        }
        match self.second_session {
            Some(second) if i > second.frame => records.clear(),
            Some(second) if i == second.frame => records.truncate(second.record),
            _ => {}
        }
        records
    }

    /// A session's start after any record read before begins a second session.
    fn find_second_session(
        &mut self,
        i: usize,
        info: &FrameInfo,
        records: &[Record],
        starts: SessionStarts,
    ) {
        let second = if starts.first_record && self.read_any {
            Some(0)
        } else {
            starts.later
        };
        self.read_any |= !records.is_empty();
        self.second_session = second.map(|record| SecondSession {
            at: info.offset - super::format::MARKER_LEN as u64,
            t_ms: records[record].t_ms,
            frame: i,
            record,
        });
    }
}

impl Player {
    pub fn open(path: &Path) -> Result<Player, OpenError> {
        let recording = Recording::open(path)?;
        let checkpoints = Checkpoints::for_records(recording.events());
        Ok(Player {
            recording,
            store: Store::default(),
            fold: Fold {
                next_frame: 0,
                queue: VecDeque::new(),
                checkpoints,
                applied: 0,
                damage: Damage::default(),
            },
            position_ms: f64::NEG_INFINITY,
        })
    }

    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// Frames and lines found damaged so far, and where a second session begins.
    pub fn damage(&self) -> &Damage {
        &self.fold.damage
    }

    /// Reads on to the current end of a recording still being written. A frame read before and now taken back (it
    /// lay far ahead of the frames after it) makes the player fold again from the start.
    pub fn refresh(&mut self) {
        let taken_back = self.recording.out_of_order.taken_back;
        self.recording.refresh();
        if self.recording.out_of_order.taken_back != taken_back {
            self.fold.checkpoints.forget();
            self.fold.damage = Damage::default();
            self.seek_to_checkpoint(0);
        }
    }

    /// Where a second session begins, once reading has reached it: nothing from there on was read.
    pub fn second_session(&self) -> Option<SecondSession> {
        self.fold.damage.second_session
    }

    /// The store the player folds into, for those who show what it plays.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The state as far as the player has folded, locked.
    pub fn state(&self) -> MutexGuard<'_, Contents> {
        self.store.lock()
    }

    pub fn into_state(self) -> State {
        self.store.take_state()
    }

    /// One line about damage found so far, for the user.
    pub fn damage_warning(&self) -> Option<String> {
        let damage = &self.fold.damage;
        let mut parts = Vec::new();
        if damage.frames > 0 {
            parts.push(format!(
                "{} damaged frame(s) ({} records) skipped",
                damage.frames, damage.records
            ));
        }
        if damage.bad_lines > 0 {
            parts.push(format!(
                "{} line(s) that are not records skipped",
                damage.bad_lines
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Folds every record up to and including `t_ms`, in file order up to the first one after it; returns how many.
    pub fn advance_to(&mut self, t_ms: f64) -> usize {
        self.position_ms = self.position_ms.max(t_ms);
        let before = self.fold.applied;
        self.fold.fold_queued(&mut self.store.lock(), t_ms);
        if self.fold.queue.is_empty() {
            // The frames starting no later than `t_ms`: the fold stops at the first record after it.
            let from = self.fold.next_frame;
            let frames = self.recording.frames.get(from..).unwrap_or_default();
            let to = from + frames.iter().take_while(|f| f.first_t_ms <= t_ms).count();
            self.fold_frames(from..to, t_ms);
        }
        (self.fold.applied - before) as usize
    }

    /// Records folded since the player opened, by every pass and seek.
    pub fn records_applied(&self) -> u64 {
        self.fold.applied
    }

    /// Every record from the start, in order, without folding (for export).
    pub fn records(&mut self) -> impl Iterator<Item = Record> + '_ {
        // A cursor of its own: the fold's position and state stay as they were.
        let (recording, damage) = (&self.recording, &mut self.fold.damage);
        (0..recording.frames.len())
            .flat_map(move |i| damage.records(i, &recording.frames[i], recording.read_frame(i)))
    }

    /// Folds everything from the start: the state at the end of the session. Keeps no checkpoint: nothing seeks in a
    /// player run to its end.
    pub fn run_to_end(&mut self) {
        self.fold.checkpoints.keep_none();
        self.seek_to_checkpoint(0);
        self.fold_frames(0..self.recording.frames.len(), f64::INFINITY);
        self.position_ms = f64::INFINITY;
    }

    /// The state as it was at `t_ms`, wherever the player is now.
    pub fn seek(&mut self, t_ms: f64) -> MutexGuard<'_, Contents> {
        let best = self.fold.checkpoints.best_for(&self.recording.frames, t_ms);
        if t_ms < self.position_ms || best > self.fold.next_frame {
            self.seek_to_checkpoint(best);
        }
        self.advance_to(t_ms);
        self.store.lock()
    }

    fn seek_to_checkpoint(&mut self, frame: usize) {
        let (frame, state) = self.fold.checkpoints.restore(frame);
        self.store.lock().restart(state);
        self.position_ms = f64::NEG_INFINITY;
        self.fold.next_frame = frame;
        self.fold.queue.clear();
    }

    /// Folds the records of `frames` in order, up to the first one after `t_ms` (it and the rest of its frame are
    /// queued). One thread per core takes the next stretch of frames (`Recording::stretches`), reads and parses it,
    /// waits for the stretch before it to be folded, and folds its own under the store's lock: the records are folded
    /// by the core that parsed them, still in its cache, no more threads run than there are cores, and a scrape or a
    /// view waits for one stretch's fold at most, never for a parse.
    fn fold_frames(&mut self, frames: Range<usize>, t_ms: f64) {
        let recording = &self.recording;
        let stretches = recording.stretches(frames);
        let turns = FoldOrder::new(Turn {
            next: 0,
            store: &self.store,
            fold: &mut self.fold,
            stopped: false,
        });
        let taken = AtomicUsize::new(0);
        let read_and_fold = || {
            loop {
                let k = taken.fetch_add(1, Ordering::Relaxed);
                let Some(frames) = stretches.get(k) else {
                    return;
                };
                let read = recording.read_stretch(frames.clone());
                let Some(mut held) = turns.wait_for(k) else {
                    return;
                };
                let turn = &mut *held.turn;
                if turn.stopped {
                    return;
                }
                let mut state = turn.store.lock();
                for (i, frame) in frames.clone().zip(read) {
                    if !turn.fold.fold_frame(&mut state, recording, i, frame, t_ms) {
                        turn.stopped = true;
                        return;
                    }
                }
            }
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads.min(stretches.len()) <= 1 {
            read_and_fold();
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads.min(stretches.len()) {
                    scope.spawn(read_and_fold);
                }
            });
        }
    }
}

impl Fold {
    /// Folds frame `i` as read into `state`, keeping a checkpoint before it when one is due, up to the first record
    /// after `t_ms`; false when it stopped there (that record and the rest are queued).
    fn fold_frame(
        &mut self,
        state: &mut Contents,
        recording: &Recording,
        i: usize,
        frame: std::io::Result<FrameRecords>,
        t_ms: f64,
    ) -> bool {
        self.checkpoints.keep_if_due(i, state);
        let records = self.damage.records(i, &recording.frames[i], frame);
        self.checkpoints.read(i, records.len());
        self.next_frame = i + 1;
        let mut records = records.into_iter();
        while let Some(record) = records.next() {
            if record.t_ms > t_ms {
                self.queue.push_back(record);
                self.queue.extend(records);
                return false;
            }
            state.apply(&record);
            self.applied += 1;
        }
        true
    }

    /// Folds the queued records up to the first one after `t_ms`.
    fn fold_queued(&mut self, state: &mut Contents, t_ms: f64) {
        while let Some(record) = self.queue.pop_front() {
            if record.t_ms > t_ms {
                self.queue.push_front(record);
                return;
            }
            state.apply(&record);
            self.applied += 1;
        }
    }
}

/// What the stretch whose turn it is folds into.
struct Turn<'a> {
    /// The stretch whose turn it is.
    next: usize,
    store: &'a Store,
    fold: &'a mut Fold,
    /// A record after the time folded to was reached: later stretches fold nothing.
    stopped: bool,
}

/// Stretches folded in their order, each by whichever thread read it.
struct FoldOrder<'a> {
    turn: Mutex<Turn<'a>>,
    changed: Condvar,
}

impl<'a> FoldOrder<'a> {
    fn new(turn: Turn<'a>) -> Self {
        FoldOrder {
            turn: Mutex::new(turn),
            changed: Condvar::new(),
        }
    }

    /// The fold, once stretch `k`'s turn comes; `None` when it never will (a thread panicked while folding).
    fn wait_for(&self, k: usize) -> Option<TurnHeld<'_, 'a>> {
        let turn = self
            .changed
            .wait_while(self.turn.lock().ok()?, |turn| turn.next != k)
            .ok()?;
        Some(TurnHeld {
            turn,
            changed: &self.changed,
        })
    }
}

/// The fold, held by the stretch whose turn it is.
struct TurnHeld<'t, 'a> {
    turn: MutexGuard<'t, Turn<'a>>,
    changed: &'t Condvar,
}

impl Drop for TurnHeld<'_, '_> {
    /// Passes the turn to the next stretch. A panic while folding poisons the lock instead, and the notice then
    /// ends the wait of every other thread.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.turn.next += 1;
        }
        self.changed.notify_all();
    }
}

/// What a viewer asks a recording's player: the viewer keeps the clock, the player reads the file on its own thread
/// and folds into its store, which the viewer draws from.
pub enum PlayerRequest {
    /// The records after the last ones folded, up to this time (ms).
    Advance(f64),
    /// The state as it was at this time (ms); later `Advance`s continue from there.
    Seek(f64),
}

/// Runs `player` on its own thread, answering a viewer's requests until the viewer goes away, and notifying `notifier`
/// after each answer is in the store; the thread then hands the player back. A recording still being written is read
/// on to its current end before each seek.
pub fn serve(
    mut player: Player,
    notifier: Notifier,
) -> std::io::Result<(mpsc::Sender<PlayerRequest>, JoinHandle<Player>)> {
    let (requests, incoming) = mpsc::channel();
    let played = std::thread::Builder::new()
        .name("golow-player".into())
        .spawn(move || {
            for request in incoming {
                match request {
                    PlayerRequest::Advance(t_ms) => {
                        player.advance_to(t_ms);
                    }
                    PlayerRequest::Seek(t_ms) => {
                        player.refresh();
                        drop(player.seek(t_ms));
                    }
                }
                notifier.notify();
            }
            player
        })?;
    Ok((requests, played))
}
