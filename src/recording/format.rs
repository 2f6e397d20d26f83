//! The bytes of a `.golow` file (docs/recording-format.md).
//!
//! A recording is a sequence of zstd frames, so `zstd -dc FILE` prints it as JSON lines: first the
//! header, then every record. Each data frame is preceded by a marker in a zstd *skippable* frame
//! (which `zstd -dc` ignores) giving the frame's length, event count and time range: a reader can hop
//! from frame to frame without decompressing, and find its way again after damage. A clean close
//! appends the index of all markers, in a last skippable frame, ending in a fixed trailer.

use serde::{Deserialize, Serialize};

use golow_protocol::config::SessionConfig;

use crate::telemetry::machine::Machine;

/// What the header's `format` field says.
pub const FORMAT_NAME: &str = "golow-recording";
/// Bumped on any change a reader of older files could misread.
pub const FORMAT_VERSION: u32 = 1;

/// zstd's skippable frames have magics 0x184D2A50..=0x184D2A5F; golow uses two of them.
const SKIPPABLE_MARKER: u32 = 0x184D_2A5B;
const SKIPPABLE_INDEX: u32 = 0x184D_2A5C;
const MARKER_TAG: &[u8; 4] = b"GLWF";
const INDEX_TAG: &[u8; 4] = b"GLWI";
const TRAILER_TAG: &[u8; 8] = b"GLWIEND\0";

/// Skippable frame header: magic and content size, both little-endian u32.
pub const SKIPPABLE_HEADER_LEN: usize = 8;
const MARKER_CONTENT_LEN: usize = 4 + 4 + 4 + 4 + 8 + 8 + 8;
/// A marker as written: skippable header, then its content.
pub const MARKER_LEN: usize = SKIPPABLE_HEADER_LEN + MARKER_CONTENT_LEN;
/// The last bytes of a cleanly closed file: the index frame's offset and a tag.
pub const TRAILER_LEN: usize = 16;
const INDEX_ENTRY_LEN: usize = 8 + MARKER_CONTENT_LEN - 4 - 8;

/// No frame, compressed or not, may be larger: a damaged length cannot make a reader allocate more.
pub const MAX_FRAME_BYTES: u32 = 16 << 20;

/// What golow ran, where, and how: the first line of every recording.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub golow_version: String,
    /// The commit golow was built from (`-dirty` with uncommitted changes, `unknown` outside a git checkout);
    /// absent from recordings made before golow said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub golow_commit: Option<String>,
    /// The event schema version of the records that follow.
    pub schema_version: u32,
    pub created_utc: String,
    /// Its fields sit in the header itself (`host`, `cpu`, `cores`, `gpus`, `gpu_unavailable`).
    #[serde(flatten)]
    pub machine: Machine,
    pub command_line: Vec<String>,
    pub config: SessionConfig,
}

/// The part of a header every version shares: enough to say what the file is.
#[derive(Deserialize)]
pub struct HeaderId {
    pub format: String,
    pub version: u32,
}

/// One data frame: where it is and what it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameInfo {
    /// Offset of the zstd frame itself (after its marker).
    pub offset: u64,
    pub compressed_len: u32,
    pub raw_len: u32,
    pub events: u32,
    pub first_t_ms: f64,
    pub last_t_ms: f64,
}

/// FNV-1a: detects a damaged marker; not a defence against forgery, which a reader survives anyway.
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn skippable_header(magic: u32, len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&magic.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
}

fn frame_fields(frame: &FrameInfo, out: &mut Vec<u8>) {
    out.extend_from_slice(&frame.compressed_len.to_le_bytes());
    out.extend_from_slice(&frame.raw_len.to_le_bytes());
    out.extend_from_slice(&frame.events.to_le_bytes());
    out.extend_from_slice(&frame.first_t_ms.to_le_bytes());
    out.extend_from_slice(&frame.last_t_ms.to_le_bytes());
}

