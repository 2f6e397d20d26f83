//! Appends a session to its recording as it happens. The recorder is an observer of the hub: it
//! serialises each record as it comes and leaves the line for its own thread, which wakes when a second
//! begins (the first line queued) and when it ends, and compresses that second's lines into a frame with its
//! marker. A kill -9 therefore loses at most the last second; a clean finish adds the index.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::format::{FrameInfo, Header, MARKER_LEN, MAX_FRAME_BYTES, encode_index, encode_marker};
use golow_protocol::event::Record;

/// Records wait at most this long in memory before they are on disk.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// A frame is cut early when its raw JSON reaches this size.
const FRAME_RAW_BYTES: usize = 256 << 10;
/// On a second's frame (~6 KB of JSON), level 6 compresses within 2% of level 15 at 30 times the
/// speed (zstd -b, 6 KB blocks of a real session): 0.004% of a core instead of 0.12%.
const ZSTD_LEVEL: i32 = 6;

/// `FLUSH_EVERY` in the records' own time, which a frame spans at most.
const SECOND_MS: f64 = FLUSH_EVERY.as_secs_f64() * 1e3;
/// The writer takes what is left at once, whatever its age, when it reaches this much JSON.
const TAKE_BYTES: usize = 1 << 20;
/// Bytes of lines queued for the writer at most. When a flood of records outruns compression the hub waits here, and so
/// the workers wait on their pipes: memory stays bounded and the recording stays whole.
const MAX_QUEUED_BYTES: usize = 8 << 20;

/// The queue of lines between the hub, which leaves them, and the writer, which takes them: the writer wakes twice a
/// second of records (when the first is left, and a second later), not once a line, and a frame holds the lines of a
/// whole second.
#[derive(Default)]
struct Queue {
    queued: Mutex<Queued>,
    /// The writer waits here for the first line of a second, and for that second's end.
    for_writer: Condvar,
    /// The hub waits here while `MAX_QUEUED_BYTES` are queued.
    for_room: Condvar,
}

