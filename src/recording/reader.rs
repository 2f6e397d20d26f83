//! Opens a recording whoever wrote it and however it ended: a clean file is read through its index; a
//! file that was not closed (kill -9, a full disk, a cut copy) is scanned marker by marker; damaged
//! bytes are skipped and counted. Nothing in a file can make the reader allocate more than a frame's
//! cap or panic.

use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::format::{
    self, FORMAT_NAME, FORMAT_VERSION, FrameInfo, Header, HeaderId, MARKER_LEN, MAX_FRAME_BYTES,
    SKIPPABLE_HEADER_LEN, Skippable, TRAILER_LEN,
};
use golow_protocol::event::{Body, Record};

/// Raw JSON a thread of a player's fold reads before folding it: its records, still in the core's cache when
/// they are folded, bound memory whatever the frames hold.
const STRETCH_RAW_BYTES: u64 = 128 << 10;

/// A frame that lies further ahead of the frame after it than this many times the span from the frame before to
/// that one (at least a frame's second) is out of place: it is skipped, not everything after it.
const FAR: f64 = 10.0;

/// Why a file cannot be replayed at all: one line for the user.
#[derive(Debug)]
pub enum OpenError {
    Io(io::Error),
    NotGolow(String),
    TooNew(u32),
    /// A second recording's header begins at this byte: two files joined into one.
    TwoSessions(u64),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "cannot read it: {e}"),
            OpenError::NotGolow(why) => write!(f, "not a golow recording ({why})"),
            OpenError::TooNew(version) => write!(
                f,
                "recording format version {version} is newer than this golow reads ({FORMAT_VERSION}): update golow"
            ),
            OpenError::TwoSessions(at) => write!(
                f,
                "it holds two sessions: a second recording begins at byte {at} (two files joined into one?); golow \
                 reads one session a file: head -c {at} keeps the first, tail -c +{} the second",
                at + 1
            ),
        }
    }
}

/// A recording open for reading.
pub struct Recording {
    file: File,
    pub header: Header,
    /// The data frames, in file order.
    pub frames: Vec<FrameInfo>,
    /// False when the index was missing or damaged and the frames were found by a scan.
    pub closed_cleanly: bool,
    /// The file ends in an index that is damaged or disagrees with the markers.
    pub index_damaged: bool,
    /// Stretches of damaged bytes the scan stepped over.
    pub damaged_regions: u64,
    /// Set when the file ends inside a frame: the byte where the valid prefix ends.
    pub cut_at: Option<u64>,
    /// Where a scan stopped: a file still being written is read on from here.
    scanned_to: u64,
    /// Frames skipped because their time is out of order with the frames around them.
    pub out_of_order: OutOfOrder,
    /// Where a scan found a second recording's header.
    second_header: Option<u64>,
}

/// Frames skipped for their time: a copy of a frame kept, a frame that goes back before the end of the one kept
/// before it, or one kept until the frame after it showed it lay far ahead of both its neighbours.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OutOfOrder {
    pub frames: u64,
    /// The records those frames held, as their markers count them.
    pub records: u64,
    /// The byte where the first of them (in the file) begins.
    pub first_at: Option<u64>,
    /// Frames kept and then taken back: a reader that read them must read again.
    pub taken_back: u64,
}

/// What reading one frame gave.
pub struct FrameRecords {
    pub records: Vec<Record>,
    /// Lines that were not records (damage that zstd's checksum did not catch, or foreign lines).
    pub bad_lines: u64,
    /// Where its records hold a session's start (its first record's, and the first of any other's), found where the
    /// frame is parsed, on whichever core parses it.
    pub session_starts: SessionStarts,
}

/// A frame's `session_start` records: whether it begins with one, and where the first after that is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SessionStarts {
    pub first_record: bool,
    pub later: Option<usize>,
}

impl SessionStarts {
    fn of(records: &[Record]) -> SessionStarts {
        let starts = |r: &Record| matches!(r.body, Body::SessionStart(_));
        SessionStarts {
            first_record: records.first().is_some_and(starts),
            later: records.iter().skip(1).position(starts).map(|k| k + 1),
        }
    }
}

