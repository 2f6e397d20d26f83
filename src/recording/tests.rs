//! Recordings written by the real recorder and read back: every kind of record, and every way a file
//! can be damaged.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::format::{FORMAT_VERSION, Header, MARKER_LEN};
use super::{OpenError, Player, Recorder, Recording};
use golow_protocol::config::{GpuPolicy, Mode, Model, Optimiser, Schedule, SessionConfig};
use golow_protocol::event::{Body, Record};
use golow_protocol::samples::every_body;

fn config() -> SessionConfig {
    SessionConfig {
        workers: vec!["libtorch".into(), "pytorch".into()],
        commands: Default::default(),
        model: Model::Resnet18,
        dataset: "synthetic".into(),
        mode: Mode::Train,
        batch_size: 4,
        resolution: 32,
        steps: 10,
        warmup: 1,
        device: "cpu".into(),
        threads: 2,
        schedule: Schedule::Alternate,
        seed: 0,
        pinned: false,
        optimiser: Optimiser::default(),
        gpu_policy: Some(GpuPolicy::default()),
        compile_mode: Default::default(),
        command_env: Default::default(),
        stall_after_s: golow_protocol::config::DEFAULT_STALL_AFTER_S,
        monotonic_origin_ns: None,
        ops_every: 10,
        attached: Default::default(),
    }
}

fn header() -> Header {
    Header::new(
        &config(),
        vec!["golow".into(), "run".into()],
        crate::telemetry::machine::describe(),
    )
}

/// Every kind of record, `rounds` times over, 0.25 s apart, alternating workers; the session's start only first, as
/// in a session (another would begin a second session).
fn records(rounds: usize) -> Vec<Record> {
    let bodies = every_body();
    (0..rounds * bodies.len())
        .filter(|&i| i == 0 || !matches!(bodies[i % bodies.len()], Body::SessionStart(_)))
        .enumerate()
        .map(|(k, i)| {
            let worker = ["libtorch", "pytorch"][k % 2];
            Record::new(
                k as f64 * 250.0,
                Some(worker.into()),
                bodies[i % bodies.len()].clone(),
            )
        })
        .collect()
}

/// Writes `records` through a recorder; a frame is cut after every `per_frame` records.
fn write(path: &Path, header: &Header, records: &[Record], per_frame: usize) {
    let (recorder, mut sink) = Recorder::create(path, header).expect("create");
    for (i, record) in records.iter().enumerate() {
        sink.write(record);
        if (i + 1) % per_frame == 0 {
            sink.flush();
        }
    }
    drop(sink);
    let written = recorder.finish().expect("finish");
    assert_eq!(written.events, records.len() as u64);
}

fn read_all(path: &Path) -> (Player, Vec<Record>) {
    let mut player = Player::open(path).expect("open");
    let records: Vec<Record> = player.records().collect();
    (player, records)
}

fn recorded(rounds: usize, per_frame: usize) -> (tempfile::TempDir, PathBuf, Vec<Record>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("session.golow");
    let records = records(rounds);
    write(&path, &header(), &records, per_frame);
    (dir, path, records)
}

#[test]
fn every_kind_of_record_round_trips_and_the_index_is_used() {
    let (_dir, path, written) = recorded(2, 11);
    let (mut player, read) = read_all(&path);
    assert_eq!(read, written);
    // Reading every record leaves the fold where it was: a seek still sees the whole session.
    assert_eq!(
        player.seek(f64::INFINITY).t_ms,
        written.last().unwrap().t_ms
    );
    let recording = player.recording();
    assert!(recording.closed_cleanly);
    assert!(recording.frames.len() >= 3, "{:?}", recording.frames);
    assert_eq!(recording.warning(), None);
    assert_eq!(recording.header, header_with_time(&recording.header));
    assert_eq!(recording.duration_ms(), written.last().unwrap().t_ms);
}

/// The header as written, but for its creation time.
fn header_with_time(read: &Header) -> Header {
    Header {
        created_utc: read.created_utc.clone(),
        ..header()
    }
}

#[test]
fn a_file_cut_anywhere_replays_its_complete_frames() {
    let (dir, path, written) = recorded(2, 5);
    let bytes = std::fs::read(&path).unwrap();
    let full = Recording::open(&path).unwrap();
    let header_end = full.frames[0].offset as usize - MARKER_LEN;
    let cut = dir.path().join("cut.golow");
    for at in (0..bytes.len()).step_by(7).chain([bytes.len() - 1]) {
        std::fs::write(&cut, &bytes[..at]).unwrap();
        match Player::open(&cut) {
            Err(e) => assert!(at < header_end, "cut at {at} of {}: {e}", bytes.len()),
            Ok(mut player) => {
                assert!(at >= header_end, "cut at {at} inside the header opened");
                let read: Vec<Record> = player.records().collect();
                assert_eq!(read[..], written[..read.len()], "cut at {at}");
                let frames_whole = full
                    .frames
                    .iter()
                    .filter(|f| f.offset + u64::from(f.compressed_len) <= at as u64);
                let expected: u32 = frames_whole.map(|f| f.events).sum();
                assert_eq!(read.len(), expected as usize, "cut at {at}");
                assert!(!player.recording().closed_cleanly);
                assert!(player.recording().warning().is_some());
            }
        }
    }
}

