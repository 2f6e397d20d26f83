//! Appends a session to its recording as it happens. The recorder is an observer of the hub: it
//! serialises each record as it comes and hands the line to its own thread, which compresses a frame
//! at least once a second and writes it with its marker. A kill -9 therefore loses at most the last
//! second; a clean finish adds the index.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::format::{FrameInfo, Header, MARKER_LEN, MAX_FRAME_BYTES, encode_index, encode_marker};
use crate::event::Record;
use crate::session::Observer;
use crate::state::State;

/// Records wait at most this long in memory before they are on disk.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// A frame is cut early when its raw JSON reaches this size.
const FRAME_RAW_BYTES: usize = 256 << 10;
/// Frames are small (a second of events), so a high level costs little time and halves the size.
const ZSTD_LEVEL: i32 = 15;

enum Message {
    Line { t_ms: f64, line: Vec<u8> },
    Finish,
}

/// What a finished recording holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub path: PathBuf,
    pub events: u64,
    pub bytes: u64,
}

/// The recording of one session, open for appending: `sink` takes the records (give it to the hub),
/// `finish` completes the file.
pub struct Recorder {
    path: PathBuf,
    lines: mpsc::Sender<Message>,
    thread: Option<JoinHandle<io::Result<Written>>>,
}

/// The hub's side of a recorder: an observer that queues each record for the writer.
pub struct Sink(mpsc::Sender<Message>);

impl Recorder {
    /// Creates `path` (failing if it exists) and writes the header.
    pub fn create(path: &Path, header: &Header) -> io::Result<Recorder> {
        let file = File::options().write(true).create_new(true).open(path)?;
        let mut frames = Frames {
            file,
            path: path.to_path_buf(),
            offset: 0,
            index: Vec::new(),
            events: 0,
        };
        let mut line = serde_json::to_vec(header)?;
        line.push(b'\n');
        frames.write(&line, 0, (0.0, 0.0))?;
        let (lines, incoming) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("golow-recorder".into())
            .spawn(move || frames.run(&incoming))?;
        Ok(Recorder {
            path: path.to_path_buf(),
            lines,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn sink(&self) -> Sink {
        Sink(self.lines.clone())
    }

    /// Writes what is queued and the index; the file is then complete.
    pub fn finish(mut self) -> io::Result<Written> {
        self.close()
    }

    fn close(&mut self) -> io::Result<Written> {
        let _ = self.lines.send(Message::Finish);
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| io::Error::other("the recorder thread panicked"))?,
            None => Err(io::Error::other("the recording was already closed")),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.close();
        }
    }
}

impl Observer for Sink {
    fn on_record(&mut self, record: &Record, _state: &State) {
        let Ok(mut line) = serde_json::to_vec(record) else {
            return;
        };
        line.push(b'\n');
        let _ = self.0.send(Message::Line {
            t_ms: record.t_ms,
            line,
        });
    }
}

/// The writing side, on the recorder's thread.
struct Frames {
    file: File,
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
                Ok(Message::Line { t_ms, line }) => {
                    // A frame holds at most a second of the session's time too, so a file written
                    // faster than real time (a rewritten recording) is framed like a live one.
                    let span_ms = FLUSH_EVERY.as_secs_f64() * 1e3;
                    if pending.raw.len() + line.len() > MAX_FRAME_BYTES as usize
                        || (pending.since.is_some() && t_ms - pending.first_t_ms >= span_ms)
                    {
                        self.flush(&mut pending)?;
                    }
                    if pending.since.is_none() {
                        pending.since = Some(Instant::now());
                        pending.first_t_ms = t_ms;
                    }
                    pending.raw.extend_from_slice(&line);
                    pending.events += 1;
                    pending.last_t_ms = pending.last_t_ms.max(t_ms);
                    if pending.raw.len() >= FRAME_RAW_BYTES {
                        self.flush(&mut pending)?;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => self.flush(&mut pending)?,
                Ok(Message::Finish) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
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
        let mut compressor = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
        compressor.include_checksum(true)?;
        let compressed = compressor.compress(raw)?;
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