impl Recording {
    pub fn open(path: &Path) -> Result<Recording, OpenError> {
        let file = golow_data::open_regular(path).map_err(OpenError::Io)?;
        let len = file.metadata().map_err(OpenError::Io)?.len();
        let header_frame = read_at(&file, 0, MARKER_LEN)
            .ok()
            .and_then(|bytes| format::decode_marker(&bytes, 0))
            .ok_or_else(|| {
                OpenError::NotGolow("it does not start with golow's frame marker".into())
            })?;
        let header = read_header(&file, &header_frame, len)?;
        let data_start = header_frame.offset + u64::from(header_frame.compressed_len);
        let mut recording = Recording {
            file,
            header,
            frames: Vec::new(),
            closed_cleanly: false,
            index_damaged: false,
            damaged_regions: 0,
            cut_at: None,
            scanned_to: data_start,
            out_of_order: OutOfOrder::default(),
            second_header: None,
        };
        match recording.read_index(len) {
            Some(frames) => {
                for frame in frames {
                    recording.keep(frame);
                }
                recording.closed_cleanly = true;
            }
            None => {
                recording.index_damaged = recording.trailer(len).is_some();
                recording.scan(data_start, len);
            }
        }
        match recording.second_header {
            Some(at) => Err(OpenError::TwoSessions(at)),
            None => Ok(recording),
        }
    }

    /// Picks up the frames written since the file was opened or last refreshed (a live session's
    /// recording); a cleanly closed file has none.
    pub fn refresh(&mut self) {
        if self.closed_cleanly {
            return;
        }
        if let Ok(meta) = self.file.metadata() {
            self.cut_at = None;
            self.scan(self.scanned_to, meta.len());
        }
    }

    /// Adds a frame unless its time is out of order with its neighbours'. The session's clock only moves forward, so
    /// a frame that begins before the last kept one ends holds records already read (or another session's), which
    /// would count its steps twice: it is skipped, and so is a copy of either of the last two kept (a frame of one
    /// record, a session's end say, begins where it ends, so its copy does not go back). Unless the last kept frame
    /// is the one out of place: this frame follows the one kept before it, and the last lies far ahead of both (a
    /// frame stamped in the future), so it is taken back and this one kept; judged against the largest time seen,
    /// that one frame would cost every frame after it.
    fn keep(&mut self, frame: FrameInfo) {
        let kept = self.frames.len();
        let copy = self.frames[kept.saturating_sub(2)..].iter().any(|k| {
            FrameInfo {
                offset: k.offset,
                ..frame
            } == *k
        });
        match self.frames.last().copied() {
            _ if copy => self.skip(frame),
            Some(last) if frame.first_t_ms < last.last_t_ms => {
                let before = kept.checked_sub(2).map(|i| self.frames[i]);
                if lies_far_ahead(before, last, frame) {
                    self.frames.pop();
                    self.skip(last);
                    self.out_of_order.taken_back += 1;
                    self.frames.push(frame);
                } else {
                    self.skip(frame);
                }
            }
            _ => self.frames.push(frame),
        }
    }

    fn skip(&mut self, frame: FrameInfo) {
        let skipped = &mut self.out_of_order;
        skipped.frames += 1;
        skipped.records += u64::from(frame.events);
        skipped.first_at = Some(
            skipped
                .first_at
                .map_or(frame.offset, |at| at.min(frame.offset)),
        );
    }