#[test]
fn damaged_frames_and_markers_are_skipped_and_counted() {
    let (dir, path, written) = recorded(2, 5);
    let bytes = std::fs::read(&path).unwrap();
    let full = Recording::open(&path).unwrap();
    let middle = full.frames[full.frames.len() / 2];
    let lost = middle.events as usize;

    // Damage inside a frame's compressed bytes: its checksum fails, the frame is skipped.
    let mut damaged = bytes.clone();
    damaged[middle.offset as usize + middle.compressed_len as usize / 2] ^= 0xff;
    let file = dir.path().join("damaged.golow");
    std::fs::write(&file, &damaged).unwrap();
    let (mut player, read) = read_all(&file);
    assert_eq!(read.len(), written.len() - lost);
    assert_eq!(player.damage().frames, 1);
    assert!(player.damage_warning().unwrap().contains("1 damaged frame"));
    player.run_to_end();
    assert!(player.state().ended);

    // Damage in a marker (and a missing index): the scan steps over it to the next marker.
    let mut damaged = bytes[..bytes.len() - 20].to_vec();
    damaged[middle.offset as usize - MARKER_LEN + 12] ^= 0xff;
    std::fs::write(&file, &damaged).unwrap();
    let (player, read) = read_all(&file);
    assert_eq!(player.recording().damaged_regions, 1);
    assert_eq!(read.len(), written.len() - lost);
    assert!(player.recording().warning().unwrap().contains("damaged"));
}

#[test]
fn foreign_and_future_files_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.golow");
    std::fs::write(&text, "just some text\n").unwrap();
    let empty = dir.path().join("empty.golow");
    std::fs::write(&empty, "").unwrap();
    for file in [&text, &empty] {
        let err = Recording::open(file).err().expect("refused");
        assert!(matches!(err, OpenError::NotGolow(_)), "{err}");
    }

    let other = dir.path().join("other.golow");
    let header_of_other = Header {
        format: "someone-else".into(),
        ..header()
    };
    write(&other, &header_of_other, &records(1), 100);
    let err = Recording::open(&other).err().expect("refused").to_string();
    assert!(err.contains("someone-else") && !err.contains('\n'), "{err}");

    let future = dir.path().join("future.golow");
    let header_of_future = Header {
        version: FORMAT_VERSION + 1,
        ..header()
    };
    write(&future, &header_of_future, &records(1), 100);
    let err = Recording::open(&future).err().expect("refused").to_string();
    assert!(
        err.contains("newer") && err.contains("update golow"),
        "{err}"
    );
}

#[test]
fn seeking_gives_the_state_as_it_was_at_any_time() {
    let (_dir, path, written) = recorded(3, 7);
    let mut player = Player::open(&path).unwrap();
    let end = player.seek(f64::INFINITY).clone();
    for t in [3_000.0, 250.0, 9_000.0, 0.0, 1e9, 5_500.0] {
        seek_and_compare(&mut player, &written, t);
    }
    assert_eq!(player.seek(1e12).t_ms, end.t_ms);
}

/// Seeks `player` to `t` and checks what it holds against `written` folded afresh up to `t`; returns how many
/// records the seek folded.
fn seek_and_compare(player: &mut Player, written: &[Record], t: f64) -> u64 {
    let mut expected = crate::state::State::default();
    written
        .iter()
        .filter(|r| r.t_ms <= t)
        .for_each(|r| expected.apply(r));
    let before = player.records_applied();
    let at = player.seek(t);
    assert_eq!(at.t_ms, expected.t_ms, "seek to {t}");
    assert_eq!(at.workers.len(), expected.workers.len(), "seek to {t}");
    for (a, b) in at.workers.iter().zip(&expected.workers) {
        assert_eq!((a.steps, a.samples), (b.steps, b.samples), "seek to {t}");
        assert_eq!(a.series.loss.len(), b.series.loss.len(), "seek to {t}");
    }
    drop(at);
    player.records_applied() - before
}

/// Seeks back and forth over `written`, each folding at most one checkpoint interval of records (and the rest of
/// the frame it ends in).
fn seeks_fold_at_most_an_interval(player: &mut Player, written: &[Record]) {
    let end = written.last().unwrap().t_ms;
    let frame = player
        .recording()
        .frames
        .iter()
        .map(|f| f.events)
        .max()
        .unwrap();
    let interval = super::checkpoints::MIN_CHECKPOINT_RECORDS + u64::from(frame);
    for share in [0.9, 0.2, 0.6, 0.0, 0.95, 0.5, 0.1] {
        let folded = seek_and_compare(player, written, end * share);
        assert!(
            folded <= interval,
            "a seek to {share} of the way folded {folded} records"
        );
    }
}