/// Little-endian reads from a slice already checked to be long enough.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.0[..N]);
        self.0 = &self.0[N..];
        out
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
    /// The frame fields in `frame_fields` order, with the frame's offset given.
    fn frame(&mut self, offset: u64) -> FrameInfo {
        FrameInfo {
            offset,
            compressed_len: self.u32(),
            raw_len: self.u32(),
            events: self.u32(),
            first_t_ms: self.f64(),
            last_t_ms: self.f64(),
        }
    }
}

/// The shortest line a record can be (`{"v":1,"t_ms":0,"type":"…"}` and its line break), so that a frame's event
/// count is bounded by its length.
pub const MIN_RECORD_BYTES: u32 = 24;

/// Plausible lengths, counts and times: what a damaged or hostile marker or index entry fails.
fn plausible(frame: &FrameInfo) -> bool {
    frame.compressed_len > 0
        && frame.compressed_len <= MAX_FRAME_BYTES
        && frame.raw_len <= MAX_FRAME_BYTES
        && u64::from(frame.events) * u64::from(MIN_RECORD_BYTES) <= u64::from(frame.raw_len)
        && frame.first_t_ms.is_finite()
        && frame.last_t_ms.is_finite()
        && frame.first_t_ms <= frame.last_t_ms
}

/// The marker written before the frame described by `frame` (whose offset is implied).
pub fn encode_marker(frame: &FrameInfo) -> Vec<u8> {
    let mut out = Vec::with_capacity(MARKER_LEN);
    skippable_header(SKIPPABLE_MARKER, MARKER_CONTENT_LEN, &mut out);
    out.extend_from_slice(MARKER_TAG);
    frame_fields(frame, &mut out);
    let hash = fnv64(&out[SKIPPABLE_HEADER_LEN..]);
    out.extend_from_slice(&hash.to_le_bytes());
    out
}

/// The marker at the start of `bytes`, if it is one and intact; `offset` is where `bytes` starts.
pub fn decode_marker(bytes: &[u8], offset: u64) -> Option<FrameInfo> {
    let bytes = bytes.get(..MARKER_LEN)?;
    let mut fields = Fields(bytes);
    if fields.u32() != SKIPPABLE_MARKER || fields.u32() as usize != MARKER_CONTENT_LEN {
        return None;
    }
    let content = &bytes[SKIPPABLE_HEADER_LEN..MARKER_LEN - 8];
    if &fields.take::<4>() != MARKER_TAG {
        return None;
    }
    let frame = fields.frame(offset + MARKER_LEN as u64);
    (fields.u64() == fnv64(content) && plausible(&frame)).then_some(frame)
}

/// What a skippable frame at some offset is, read from its first bytes.
pub enum Skippable {
    Marker,
    /// The index, with its whole length (header included).
    Index(u64),
    Other,
}

pub fn skippable_kind(bytes: &[u8]) -> Skippable {
    let Some(head) = bytes.get(..SKIPPABLE_HEADER_LEN) else {
        return Skippable::Other;
    };
    let mut fields = Fields(head);
    match (fields.u32(), fields.u32()) {
        (SKIPPABLE_MARKER, _) => Skippable::Marker,
        (SKIPPABLE_INDEX, len) => Skippable::Index(SKIPPABLE_HEADER_LEN as u64 + u64::from(len)),
        _ => Skippable::Other,
    }
}

/// The index frame and trailer written at a clean close; `at` is the index frame's own offset.
pub fn encode_index(frames: &[FrameInfo], at: u64) -> Vec<u8> {
    let content_len = INDEX_TAG.len() + 8 + frames.len() * INDEX_ENTRY_LEN + TRAILER_LEN;
    let mut out = Vec::with_capacity(SKIPPABLE_HEADER_LEN + content_len);
    skippable_header(SKIPPABLE_INDEX, content_len, &mut out);
    out.extend_from_slice(INDEX_TAG);
    out.extend_from_slice(&(frames.len() as u64).to_le_bytes());
    for frame in frames {
        out.extend_from_slice(&frame.offset.to_le_bytes());
        frame_fields(frame, &mut out);
    }
    out.extend_from_slice(&at.to_le_bytes());
    out.extend_from_slice(TRAILER_TAG);
    out
}

