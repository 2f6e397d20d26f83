//! Appends a session to its recording as it happens. The recorder is an observer of the hub: it
//! serialises each record as it comes and hands the line to its own thread, which compresses a frame
//! at least once a second and writes it with its marker. A kill -9 therefore loses at most the last
//! second; a clean finish adds the index.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
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

/// Records are handed over in batches: one wake-up of the writer per batch, not per record.
enum Message {
    /// Lines with their times, and when the first of them was recorded: the writer's one-second
    /// deadline counts from then.
    Lines(Instant, Vec<(f64, Vec<u8>)>),
}

/// A batch goes to the writer once its oldest record is this old (at the next record or tick), or once it holds
/// this much JSON. Short beside `FLUSH_EVERY`: the writer's deadline counts from a batch's oldest record, so the
/// time a batch waits is time its frame cannot fill (batches of half a second cut frames of half a second, and a
/// second's records took a fifth more bytes, each frame compressed alone).
const BATCH_EVERY: Duration = FLUSH_EVERY.checked_div(10).unwrap();
const BATCH_BYTES: usize = 1 << 20;
/// Batches waiting for the writer. When a flood of records outruns compression the hub waits here, and so the
/// workers wait on their pipes: memory stays bounded and the recording stays whole.
const QUEUED_BATCHES: usize = 8;

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

/// The hub's side of a recorder: an observer that serialises each record and passes them to the
/// writer in batches.
pub struct Sink {
    writer: mpsc::SyncSender<Message>,
    /// Set by the writer the moment it fails; taken once by `failure`.
    failed: Arc<Mutex<Option<String>>>,
    batch: Vec<(f64, Vec<u8>)>,
    batch_bytes: usize,
    since: Option<Instant>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.send();
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
        let (lines, incoming) = mpsc::sync_channel(QUEUED_BATCHES);
        let failed = Arc::new(Mutex::new(None));
        let failure = failed.clone();
        let thread = std::thread::Builder::new()
            .name("golow-recorder".into())
            .spawn(move || {
                let written = frames.run(&incoming);
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
        let sink = Sink {
            writer: lines,
            failed,
            batch: Vec::new(),
            batch_bytes: 0,
            since: None,
        };
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
    /// Queues `record`, passing the batch to the writer when it is due.
    pub fn write(&mut self, record: &Record) {
        let Ok(mut line) = serde_json::to_vec(record) else {
            return;
        };
        line.push(b'\n');
        self.batch_bytes += line.len();
        self.batch.push((record.t_ms, line));
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() >= BATCH_EVERY || self.batch_bytes >= BATCH_BYTES {
            self.send();
        }
    }

    /// Passes a batch that has waited long enough, records or not since.
    pub fn tick(&mut self) {
        if self.since.is_some_and(|t| t.elapsed() >= BATCH_EVERY) {
            self.send();
        }
    }

    /// Why the writer failed, said once.
    pub fn failure(&mut self) -> Option<String> {
        self.failed.lock().ok()?.take()
    }
    fn send(&mut self) {
        self.batch_bytes = 0;
        if let (Some(since), false) = (self.since.take(), self.batch.is_empty()) {
            let _ = self
                .writer
                .send(Message::Lines(since, std::mem::take(&mut self.batch)));
        }
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
    since: Option<Instant>,
}

impl Frames {
    fn run(mut self, incoming: &mpsc::Receiver<Message>) -> io::Result<Written> {
        let mut pending = Pending::default();
        loop {
            let wait = pending.since.map_or(Duration::from_secs(3600), |t| {
                FLUSH_EVERY.saturating_sub(t.elapsed())
            });
            match incoming.recv_timeout(wait) {
                Ok(Message::Lines(since, lines)) => {
                    for (t_ms, line) in lines {
                        self.add(&mut pending, since, t_ms, &line)?;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => self.flush(&mut pending)?,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        self.flush(&mut pending)?;
        let index = encode_index(&self.index, self.offset);
        self.file.write_all(&index)?;
        self.file.sync_all()?;
        Ok(Written {
            path: self.path,
            events: self.events,
            bytes: self.offset + index.len() as u64,
        })
    }

    fn add(
        &mut self,
        pending: &mut Pending,
        since: Instant,
        t_ms: f64,
        line: &[u8],
    ) -> io::Result<()> {
        // A frame holds at most a second of the session's time too, so a file written faster than
        // real time (a rewritten recording) is framed like a live one.
        let span_ms = FLUSH_EVERY.as_secs_f64() * 1e3;
        if pending.raw.len() + line.len() > MAX_FRAME_BYTES as usize
            || (pending.since.is_some() && t_ms - pending.first_t_ms >= span_ms)
        {
            self.flush(pending)?;
        }
        if pending.since.is_none() {
            pending.since = Some(since);
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
        if pending.since.is_none() {
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