/// Records enough for a few checkpoint intervals: a seek that folds from the start folds several times what one
/// from a checkpoint may.
fn long_session() -> Vec<Record> {
    let rounds = (4 * super::checkpoints::MIN_CHECKPOINT_RECORDS) as usize / every_body().len();
    records(rounds)
}

/// An interactive replay as `serve` plays it (the state at 0, then on as the timeline moves) folds each record once,
/// keeping checkpoints on the way; a seek then folds at most one checkpoint interval of records.
#[test]
fn a_replay_folds_each_record_once_and_seeks_from_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.golow");
    let written = long_session();
    write(&path, &header(), &written, usize::MAX);
    let mut player = Player::open(&path).unwrap();
    drop(player.seek(0.0));
    let end = written.last().unwrap().t_ms;
    let mut t = 0.0;
    while t < end {
        t += 2_000.0;
        player.advance_to(t);
    }
    assert_eq!(player.state().t_ms, end);
    assert_eq!(player.records_applied(), written.len() as u64);
    seeks_fold_at_most_an_interval(&mut player, &written);
}

/// Live scroll-back: a player of the file a session is still writing, asked as the live view asks it (read on to
/// the file's end, then seek), keeps checkpoints as it reads the growing file.
#[test]
fn scroll_back_in_a_growing_recording_seeks_from_checkpoints_kept_as_it_grew() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.golow");
    let (recorder, mut sink) = Recorder::create(&path, &header()).unwrap();
    let mut player = Player::open(&path).unwrap();
    let written = long_session();
    let mut on_disk = 0;
    for part in written.chunks(written.len() / 3 + 1) {
        part.iter().for_each(|r| sink.write(r));
        on_disk += part.len() as u64;
        let waited = std::time::Instant::now();
        while player.recording().events() < on_disk {
            assert!(
                waited.elapsed().as_secs() < 60,
                "the recorder wrote nothing"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
            player.refresh();
        }
        seek_and_compare(&mut player, &written, part[part.len() - 1].t_ms);
    }
    assert_eq!(player.records_applied(), written.len() as u64);
    seeks_fold_at_most_an_interval(&mut player, &written);
    drop(sink);
    recorder.finish().unwrap();
}

#[test]
fn a_recording_being_written_is_read_on_as_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.golow");
    let (recorder, mut sink) = Recorder::create(&path, &header()).unwrap();
    let all = records(2);
    let (early, late) = all.split_at(all.len() / 2);
    early.iter().for_each(|r| sink.write(r));
    sink.flush();
    let mut player = Player::open(&path).unwrap();
    assert_eq!(player.recording().events(), early.len() as u64);
    late.iter().for_each(|r| sink.write(r));
    sink.flush();
    assert_eq!(player.recording().events(), early.len() as u64);
    player.refresh();
    assert_eq!(player.recording().events(), all.len() as u64);
    assert_eq!(player.seek(f64::INFINITY).t_ms, all.last().unwrap().t_ms);
    assert_eq!(
        player
            .recording()
            .warning()
            .map(|w| w.contains("not closed")),
        Some(true)
    );
    drop(sink);
    recorder.finish().unwrap();
}

