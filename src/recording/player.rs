//! A recording as an event source: the records in order, and the state at any moment, folded into the player's
//! store. The same fold as a live session (`State::apply`), so a replay's summary is the live one by construction.
//!
//! The first pass through the file is the playback itself: each record is folded once, as the replay reaches it, and
//! every so many records a copy of the state (a checkpoint) is kept on the way. A seek restarts from the nearest
//! checkpoint before it, so no seek folds more than one checkpoint interval of records once the pass has been there.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::format::FrameInfo;
use super::reader::{FrameRecords, OpenError, Recording, SessionStarts};
use crate::channels::Notifier;
use crate::state::State;
use crate::store::{Contents, Store};
use golow_protocol::event::Record;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// At most this many checkpoints, whatever the length: memory stays bounded. Even, so that thinning them keeps the
/// latest.
const MAX_CHECKPOINTS: usize = 24;
/// Records between checkpoints at least: closer ones would cost a copy of the state each and save little folding.
pub(super) const MIN_CHECKPOINT_RECORDS: u64 = 5_000;

pub struct Player {
    recording: Recording,
    store: Store,
    /// The next frame to read, and the records of the current one not folded yet.
    next_frame: usize,
    queue: VecDeque<Record>,
    /// (frame index, the state before that frame), in frame order; the first is the empty state.
    checkpoints: Vec<(usize, State)>,
    /// Records between checkpoints, and those read since the latest checkpoint's frame.
    spacing: u64,
    unsaved: u64,
    /// Records folded since the player opened, for those who count what a replay costs.
    applied: u64,
    /// Every record up to this time has been folded.
    position_ms: f64,
    pub damage: Damage,
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
        // A finished file's checkpoints fit in `MAX_CHECKPOINTS` (the first is the empty state); a growing one's are
        // thinned as it grows.
        let spacing =
            (recording.events() / (MAX_CHECKPOINTS as u64 - 1)).max(MIN_CHECKPOINT_RECORDS);
        Ok(Player {
            recording,
            store: Store::default(),
            next_frame: 0,
            queue: VecDeque::new(),
            checkpoints: vec![(0, State::default())],
            spacing,
            unsaved: 0,
            applied: 0,
            position_ms: f64::NEG_INFINITY,
            damage: Damage::default(),
        })
    }

    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// Reads on to the current end of a recording still being written. A frame read before and now taken back (it
    /// lay far ahead of the frames after it) makes the player fold again from the start.
    pub fn refresh(&mut self) {
        let taken_back = self.recording.out_of_order.taken_back;
        self.recording.refresh();
        if self.recording.out_of_order.taken_back != taken_back {
            self.checkpoints.truncate(1);
            self.damage = Damage::default();
            self.seek_to_checkpoint(0);
        }
    }

    /// Where a second session begins, once reading has reached it: nothing from there on was read.
    pub fn second_session(&self) -> Option<SecondSession> {
        self.damage.second_session
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
        let mut parts = Vec::new();
        if self.damage.frames > 0 {
            parts.push(format!(
                "{} damaged frame(s) ({} records) skipped",
                self.damage.frames, self.damage.records
            ));
        }
        if self.damage.bad_lines > 0 {
            parts.push(format!(
                "{} line(s) that are not records skipped",
                self.damage.bad_lines
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Folds every record up to and including `t_ms`; returns how many. Each frame is read and parsed with the
    /// store unlocked, and its records folded under one lock: a view or a scrape never waits for decompression.
    pub fn advance_to(&mut self, t_ms: f64) -> usize {
        self.position_ms = self.position_ms.max(t_ms);
        let mut count = 0;
        loop {
            count += self.fold_queued_up_to(t_ms);
            if !self.queue.is_empty() {
                return count;
            }
            let Some(frame) = self.recording.frames.get(self.next_frame) else {
                return count;
            };
            if frame.first_t_ms > t_ms {
                return count;
            }
            self.checkpoint_if_due();
            self.load_next_frame();
        }
    }

    /// Keeps the state before the next frame once `spacing` records have been read past the latest checkpoint. Past
    /// `MAX_CHECKPOINTS`, every other one is dropped and the spacing doubles: a growing file keeps as many.
    fn checkpoint_if_due(&mut self) {
        if self.unsaved < self.spacing {
            return;
        }
        let state = State::clone(&self.store.lock());
        self.checkpoints.push((self.next_frame, state));
        self.unsaved = 0;
        if self.checkpoints.len() > MAX_CHECKPOINTS {
            let mut kept = 0;
            self.checkpoints.retain(|_| {
                kept += 1;
                kept % 2 == 1
            });
            self.spacing *= 2;
        }
    }

    /// Records folded since the player opened, by every pass and seek.
    pub fn records_applied(&self) -> u64 {
        self.applied
    }

    /// Folds the queued records up to and including `t_ms`; returns how many.
    fn fold_queued_up_to(&mut self, t_ms: f64) -> usize {
        let mut folded = self.store.lock();
        let mut count = 0;
        while let Some(record) = self.queue.pop_front() {
            if record.t_ms > t_ms {
                self.queue.push_front(record);
                break;
            }
            folded.apply(&record);
            count += 1;
        }
        self.applied += count as u64;
        count
    }

    /// Every record from the start, in order, without folding (for export).
    pub fn records(&mut self) -> impl Iterator<Item = Record> + '_ {
        // A cursor of its own: the fold's position and state stay as they were.
        let (recording, damage) = (&self.recording, &mut self.damage);
        (0..recording.frames.len())
            .flat_map(move |i| damage.records(i, &recording.frames[i], recording.read_frame(i)))
    }

    /// Folds everything from the start: the state at the end of the session. One thread per core takes the next
    /// stretch of frames (`Recording::stretches`), reads and parses it, waits for the stretch before it to be
    /// folded, and folds its own under the store's lock: the records are folded by the core that parsed them, still
    /// in its cache, no more threads run than there are cores, and a scrape of the replay waits for one stretch's
    /// fold at most, never for a parse.
    pub fn run_to_end(&mut self) {
        self.seek_to_checkpoint(0);
        let recording = &self.recording;
        let stretches = recording.stretches();
        let turns = FoldOrder::new(Turn {
            next: 0,
            store: &self.store,
            damage: &mut self.damage,
            applied: &mut self.applied,
        });
        let taken = AtomicUsize::new(0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::thread::scope(|scope| {
            for _ in 0..threads.min(stretches.len()) {
                scope.spawn(|| {
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
                        let mut folded = turn.store.lock();
                        for (i, frame) in frames.clone().zip(read) {
                            let records = turn.damage.records(i, &recording.frames[i], frame);
                            records.iter().for_each(|r| folded.apply(r));
                            *turn.applied += records.len() as u64;
                        }
                    }
                });
            }
        });
        self.next_frame = recording.frames.len();
        self.position_ms = f64::INFINITY;
    }

    /// The state as it was at `t_ms`, wherever the player is now.
    pub fn seek(&mut self, t_ms: f64) -> MutexGuard<'_, Contents> {
        let best = self.best_checkpoint(t_ms);
        if t_ms < self.position_ms || best > self.next_frame {
            self.seek_to_checkpoint(best);
        }
        self.advance_to(t_ms);
        self.store.lock()
    }

    /// The latest checkpoint whose frame starts no later than `t_ms`.
    fn best_checkpoint(&self, t_ms: f64) -> usize {
        let frames = &self.recording.frames;
        let usable = self
            .checkpoints
            .partition_point(|(frame, _)| frames.get(*frame).is_none_or(|f| f.first_t_ms <= t_ms));
        self.checkpoints[usable.saturating_sub(1)].0
    }

    fn seek_to_checkpoint(&mut self, frame: usize) {
        let at = self.checkpoints.partition_point(|(f, _)| *f <= frame);
        let (frame, state) = &self.checkpoints[at.saturating_sub(1)];
        let state = state.clone();
        self.store.lock().restart(state);
        self.position_ms = f64::NEG_INFINITY;
        self.next_frame = *frame;
        self.queue.clear();
        self.unsaved = 0;
    }

    fn load_next_frame(&mut self) {
        let i = self.next_frame;
        self.next_frame += 1;
        let records =
            self.damage
                .records(i, &self.recording.frames[i], self.recording.read_frame(i));
        let latest = self.checkpoints.last().map_or(0, |(frame, _)| *frame);
        if i >= latest {
            self.unsaved += records.len() as u64;
        }
        self.queue.extend(records);
    }
}

/// What the stretch whose turn it is folds into.
struct Turn<'a> {
    /// The stretch whose turn it is.
    next: usize,
    store: &'a Store,
    damage: &'a mut Damage,
    applied: &'a mut u64,
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