/// Where the index frame starts, from a file's last `TRAILER_LEN` bytes.
pub fn decode_trailer(tail: &[u8]) -> Option<u64> {
    let tail = tail.get(tail.len().checked_sub(TRAILER_LEN)?..)?;
    (&tail[8..] == TRAILER_TAG).then(|| Fields(tail).u64())
}

/// The frames of an index frame (`bytes` from its skippable header to the file's end), checked
/// against the file's length: `None` when anything is off, and the reader scans instead.
pub fn decode_index(bytes: &[u8], file_len: u64) -> Option<Vec<FrameInfo>> {
    let mut fields = Fields(bytes.get(..SKIPPABLE_HEADER_LEN + INDEX_TAG.len() + 8)?);
    let (magic, len) = (fields.u32(), fields.u32() as usize);
    if magic != SKIPPABLE_INDEX || len + SKIPPABLE_HEADER_LEN != bytes.len() {
        return None;
    }
    if &fields.take::<4>() != INDEX_TAG {
        return None;
    }
    let count = usize::try_from(fields.u64()).ok()?;
    let entries = bytes.get(SKIPPABLE_HEADER_LEN + INDEX_TAG.len() + 8..)?;
    if count.checked_mul(INDEX_ENTRY_LEN)? + TRAILER_LEN != entries.len() {
        return None;
    }
    let mut fields = Fields(entries);
    let mut frames = Vec::with_capacity(count);
    let mut end = 0;
    for _ in 0..count {
        let offset = fields.u64();
        let frame = fields.frame(offset);
        let frame_end = offset.checked_add(u64::from(frame.compressed_len))?;
        if !plausible(&frame) || offset < end || frame_end > file_len {
            return None;
        }
        end = frame_end;
        frames.push(frame);
    }
    Some(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(offset: u64, first: f64) -> FrameInfo {
        FrameInfo {
            offset,
            compressed_len: 100,
            raw_len: 400,
            events: 7,
            first_t_ms: first,
            last_t_ms: first + 900.0,
        }
    }

    #[test]
    fn markers_round_trip_and_reject_damage() {
        let f = frame(1000 + MARKER_LEN as u64, 12.5);
        let bytes = encode_marker(&f);
        assert_eq!(bytes.len(), MARKER_LEN);
        assert_eq!(decode_marker(&bytes, 1000), Some(f));
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert_eq!(decode_marker(&damaged, 1000), None, "byte {i}");
        }
        assert_eq!(decode_marker(&bytes[..MARKER_LEN - 1], 1000), None);
    }

    #[test]
    fn a_count_no_frame_could_hold_is_refused() {
        let f = FrameInfo {
            events: u32::MAX,
            ..frame(1000 + MARKER_LEN as u64, 0.0)
        };
        assert_eq!(decode_marker(&encode_marker(&f), 1000), None);
        let at = 5000;
        let index = encode_index(&[f], at);
        assert_eq!(decode_index(&index, at + index.len() as u64), None);
    }

    #[test]
    fn index_round_trips_and_is_checked_against_the_file() {
        let frames = vec![frame(44, 0.0), frame(300, 1000.0)];
        let at = 500;
        let bytes = encode_index(&frames, at);
        let file_len = at + bytes.len() as u64;
        assert_eq!(decode_trailer(&bytes), Some(at));
        assert_eq!(decode_index(&bytes, file_len), Some(frames.clone()));
        // A frame beyond the file's end, or frames out of order, make the index unusable.
        assert_eq!(decode_index(&bytes, 350), None);
        let swapped = encode_index(&[frames[1], frames[0]], at);
        assert_eq!(decode_index(&swapped, file_len), None);
        assert_eq!(decode_index(&bytes[..bytes.len() - 1], file_len), None);
        assert_eq!(decode_trailer(b"short"), None);
    }
}