/// Records as a live session gives them, one every 50 ms: each is on disk within the promised second (and a
/// scheduling margin), and each frame holds a whole second, since a second's records compressed apart in two frames
/// take a fifth more bytes.
#[test]
fn a_live_sessions_frames_hold_their_second_and_none_waits_longer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.golow");
    let (recorder, mut sink) = Recorder::create(&path, &header()).unwrap();
    let bodies = every_body();
    let start = std::time::Instant::now();
    let mut written: Vec<f64> = Vec::new();
    let margin_ms = 400.0;
    for i in 0..100 {
        let t_ms = start.elapsed().as_secs_f64() * 1e3;
        sink.write(&Record::new(t_ms, None, bodies[i % bodies.len()].clone()));
        written.push(t_ms);
        if i % 10 == 9 {
            let now_ms = start.elapsed().as_secs_f64() * 1e3;
            let due = written
                .iter()
                .filter(|t| **t < now_ms - super::FLUSH_EVERY.as_secs_f64() * 1e3 - margin_ms)
                .count();
            let on_disk = Recording::open(&path).unwrap().events();
            assert!(
                on_disk >= due as u64,
                "{on_disk} on disk at {now_ms:.0} ms, {due} due"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(sink);
    recorder.finish().unwrap();
    let frames = &Recording::open(&path).unwrap().frames;
    for frame in frames {
        let second_ms = super::FLUSH_EVERY.as_secs_f64() * 1e3;
        assert!(frame.last_t_ms - frame.first_t_ms < second_ms, "{frames:?}");
        // Every record left within the frame's second is in it (but for the few ms between a record's time and
        // its leaving).
        let left_out = written
            .iter()
            .find(|&&t| t > frame.last_t_ms && t < frame.first_t_ms + second_ms - 20.0);
        assert!(left_out.is_none(), "{left_out:?} not in {frame:?}");
    }
}

#[test]
fn a_byte_lost_inside_a_frame_costs_that_frame_only() {
    let (dir, path, written) = recorded(3, 5);
    let bytes = std::fs::read(&path).unwrap();
    let frames = Recording::open(&path).unwrap().frames;
    assert!(frames.len() >= 4, "{frames:?}");
    let file = dir.path().join("shortened.golow");
    for k in 1..frames.len() - 1 {
        let victim = frames[k];
        let mut damaged = bytes.clone();
        damaged.remove(victim.offset as usize + victim.compressed_len as usize / 2);
        // No index: the clean close's index now points past the shift.
        let index_at = frames
            .last()
            .map(|f| (f.offset + u64::from(f.compressed_len)) as usize - 1);
        damaged.truncate(index_at.unwrap());
        std::fs::write(&file, &damaged).unwrap();
        let (player, read) = read_all(&file);
        let lost = victim.events as usize;
        assert_eq!(read.len(), written.len() - lost, "frame {k}");
        assert!(player.damage_warning().is_some(), "frame {k}");
    }
}

#[test]
fn an_index_that_disagrees_with_its_markers_is_rebuilt_by_a_scan() {
    let (dir, path, written) = recorded(3, 5);
    let bytes = std::fs::read(&path).unwrap();
    let recording = Recording::open(&path).unwrap();
    let last = recording.frames.last().unwrap();
    let index_at = (last.offset + u64::from(last.compressed_len)) as usize;
    let file = dir.path().join("flipped.golow");
    // Every bit of the entries' region (after the index's header, tag and count; before the trailer).
    let entries = index_at + 8 + 4 + 8..bytes.len() - 16;
    for at in entries.clone().step_by(3) {
        for bit in [0x01, 0x80] {
            let mut damaged = bytes.clone();
            damaged[at] ^= bit;
            std::fs::write(&file, &damaged).unwrap();
            let (player, read) = read_all(&file);
            assert_eq!(read, written, "byte {at} bit {bit:#x}");
            let read_back = player.recording();
            if read_back.closed_cleanly {
                // Only a flip that changes nothing is taken: a time of 0 whose sign bit flipped still says 0.
                assert_eq!(read_back.frames, recording.frames, "byte {at} bit {bit:#x}");
            } else {
                let warning = read_back.warning().unwrap_or_default();
                assert!(warning.contains("index is damaged"), "byte {at}: {warning}");
            }
        }
    }
}

/// xorshift64*: the mutation fuzz's seeded randomness (no generator crate for one test).
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

/// Where each byte of a damaged copy came from: the original's byte at that offset, one the damage put there, or one
/// of a stretch copied from elsewhere in the file.
#[derive(Clone, Copy, PartialEq)]
enum Origin {
    Original(usize),
    Changed,
    Copied,
}

/// One damage: a flipped bit, a lost, added or overwritten byte, a cut, or a stretch copied elsewhere; `origin`
/// follows where every byte came from.
fn mutate(bytes: &mut Vec<u8>, origin: &mut Vec<Origin>, rng: &mut Seeded) {
    let len = bytes.len();
    let at = rng.below(len);
    match rng.below(6) {
        0 => {
            bytes[at] ^= 1 << rng.below(8);
            origin[at] = Origin::Changed;
        }
        1 => {
            bytes.remove(at);
            origin.remove(at);
        }
        2 => {
            bytes.insert(at, rng.below(256) as u8);
            origin.insert(at, Origin::Changed);
        }
        3 => {
            bytes[at] = [0, 0xff, 0x5b, 0x2a][rng.below(4)];
            origin[at] = Origin::Changed;
        }
        4 => {
            bytes.truncate(at);
            origin.truncate(at);
        }
        _ => {
            let span = rng.below(512).min(len - at);
            let copy = bytes[at..at + span].to_vec();
            let to = rng.below(bytes.len());
            bytes.splice(to..to, copy);
            origin.splice(to..to, std::iter::repeat_n(Origin::Copied, span));
        }
    }
}

/// Whether the header (its marker and frame) is still where it was, unchanged.
fn header_in_place(origin: &[Origin], data_start: usize) -> bool {
    origin.len() >= data_start && (0..data_start).all(|i| origin[i] == Origin::Original(i))
}

/// The frames a damaged copy must still give back, as ranges of the records written: every frame whose marker and
/// data are whole and in one piece, before the first copied stretch, in a file whose header is where it was.
///
/// Nothing else the damage does can lose such a frame. Flipped, lost, added and overwritten bytes break at most the
/// frame (or marker) they fall in, and a marker's checksum fails rather than say a wrong length: the index then
/// disagrees and the scan, searching on from the last marker it read, finds the next intact marker. A cut loses only
/// what follows it. A copied stretch is different: it may hold a whole marker (a frame's, or the header's) whose
/// length makes the scan step over what follows it, or a whole frame, after which the frames it was copied from go
/// back in time and are skipped; the frames before it were read already.
fn must_come_back(
    origin: &[Origin],
    data_start: usize,
    frames: &[super::format::FrameInfo],
) -> Vec<std::ops::Range<usize>> {
    if !header_in_place(origin, data_start) {
        return Vec::new();
    }
    let first_copied = origin
        .iter()
        .position(|&o| o == Origin::Copied)
        .unwrap_or(origin.len());
    // Where each byte of the original now is, if it is still there, unchanged.
    let original_len = frames
        .last()
        .map_or(0, |f| (f.offset + u64::from(f.compressed_len)) as usize);
    let mut now_at = vec![None; original_len];
    for (at, o) in origin.iter().enumerate() {
        if let Origin::Original(i) = *o
            && i < original_len
        {
            now_at[i] = Some(at);
        }
    }
    let mut first_record = 0;
    let mut whole = Vec::new();
    for frame in frames {
        let records = first_record..first_record + frame.events as usize;
        first_record = records.end;
        let marker_at = frame.offset as usize - MARKER_LEN;
        let end = (frame.offset + u64::from(frame.compressed_len)) as usize;
        let Some(starts) = now_at[marker_at] else {
            continue;
        };
        let in_one_piece = (marker_at..end).all(|i| now_at[i] == Some(starts + i - marker_at));
        if in_one_piece && starts + (end - marker_at) <= first_copied {
            whole.push(records);
        }
    }
    whole
}

/// A seeded mutation fuzz of the reader (cargo fuzz needs a nightly toolchain, which this project does not use):
/// 10,000 damaged copies of a real recording, each opened and read to its end. None may panic, hang or say more
/// than one line; what is read back must be records that were written, in the order they were written, none twice;
/// and every frame the damage cannot have reached (`must_come_back`) must be among them.
#[test]
fn ten_thousand_damaged_recordings_are_read_or_refused_in_one_line() {
    let (dir, path, written) = recorded(2, 7);
    let bytes = std::fs::read(&path).unwrap();
    let full = Recording::open(&path).unwrap();
    assert!(full.frames.len() >= 4, "{:?}", full.frames);
    assert_eq!(full.events(), written.len() as u64);
    let data_start = full.frames[0].offset as usize - MARKER_LEN;
    let file = dir.path().join("fuzzed.golow");
    let mut rng = Seeded(0x9E37_79B9_7F4A_7C15);
    let (mut opened, mut refused, mut records) = (0, 0, 0);
    let (mut with_a_floor, mut floor_records) = (0, 0);
    for case in 0..10_000 {
        let mut damaged = bytes.clone();
        let mut origin: Vec<Origin> = (0..bytes.len()).map(Origin::Original).collect();
        for _ in 0..=rng.below(3) {
            if !damaged.is_empty() {
                mutate(&mut damaged, &mut origin, &mut rng);
            }
        }
        let must = must_come_back(&origin, data_start, &full.frames);
        std::fs::write(&file, &damaged).unwrap();
        match Player::open(&file) {
            Ok(mut player) => {
                opened += 1;
                let read: Vec<Record> = player.records().collect();
                // Read a stretch at a time, as a whole replay reads, each frame gives what it gives alone.
                let recording = player.recording();
                for stretch in recording.stretches(0..recording.frames.len()) {
                    let together = recording.read_stretch(stretch.clone());
                    assert_eq!(together.len(), stretch.len(), "case {case}");
                    for (i, frame) in stretch.zip(together) {
                        let alone = recording.read_frame(i).ok().map(|f| f.records);
                        assert_eq!(
                            frame.ok().map(|f| f.records),
                            alone,
                            "case {case}: frame {i}"
                        );
                    }
                }
                player.run_to_end();
                assert_eq!(
                    player.state().t_ms,
                    read.last().map_or(0.0, |r| r.t_ms),
                    "case {case}"
                );
                // In the order written, none twice: each record is found after the one before it.
                let mut next = 0;
                let mut at_written = Vec::with_capacity(read.len());
                for record in &read {
                    let Some(found) = written[next..].iter().position(|w| w == record) else {
                        let why = if written[..next].contains(record) {
                            "read twice, or out of order"
                        } else {
                            "never written"
                        };
                        panic!("case {case}: {why}: {record:?}");
                    };
                    at_written.push(next + found);
                    next += found + 1;
                }
                for frame in &must {
                    for i in frame.clone() {
                        assert!(
                            at_written.binary_search(&i).is_ok(),
                            "case {case}: record {i} of a frame the damage left whole is missing (frames whole: \
                             {must:?}; read {at_written:?})"
                        );
                    }
                }
                let floor: usize = must.iter().map(|r| r.len()).sum();
                if floor > 0 {
                    with_a_floor += 1;
                    floor_records += floor;
                }
                records += read.len();
                if let Some(warning) = player.recording().warning() {
                    assert!(!warning.contains('\n'), "case {case}: {warning}");
                }
            }
            Err(e) => {
                // Only a damaged header is refused, or a file with a copy of it further on (a second recording's
                // header): a file whose header is in place, and only there, opens.
                let header_again = matches!(e, OpenError::TwoSessions(_))
                    && damaged[data_start..]
                        .windows(data_start)
                        .any(|w| w == &bytes[..data_start]);
                assert!(
                    !header_in_place(&origin, data_start) || header_again,
                    "case {case}: {e}"
                );
                refused += 1;
                assert!(!e.to_string().contains('\n'), "case {case}: {e}");
            }
        }
    }
    eprintln!(
        "10000 damaged recordings: {opened} opened ({records} records read, {floor_records} of them owed by the \
         {with_a_floor} whose damage left frames whole), {refused} refused"
    );
    assert!(
        opened > 1_000 && refused > 100,
        "{opened} opened, {refused} refused"
    );
    // Most damage leaves some frames whole: the floor is checked, not vacuous.
    assert!(with_a_floor > opened / 2, "{with_a_floor} of {opened}");
}

/// The recording at `path` with a copy of its `frame` (marker and all) after its last frame, and an index naming
/// both: its bytes, where that index begins, and the copy as the index names it.
fn with_a_copy_of(
    path: &Path,
    frame: super::format::FrameInfo,
) -> (Vec<u8>, u64, super::format::FrameInfo) {
    let bytes = std::fs::read(path).unwrap();
    let recording = Recording::open(path).unwrap();
    let last = recording.frames.last().unwrap();
    let index_at = last.offset + u64::from(last.compressed_len);
    let marker_at = frame.offset as usize - super::format::MARKER_LEN;
    let end = (frame.offset + u64::from(frame.compressed_len)) as usize;
    let mut doubled = bytes[..index_at as usize].to_vec();
    doubled.extend_from_slice(&bytes[marker_at..end]);
    let copy = super::format::FrameInfo {
        offset: index_at + super::format::MARKER_LEN as u64,
        ..frame
    };
    let mut frames = recording.frames.clone();
    frames.push(copy);
    let new_index_at = doubled.len() as u64;
    doubled.extend_from_slice(&super::format::encode_index(&frames, new_index_at));
    (doubled, new_index_at, copy)
}

/// A file whose busiest frame was written twice (a copy appended after the last, with a valid marker, and an index
/// naming both) must not count its records twice: the copy goes back in time, and is skipped with a warning that
/// says where.
#[test]
fn a_frame_that_goes_back_in_time_is_skipped_and_said() {
    let (dir, path, written) = recorded(3, 5);
    let recording = Recording::open(&path).unwrap();
    let busiest = *recording.frames.iter().max_by_key(|f| f.events).unwrap();
    let (doubled, new_index_at, copy) = with_a_copy_of(&path, busiest);
    let file = dir.path().join("doubled.golow");
    std::fs::write(&file, &doubled).unwrap();
    let (player, read) = read_all(&file);
    assert_eq!(read, written, "every record once, none twice");
    let read_back = player.recording();
    assert!(read_back.closed_cleanly, "the index is valid");
    assert_eq!(
        (
            read_back.out_of_order.frames,
            read_back.out_of_order.first_at
        ),
        (1, Some(copy.offset))
    );
    let warning = read_back.warning().unwrap();
    assert!(
        warning.contains(&format!(
            "1 frame(s) out of time order ({} records: a frame written twice, or stamped far from its neighbours) \
             were skipped, the first at byte {}",
            copy.events, copy.offset
        )),
        "{warning}"
    );
    // The same file, its index cut off: the scan finds the copy too, and skips it the same way.
    std::fs::write(&file, &doubled[..new_index_at as usize]).unwrap();
    let (player, read) = read_all(&file);
    assert_eq!(read, written);
    assert_eq!(player.recording().out_of_order.frames, 1);
}

/// A frame whose records share one time (a frame of one record, such as the session's end) begins where it ends, so
/// a copy of it right after does not go back in time: it is still a copy, skipped and said (the fuzz found the
/// session's end read twice).
#[test]
fn a_copy_of_a_frame_that_begins_where_it_ends_is_skipped_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.golow");
    // Every record at one time, so that every frame, however the recorder cut them, begins where it ends.
    let written: Vec<Record> = records(2)
        .into_iter()
        .map(|r| Record { t_ms: 1000.0, ..r })
        .collect();
    write(&path, &header(), &written, 7);
    let recording = Recording::open(&path).unwrap();
    let last = *recording.frames.last().unwrap();
    assert_eq!(last.first_t_ms, last.last_t_ms);
    let (doubled, _, copy) = with_a_copy_of(&path, last);
    let file = dir.path().join("doubled.golow");
    std::fs::write(&file, &doubled).unwrap();
    let (player, read) = read_all(&file);
    assert_eq!(read, written, "every record once, none twice");
    let skipped = player.recording().out_of_order;
    assert_eq!((skipped.frames, skipped.first_at), (1, Some(copy.offset)));
}

/// Every recording in `recordings/`, read on every core a stretch at a time, folds to what one thread folding each
/// record in order makes of it; some of them span several stretches, so the turns are taken.
#[test]
fn a_recording_read_on_every_core_folds_as_one_thread_folding_it_in_order() {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("recordings");
    let mut most_stretches = 0;
    for entry in std::fs::read_dir(samples).unwrap() {
        let path = entry.unwrap().path();
        let mut player = Player::open(&path).unwrap();
        most_stretches = most_stretches.max(
            player
                .recording()
                .stretches(0..player.recording().frames.len())
                .len(),
        );
        let mut in_order = crate::state::State::default();
        player.records().for_each(|r| in_order.apply(&r));
        player.run_to_end();
        let summary = |state: &crate::state::State| {
            serde_json::to_string(&crate::state::Summary::from_state(state)).unwrap()
        };
        assert_eq!(
            summary(&player.state()),
            summary(&in_order),
            "{}",
            path.display()
        );
        assert_eq!(player.state().t_ms, in_order.t_ms);
    }
    assert!(most_stretches >= 3, "{most_stretches}");
}

/// The recording at `path` with frame `k` stamped at `t_ms`: its marker and its index entry say so, written as the
/// writer writes them (their checksums right), while its records keep their times.
fn restamped(path: &Path, k: usize, t_ms: f64) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let mut frames = Recording::open(path).unwrap().frames;
    frames[k].first_t_ms = t_ms;
    frames[k].last_t_ms = t_ms;
    let marker_at = frames[k].offset as usize - MARKER_LEN;
    bytes[marker_at..marker_at + MARKER_LEN]
        .copy_from_slice(&super::format::encode_marker(&frames[k]));
    let last = frames.last().unwrap();
    let index_at = last.offset + u64::from(last.compressed_len);
    bytes.truncate(index_at as usize);
    bytes.extend_from_slice(&super::format::encode_index(&frames, index_at));
    bytes
}