    /// One line for the user about what is missing or damaged, if anything is.
    pub fn warning(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.index_damaged {
            parts
                .push("its index is damaged (frames found by a scan of their markers)".to_string());
        } else if !self.closed_cleanly {
            parts.push("it was not closed cleanly (index rebuilt by a scan)".to_string());
        }
        if let Some(at) = self.cut_at {
            parts.push(format!(
                "it ends mid-frame at byte {at}, so only its complete frames replay"
            ));
        }
        if self.damaged_regions > 0 {
            parts.push(format!(
                "{} damaged stretch(es) of bytes were skipped",
                self.damaged_regions
            ));
        }
        if let OutOfOrder {
            frames: n @ 1..,
            records,
            first_at: Some(at),
            ..
        } = self.out_of_order
        {
            parts.push(format!(
                "{n} frame(s) out of time order ({records} records: a frame written twice, or stamped far from its \
                 neighbours) were skipped, the first at byte {at}"
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The session's length: the last record's time.
    pub fn duration_ms(&self) -> f64 {
        self.frames.iter().map(|f| f.last_t_ms).fold(0.0, f64::max)
    }

    pub fn events(&self) -> u64 {
        self.frames.iter().map(|f| u64::from(f.events)).sum()
    }

    /// The records of frame `i`; `Err` when the frame is damaged (it is then skipped as a whole).
    pub fn read_frame(&self, i: usize) -> io::Result<FrameRecords> {
        let frame = self
            .frames
            .get(i)
            .ok_or_else(|| io::Error::other("no such frame"))?;
        let compressed = read_at(&self.file, frame.offset, frame.compressed_len as usize)?;
        frame_records(frame, &compressed)
    }

    /// The records of frames `stretch` (as `stretches` gives them), each frame's as `read_frame` gives them, read
    /// from the file at once rather than frame by frame.
    pub fn read_stretch(&self, stretch: std::ops::Range<usize>) -> Vec<io::Result<FrameRecords>> {
        let frames = &self.frames[stretch.clone()];
        let (Some(first), Some(last)) = (frames.first(), frames.last()) else {
            return Vec::new();
        };
        let span = (last.offset + u64::from(last.compressed_len)).saturating_sub(first.offset);
        // Frames found by a scan may have damaged bytes between them: those are not read.
        let compact = frames
            .iter()
            .map(|f| u64::from(f.compressed_len))
            .sum::<u64>()
            + (frames.len() as u64) * MARKER_LEN as u64;
        if span > compact {
            return stretch.map(|i| self.read_frame(i)).collect();
        }
        let bytes = match read_at(&self.file, first.offset, span as usize) {
            Ok(bytes) => bytes,
            Err(_) => return stretch.map(|i| self.read_frame(i)).collect(),
        };
        // A frame a scan found may claim more than lies before the next (damage shortened it): read alone.
        stretch
            .zip(frames)
            .map(|(i, frame)| {
                let at = frame.offset.checked_sub(first.offset);
                let at = at
                    .and_then(|at| usize::try_from(at).ok())
                    .unwrap_or(usize::MAX);
                match bytes.get(at..at.saturating_add(frame.compressed_len as usize)) {
                    Some(compressed) => frame_records(frame, compressed),
                    None => self.read_frame(i),
                }
            })
            .collect()
    }

    /// `frames` in stretches of at most `STRETCH_RAW_BYTES` of JSON each (one frame at least), in order: what one
    /// thread of a player's fold reads and folds at a time.
    pub fn stretches(&self, frames: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
        let frames = frames.start..frames.end.min(self.frames.len());
        let mut stretches = Vec::new();
        let (mut start, mut raw) = (frames.start, 0u64);
        for i in frames.clone() {
            let frame_raw = u64::from(self.frames[i].raw_len);
            if i > start && raw + frame_raw > STRETCH_RAW_BYTES {
                stretches.push(start..i);
                (start, raw) = (i, 0);
            }
            raw += frame_raw;
        }
        if start < frames.end {
            stretches.push(start..frames.end);
        }
        stretches
    }

    /// Where the index starts, from the trailer a clean close wrote.
    fn trailer(&self, len: u64) -> Option<u64> {
        let tail = read_at(
            &self.file,
            len.checked_sub(TRAILER_LEN as u64)?,
            TRAILER_LEN,
        )
        .ok()?;
        format::decode_trailer(&tail)
    }

    fn read_index(&self, len: u64) -> Option<Vec<FrameInfo>> {
        let at = self.trailer(len)?;
        let index_len = usize::try_from(len.checked_sub(at)?).ok()?;
        // An index entry is 36 bytes: a cap on frames is a cap on the index.
        if index_len > MAX_FRAME_BYTES as usize {
            return None;
        }
        let frames = format::decode_index(&read_at(&self.file, at, index_len).ok()?, len)?;
        // An entry must agree with the marker it points to, which has a checksum the index lacks; one that does
        // not makes the reader scan the markers themselves.
        let agrees = |frame: &FrameInfo| {
            let marker_at = frame.offset.checked_sub(MARKER_LEN as u64)?;
            let marker = read_at(&self.file, marker_at, MARKER_LEN).ok()?;
            (format::decode_marker(&marker, marker_at).as_ref() == Some(frame)).then_some(())
        };
        frames.iter().all(|f| agrees(f).is_some()).then_some(frames)
    }

    /// Hops from marker to marker; when bytes are not a marker, searches forward for the next one from just after
    /// the last marker read, since a frame shortened by damage ends before its marker said and the next marker
    /// then starts inside the span the damaged frame claimed.
    fn scan(&mut self, mut at: u64, len: u64) {
        let mut search_from = at;
        while at < len {
            let head =
                read_at(&self.file, at, MARKER_LEN.min((len - at) as usize)).unwrap_or_default();
            if let Some(frame) = format::decode_marker(&head, at) {
                let end = frame.offset + u64::from(frame.compressed_len);
                if end > len {
                    self.cut_at = Some(at);
                    return;
                }
                if frame.events > 0 {
                    self.keep(frame);
                } else if self.header_at(at, len) {
                    self.second_header = Some(at);
                    return;
                }
                search_from = frame.offset;
                at = end;
                self.scanned_to = at;
                continue;
            }
            // The index (whole, or cut short with the file) ends the frames; a header after it begins another file's.
            if let Skippable::Index(index_len) = format::skippable_kind(&head) {
                let next = at.saturating_add(index_len);
                if self.header_at(next, len) {
                    self.second_header = Some(next);
                }
                return;
            }
            if head.len() < MARKER_LEN && is_marker_prefix(&head) {
                self.cut_at = Some(at);
                return;
            }
            self.damaged_regions += 1;
            match self.next_marker(search_from.min(at) + 1, len) {
                Some(next) => {
                    at = next;
                    search_from = at;
                    self.scanned_to = at;
                }
                None => return,
            }
        }
    }

    /// Whether a recording's header begins at `at`: a marker that counts no records (only a header's does) before a
    /// frame that reads as golow's header.
    fn header_at(&self, at: u64, len: u64) -> bool {
        let head = read_at(
            &self.file,
            at,
            MARKER_LEN.min(len.saturating_sub(at) as usize),
        )
        .unwrap_or_default();
        format::decode_marker(&head, at)
            .is_some_and(|frame| frame.events == 0 && read_header(&self.file, &frame, len).is_ok())
    }

    /// The offset of the next intact marker at or after `from`.
    fn next_marker(&self, mut from: u64, len: u64) -> Option<u64> {
        const CHUNK: usize = 1 << 16;
        while from < len {
            let want = CHUNK.min((len - from) as usize);
            let chunk = read_at(&self.file, from, want).ok()?;
            // Reads MARKER_LEN past each candidate, so a marker straddling chunks is found too.
            for (i, _) in chunk.iter().enumerate().filter(|&(_, &b)| b == 0x5B) {
                let at = from + i as u64;
                let head = read_at(&self.file, at, MARKER_LEN.min((len - at) as usize)).ok()?;
                if format::decode_marker(&head, at).is_some() {
                    return Some(at);
                }
            }
            from += want as u64;
        }
        None
    }
}

/// Whether `last`, kept after `before`, lies so far ahead of `next` (which follows `before`) that it, and not `next`,
/// is out of place: further ahead of `next` than `FAR` times the span from `before` to `next` (a frame's second at
/// least, so that frames a pause apart are not taken for misplaced ones).
fn lies_far_ahead(before: Option<FrameInfo>, last: FrameInfo, next: FrameInfo) -> bool {
    let follows = before.is_none_or(|b| next.first_t_ms > b.last_t_ms);
    let from = before.map_or(next.first_t_ms, |b| b.last_t_ms);
    let span = (next.last_t_ms - from).max(super::FLUSH_EVERY.as_secs_f64() * 1e3);
    follows && last.first_t_ms - next.last_t_ms > FAR * span
}

/// A file cut within a marker still begins like one.
fn is_marker_prefix(head: &[u8]) -> bool {
    matches!(format::skippable_kind(head), Skippable::Marker)
        || (head.len() < SKIPPABLE_HEADER_LEN && [0x5B, 0x2A, 0x4D, 0x18].starts_with(head))
}

fn read_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

thread_local! {
    // Creating a zstd context costs more than decompressing a second's frame: one per thread, reused.
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

fn decompress(compressed: &[u8], frame: &FrameInfo) -> io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        let decompressor = match cell.as_mut() {
            Some(d) => d,
            None => cell.insert(zstd::bulk::Decompressor::new()?),
        };
        // The marker's raw length bounds the output: a damaged frame cannot inflate beyond it.
        decompressor.decompress(compressed, frame.raw_len as usize)
    })
}

/// The records of one frame, from its compressed bytes.
fn frame_records(frame: &FrameInfo, compressed: &[u8]) -> io::Result<FrameRecords> {
    let raw = decompress(compressed, frame)?;
    // The count was checked against the frame's length, and the length bounds the lines anyway.
    let lines = raw.len() / format::MIN_RECORD_BYTES as usize + 1;
    let mut records = Vec::with_capacity((frame.events as usize).min(lines));
    let bad_lines = golow_protocol::event::parse_records(&raw, &mut records);
    Ok(FrameRecords {
        session_starts: SessionStarts::of(&records),
        records,
        bad_lines,
    })
}

fn read_header(file: &File, frame: &FrameInfo, len: u64) -> Result<Header, OpenError> {
    if frame.offset + u64::from(frame.compressed_len) > len {
        return Err(OpenError::NotGolow(
            "it is cut short before its header ends".into(),
        ));
    }
    let damaged = |e: io::Error| OpenError::NotGolow(format!("its header frame is damaged: {e}"));
    let compressed = read_at(file, frame.offset, frame.compressed_len as usize).map_err(damaged)?;
    let raw = decompress(&compressed, frame).map_err(damaged)?;
    let id: HeaderId = serde_json::from_slice(&raw)
        .map_err(|e| OpenError::NotGolow(format!("its header is not golow's: {e}")))?;
    if id.format != FORMAT_NAME {
        return Err(OpenError::NotGolow(format!(
            "its header names format '{}'",
            id.format
        )));
    }
    if id.version > FORMAT_VERSION {
        return Err(OpenError::TooNew(id.version));
    }
    serde_json::from_slice(&raw)
        .map_err(|e| OpenError::NotGolow(format!("its header is not golow's: {e}")))
}