#[derive(Default)]
struct Queued {
    /// Each line with its record's time and when it was left, in order.
    lines: Vec<(f64, Instant, Vec<u8>)>,
    bytes: usize,
    /// The session ended: the writer takes the rest and finishes.
    closed: bool,
    /// The writer stopped (it failed): lines are no longer kept.
    stopped: bool,
    /// The writer is to take every line left at once (`Sink::flush`).
    cut: bool,
    /// The writer holds lines it took and has yet to write.
    writing: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Leaves a line for the writer, once there is room; dropped when the writer has stopped.
    fn leave(&self, t_ms: f64, line: Vec<u8>) {
        let mut queued = self.lock();
        while queued.bytes >= MAX_QUEUED_BYTES && !queued.stopped {
            queued = self
                .for_room
                .wait(queued)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if queued.stopped {
            return;
        }
        let (first, was_below) = (queued.lines.is_empty(), queued.bytes < TAKE_BYTES);
        queued.bytes += line.len();
        queued.lines.push((t_ms, Instant::now(), line));
        if first || (was_below && queued.bytes >= TAKE_BYTES) {
            self.for_writer.notify_one();
        }
    }

    /// The lines of the next frame, once the second that began with the first of them has ended (or more than
    /// `TAKE_BYTES` wait, or the session ended); `None` once the session ended and every line was taken.
    fn take(&self) -> Option<Vec<(f64, Instant, Vec<u8>)>> {
        let mut queued = self.lock();
        loop {
            let Some(&(first_t_ms, first, _)) = queued.lines.first() else {
                if queued.closed {
                    return None;
                }
                queued = self
                    .for_writer
                    .wait(queued)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let due = first + FLUSH_EVERY;
            let now = Instant::now();
            let taken =
                if queued.closed || queued.bytes >= TAKE_BYTES || std::mem::take(&mut queued.cut) {
                    queued.bytes = 0;
                    Some(std::mem::take(&mut queued.lines))
                } else if now >= due {
                    // The second's lines, by the records' own times (a record is left a little after its time, and
                    // not always as little): those of the next second open the next frame.
                    let second = queued
                        .lines
                        .partition_point(|&(t_ms, _, _)| t_ms < first_t_ms + SECOND_MS)
                        .max(1);
                    let rest = queued.lines.split_off(second);
                    let lines = std::mem::replace(&mut queued.lines, rest);
                    queued.bytes -= lines.iter().map(|(_, _, line)| line.len()).sum::<usize>();
                    Some(lines)
                } else {
                    None
                };
            if let Some(lines) = taken {
                queued.writing = true;
                self.for_room.notify_all();
                return Some(lines);
            }
            queued = self
                .for_writer
                .wait_timeout(queued, due - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The lines the writer took are on disk.
    fn written(&self) {
        self.lock().writing = false;
        self.for_room.notify_all();
    }

    /// Has the writer take every line left now, and returns once they are on disk (or the writer stopped).
    #[cfg(test)]
    fn flush(&self) {
        let mut queued = self.lock();
        queued.cut = !queued.lines.is_empty();
        self.for_writer.notify_one();
        while (queued.cut || queued.writing) && !queued.stopped {
            queued = self
                .for_room
                .wait(queued)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.for_writer.notify_one();
    }

    fn stop(&self) {
        let mut queued = self.lock();
        queued.stopped = true;
        queued.lines = Vec::new();
        queued.bytes = 0;
        self.for_room.notify_all();
    }
}

/// HeaderMarks the queue stopped when the writer ends, however it ends (a panic too): the hub then never waits for
/// room that will not come.
struct StopOnDrop(Arc<Queue>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What a finished recording holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub path: PathBuf,
    pub events: u64,
    pub bytes: u64,
}

/// The recording of one session, open for appending. Its `Sink` takes the records (give it to the
/// hub); once the sink is dropped (the session ended), `finish` waits for the complete file.
pub struct Recorder {
    path: PathBuf,
    thread: JoinHandle<io::Result<Written>>,
}

/// The hub's side of a recorder: an observer that serialises each record and leaves it for the writer.
pub struct Sink {
    queue: Arc<Queue>,
    /// Set by the writer the moment it fails; taken once by `failure`.
    failed: Arc<Mutex<Option<String>>>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.queue.close();
    }
}

impl Recorder {
    /// Creates `path` (failing if it exists), writes the header, and returns the recorder with the
    /// one sink that feeds it.
    pub fn create(path: &Path, header: &Header) -> io::Result<(Recorder, Sink)> {
        let file = File::options().write(true).create_new(true).open(path)?;
        let mut compressor = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
        compressor.include_checksum(true)?;
        let mut frames = Frames {
            file,
            compressor,
            path: path.to_path_buf(),
            offset: 0,
            index: Vec::new(),
            events: 0,
        };
        let mut line = serde_json::to_vec(header)?;
        line.push(b'\n');
        frames.write(&line, 0, (0.0, 0.0))?;
        let queue = Arc::new(Queue::default());
        let stop = StopOnDrop(queue.clone());
        let failed = Arc::new(Mutex::new(None));
        let failure = failed.clone();
        let thread = std::thread::Builder::new()
            .name("golow-recorder".into())
            .spawn(move || {
                let written = frames.run(&stop.0);
                drop(stop);
                if let Err(e) = &written
                    && let Ok(mut slot) = failure.lock()
                {
                    *slot = Some(e.to_string());
                }
                written
            })?;
        let recorder = Recorder {
            path: path.to_path_buf(),
            thread,
        };
        let sink = Sink { queue, failed };
        Ok((recorder, sink))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes what is queued and the index, once the sink has been dropped; the file is then
    /// complete.
    pub fn finish(self) -> io::Result<Written> {
        self.thread
            .join()
            .map_err(|_| io::Error::other("the recorder thread panicked"))?
    }
}

impl Sink {
    /// Leaves `record` for the writer.
    pub fn write(&mut self, record: &Record) {
        let Ok(mut line) = serde_json::to_vec(record) else {
            return;
        };
        line.push(b'\n');
        self.queue.leave(record.t_ms, line);
    }

    /// Puts every record left so far on disk now, in frames of their own, and returns once they are there: a test
    /// cuts frames where it wants them without waiting out `FLUSH_EVERY`.
    #[cfg(test)]
    pub fn flush(&mut self) {
        self.queue.flush();
    }

    /// Why the writer failed, said once.
    pub fn failure(&mut self) -> Option<String> {
        self.failed.lock().ok()?.take()
    }
}

/// The writing side, on the recorder's thread.
struct Frames {
    file: File,
    /// One context for every frame: creating one costs more than compressing a second of records.
    compressor: zstd::bulk::Compressor<'static>,
    path: PathBuf,
    offset: u64,
    index: Vec<FrameInfo>,
    events: u64,
}

/// Lines waiting to become a frame.
#[derive(Default)]
struct Pending {
    raw: Vec<u8>,
    events: u32,
    first_t_ms: f64,
    last_t_ms: f64,
}

impl Frames {
    fn run(mut self, queue: &Queue) -> io::Result<Written> {
        while let Some(lines) = queue.take() {
            let mut pending = Pending::default();
            for (t_ms, _, line) in lines {
                self.add(&mut pending, t_ms, &line)?;
            }
            self.flush(&mut pending)?;
            queue.written();
        }
        let index = encode_index(&self.index, self.offset);
        self.file.write_all(&index)?;
        self.file.sync_all()?;
        Ok(Written {
            path: self.path,
            events: self.events,
            bytes: self.offset + index.len() as u64,
        })
    }

    fn add(&mut self, pending: &mut Pending, t_ms: f64, line: &[u8]) -> io::Result<()> {
        // A frame holds at most a second of the session's time too, so a file written faster than
        // real time (a rewritten recording) is framed like a live one.
        if pending.raw.len() + line.len() > MAX_FRAME_BYTES as usize
            || (pending.events > 0 && t_ms - pending.first_t_ms >= SECOND_MS)
        {
            self.flush(pending)?;
        }
        if pending.events == 0 {
            pending.first_t_ms = t_ms;
        }
        pending.raw.extend_from_slice(line);
        pending.events += 1;
        pending.last_t_ms = pending.last_t_ms.max(t_ms);
        if pending.raw.len() >= FRAME_RAW_BYTES {
            self.flush(pending)?;
        }
        Ok(())
    }

    fn flush(&mut self, pending: &mut Pending) -> io::Result<()> {
        if pending.events == 0 {
            return Ok(());
        }
        let taken = std::mem::take(pending);
        self.write(
            &taken.raw,
            taken.events,
            (taken.first_t_ms, taken.last_t_ms.max(taken.first_t_ms)),
        )
    }

    /// One marker and its frame, in one write so that a crash leaves whole frames or a cut last one.
    fn write(&mut self, raw: &[u8], events: u32, (first, last): (f64, f64)) -> io::Result<()> {
        let compressed = self.compressor.compress(raw)?;
        let frame = FrameInfo {
            offset: self.offset + MARKER_LEN as u64,
            compressed_len: compressed.len() as u32,
            raw_len: raw.len() as u32,
            events,
            first_t_ms: first,
            last_t_ms: last,
        };
        let mut bytes = encode_marker(&frame);
        bytes.extend_from_slice(&compressed);
        self.file.write_all(&bytes)?;
        self.offset += bytes.len() as u64;
        self.events += u64::from(events);
        if events > 0 {
            self.index.push(frame);
        }
        Ok(())
    }
}