/// The records written, less those of frame `k`.
fn without_frame(written: &[Record], frames: &[super::format::FrameInfo], k: usize) -> Vec<Record> {
    let start: usize = frames[..k].iter().map(|f| f.events as usize).sum();
    let end = start + frames[k].events as usize;
    [&written[..start], &written[end..]].concat()
}

/// One frame stamped far in the future, first or in the middle, through its index or found by a scan, costs itself
/// only: judged against the largest time seen, every frame after it went back in time and was skipped.
#[test]
fn a_frame_stamped_far_in_the_future_costs_only_itself() {
    let (dir, path, written) = recorded(3, 5);
    let frames = Recording::open(&path).unwrap().frames;
    assert!(frames.len() >= 6, "{frames:?}");
    let file = dir.path().join("future.golow");
    for k in [0, frames.len() / 2, frames.len() - 2] {
        let damaged = restamped(&path, k, 1e12);
        let index_at = damaged.len() - (frames.len() * 36 + 8 + 4 + 8 + 16);
        for bytes in [&damaged[..], &damaged[..index_at]] {
            std::fs::write(&file, bytes).unwrap();
            let (mut player, read) = read_all(&file);
            assert_eq!(read, without_frame(&written, &frames, k), "frame {k}");
            let skipped = player.recording().out_of_order;
            assert_eq!(
                (skipped.frames, skipped.records, skipped.first_at),
                (1, u64::from(frames[k].events), Some(frames[k].offset)),
                "frame {k}"
            );
            assert_eq!(
                player.recording().duration_ms(),
                written.last().unwrap().t_ms
            );
            assert!(
                player
                    .recording()
                    .warning()
                    .unwrap()
                    .contains("1 frame(s) out of time order")
            );
            player.run_to_end();
            assert_eq!(player.state().t_ms, written.last().unwrap().t_ms);
        }
    }
}

/// A record stamped far in the future, written by the recorder among the others, opens a frame of its own that the
/// records after it in its second join: that frame is lost, and no other.
#[test]
fn a_record_stamped_far_in_the_future_costs_only_its_frame() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.golow");
    let mut written = records(3);
    let stray = written.len() / 2;
    written[stray].t_ms = 1e12;
    write(&path, &header(), &written, 5);
    let (player, read) = read_all(&path);
    let skipped = player.recording().out_of_order;
    assert_eq!(skipped.frames, 1, "{skipped:?}");
    let lost = skipped.records as usize;
    assert!((1..=5).contains(&lost), "{skipped:?}");
    // The far frame begins with the stray record and holds the rest of its second.
    let expected = [&written[..stray], &written[stray + lost..]].concat();
    assert_eq!(read, expected);
}

/// A recording of a session whose records come after `after_ms`: its own times shifted past it.
fn a_later_session(dir: &Path, name: &str, after_ms: f64) -> (PathBuf, Vec<Record>) {
    let path = dir.join(name);
    let later: Vec<Record> = records(2)
        .into_iter()
        .map(|r| Record {
            t_ms: r.t_ms + after_ms,
            ..r
        })
        .collect();
    write(&path, &header(), &later, 7);
    (path, later)
}

/// Two recordings joined into one file, the second's times rising past the first's, whether the first was closed
/// (its index then stands between them) or cut: refused in one line that says where to cut, never read as one.
#[test]
fn two_recordings_joined_into_one_file_are_refused_where_they_join() {
    let (dir, first, written) = recorded(2, 7);
    let (second, _) = a_later_session(
        dir.path(),
        "second.golow",
        written.last().unwrap().t_ms + 250.0,
    );
    let frames = Recording::open(&first).unwrap().frames;
    let last = frames.last().unwrap();
    let data_end = (last.offset + u64::from(last.compressed_len)) as usize;
    let (closed, tail) = (
        std::fs::read(&first).unwrap(),
        std::fs::read(&second).unwrap(),
    );
    let joined = dir.path().join("joined.golow");
    for first_part in [&closed[..], &closed[..data_end]] {
        std::fs::write(&joined, [first_part, &tail[..]].concat()).unwrap();
        let err = Recording::open(&joined).err().expect("refused");
        assert!(
            matches!(err, OpenError::TwoSessions(at) if at == first_part.len() as u64),
            "{err}"
        );
        let line = err.to_string();
        assert!(
            line.contains(&format!("head -c {}", first_part.len())) && !line.contains('\n'),
            "{line}"
        );
    }
}

/// One session's records written after another's into one file (one header, two session starts, the second's times
/// rising past the first's): the first is read, nothing of the second, and the player says where it starts.
#[test]
fn a_second_sessions_records_after_the_first_s_are_not_read_as_one_session() {
    let (dir, _, first) = recorded(2, 7);
    let (_, second) = a_later_session(
        dir.path(),
        "second.golow",
        first.last().unwrap().t_ms + 250.0,
    );
    let path = dir.path().join("spliced.golow");
    write(&path, &header(), &[&first[..], &second[..]].concat(), 7);
    let (mut player, read) = read_all(&path);
    assert_eq!(read, first);
    let second_session = player.second_session().expect("the second session found");
    assert_eq!(second_session.t_ms, second[0].t_ms);
    let said = second_session.to_string();
    assert!(
        said.contains("two sessions") && !said.contains('\n'),
        "{said}"
    );
    player.run_to_end();
    assert_eq!(player.state().t_ms, first.last().unwrap().t_ms);
    assert_eq!(player.second_session(), Some(second_session));
}

/// A replay's advance reads and parses each frame with the store unlocked, and folds it under one lock: a reader of
/// the store (a view drawing, a scrape) finds it between frames, never waiting for a whole advance. The advance is
/// run again until the reader has been there (a count, not a time: one that held the lock throughout never lets it).
#[test]
fn a_reader_of_the_store_finds_a_replay_between_its_frames() {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("recordings");
    let path = std::fs::read_dir(samples)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .max_by_key(|path| Player::open(path).unwrap().recording().frames.len())
        .unwrap();
    let mut player = Player::open(&path).unwrap();
    assert!(player.recording().frames.len() >= 50, "{}", path.display());
    player.advance_to(f64::INFINITY);
    let end = player.state().t_ms;
    let store = player.store().clone();
    let advancing = AtomicBool::new(true);
    let between = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while advancing.load(Ordering::SeqCst) {
                let t_ms = store.lock().t_ms;
                if t_ms > 0.0 && t_ms < end {
                    between.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        for _ in 0..50 {
            if between.load(Ordering::SeqCst) > 0 {
                break;
            }
            drop(player.seek(0.0));
            player.advance_to(f64::INFINITY);
        }
        advancing.store(false, Ordering::SeqCst);
    });
    assert!(
        between.load(Ordering::SeqCst) > 0,
        "the store was locked through every advance"
    );
}

/// A recording names the commit golow was built from, as git names this checkout's HEAD (the tree may have been
/// clean or dirty at build time, and has changed since, so only `-dirty` may differ).
#[test]
fn a_recording_carries_the_commit_golow_was_built_from() {
    let (_dir, path, _) = recorded(1, 100);
    let commit = Recording::open(&path).unwrap().header.golow_commit;
    let head = std::process::Command::new("git")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    let expected = head.unwrap_or_else(|| "unknown".into());
    let commit = commit.expect("the header names a commit");
    assert_eq!(commit.trim_end_matches("-dirty"), expected, "{commit}");
}

/// Recordings made before headers named a commit still open, with no commit and everything else as it was.
#[test]
fn a_recording_without_a_commit_still_loads() {
    let old = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings/20261126-h100-levels-train-b32.golow");
    let recording = Recording::open(&old).unwrap();
    assert_eq!(recording.header.golow_commit, None);
    assert_eq!(recording.header.golow_version, "0.1.0");
    assert!(recording.closed_cleanly);
}
