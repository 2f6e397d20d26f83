//! The kinds a recording is mostly made of (/proc readings, steps, turns, the machine's load, operator windows), and
//! the kinds a worker says most (steps, turns, operator windows), read straight from the bytes of a line golow wrote.
//! serde's derived reading of a flattened, internally tagged record buffers every field before reading it again, and
//! even a reading that visits each field once spends most of a replay's time in serde's generic machinery; this one
//! is a plain scan.
//!
//! It only ever answers for a line it reads completely and exactly as serde would: anything else — another kind, a
//! field it does not know, a key twice, an escape in a string, a number written as a word, a value out of range —
//! gives `None`, and the caller reads the line serde's way, which decides (a test holds the two to the same answer on
//! every sample record and thousands of damaged lines).

use crate::config::Mode;
use crate::event::{Body, Name, OperatorStats, OperatorWindow, Record, Step, TurnEnd, WorkerEvent};

/// Pushes the record on `line` onto `out` when the scan can vouch for it; otherwise false, `out` as it was. Pushed
/// where it is built: returned through `Option`s and `Result`s, each record (176 bytes) was copied seven times.
/// Every string is cut from `line` at an ASCII quote, a character boundary.
pub(crate) fn record_onto(line: &str, out: &mut Vec<Record>) -> bool {
    let mut scan = Scan::new(line);
    let kept = out.len();
    if scan.record_onto(out).is_some() && scan.ended() {
        return true;
    }
    out.truncate(kept);
    false
}

/// A worker's line of the kinds a worker says most (steps, turns, operator windows), `type` first as golow's workers
/// write it, when the scan can vouch for it.
pub(crate) fn worker_event(line: &str) -> Option<WorkerEvent> {
    let mut scan = Scan::new(line);
    scan.eat(b'{')?;
    (scan.string()? == "type").then_some(())?;
    scan.eat(b':')?;
    let event = match scan.string()? {
        "step" => WorkerEvent::Step(scan.step()?),
        "turn_end" => WorkerEvent::TurnEnd(scan.turn_end()?),
        "operators" => WorkerEvent::Operators(scan.operators()?),
        _ => return None,
    };
    scan.ended().then_some(event)
}

/// Powers of ten a double holds exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Eight bytes at once, the first in the lowest byte: where the first `"`, `\\` or control character is, the bytes
/// that end or escape a string (a zero-byte test on the word and on its XORs with those characters; a borrow only
/// carries upwards, so the lowest byte it flags is exact).
fn first_end_or_escape(word: u64) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let flagged = below(quote, 1) | below(backslash, 1) | below(word, 0x20);
    (flagged != 0).then(|| flagged.trailing_zeros() as usize / 8)
}

/// The bytes `Scan::key` compares at once: a key golow writes, its quotes and colon, fits.
const KEY_BYTES: usize = 24;

/// A key as golow writes it, `"name":`, as words to compare a line's next bytes with.
#[derive(Clone, Copy)]
struct Key {
    name: &'static str,
    words: [u64; KEY_BYTES / 8],
    /// The bytes of `words` that are the key's.
    masks: [u64; KEY_BYTES / 8],
}

impl Key {
    const fn new(name: &'static str) -> Key {
        let name_bytes = name.as_bytes();
        assert!(
            name_bytes.len() + 3 <= KEY_BYTES,
            "a key longer than Key compares"
        );
        let (mut pattern, mut mask) = ([0u8; KEY_BYTES], [0u8; KEY_BYTES]);
        pattern[0] = b'"';
        let mut i = 0;
        while i < name_bytes.len() {
            pattern[i + 1] = name_bytes[i];
            i += 1;
        }
        pattern[i + 1] = b'"';
        pattern[i + 2] = b':';
        i = 0;
        while i < name_bytes.len() + 3 {
            mask[i] = 0xFF;
            i += 1;
        }
        Key {
            name,
            words: Key::words(&pattern),
            masks: Key::words(&mask),
        }
    }

    /// The keys of an object in the order golow writes them.
    const fn all<const N: usize>(names: [&'static str; N]) -> [Key; N] {
        let mut keys = [Key::new("_"); N];
        let mut i = 0;
        while i < N {
            keys[i] = Key::new(names[i]);
            i += 1;
        }
        keys
    }

    const fn words(bytes: &[u8; KEY_BYTES]) -> [u64; KEY_BYTES / 8] {
        let mut words = [0; KEY_BYTES / 8];
        let mut i = 0;
        while i < words.len() {
            let mut word = [0u8; 8];
            let mut j = 0;
            while j < 8 {
                word[j] = bytes[i * 8 + j];
                j += 1;
            }
            words[i] = u64::from_le_bytes(word);
            i += 1;
        }
        words
    }

    /// Whether `head`, the next `KEY_BYTES` of a line as words, begins with this key.
    fn starts(&self, head: &[u64; KEY_BYTES / 8]) -> bool {
        (0..head.len()).all(|i| head[i] & self.masks[i] == self.words[i])
    }
}

/// A number as read: its text, and its value when the digits alone give it exactly.
struct Number<'a> {
    text: &'a str,
    /// Set for a number written without an exponent whose digits make a whole number a double holds exactly (at
    /// most 2^53) over at most 22 decimal places: one division, which IEEE rounds correctly, then gives the
    /// correctly rounded value, as serde's reading does (Clinger's fast path). Golow's times and shares
    /// (`4571.091`, `81.3`) are all of this form.
    exact: Option<f64>,
}

struct Scan<'a> {
    text: &'a str,
    at: usize,
}

/// A field's value, once: a second sighting of the key gives up (serde refuses duplicate fields).
fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value?);
    Some(())
}

impl<'a> Scan<'a> {
    fn new(text: &'a str) -> Scan<'a> {
        Scan { text, at: 0 }
    }

    /// Whether nothing but white space is left.
    fn ended(&mut self) -> bool {
        self.space();
        self.at == self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    fn word(&mut self, word: &str) -> bool {
        self.space();
        let found = self.text[self.at..].starts_with(word);
        if found {
            self.at += word.len();
        }
        found
    }

    /// A string with no escapes and no control characters, as golow writes names and tags.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let bytes = self.text.as_bytes();
        // Names and shapes are most of a replay's bytes: stepped over eight at a time up to the byte that ends
        // them, which the loop below then reads (byte by byte only in a line's last seven).
        while let Some(word) = bytes[self.at..].first_chunk::<8>() {
            if let Some(i) = first_end_or_escape(u64::from_le_bytes(*word)) {
                self.at += i;
                break;
            }
            self.at += 8;
        }
        loop {
            match *bytes.get(self.at)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        Some(&self.text[start..self.at - 1])
    }

    /// A JSON number, its grammar checked, read in the same pass.
    fn number(&mut self) -> Option<Number<'a>> {
        self.space();
        let start = self.at;
        let bytes = self.text.as_bytes();
        let (mut mantissa, mut digits_exact) = (0u64, true);
        let mut digits = |at: &mut usize| {
            let from = *at;
            while let Some(digit) = bytes.get(*at).filter(|b| b.is_ascii_digit()) {
                mantissa = mantissa * 10 + u64::from(digit - b'0');
                digits_exact &= mantissa <= 1 << 53;
                // Past 2^53 the value no longer matters: kept small so that it cannot overflow.
                mantissa &= (1 << 54) - 1;
                *at += 1;
            }
            *at - from
        };
        let mut at = self.at;
        let negative = bytes.get(at) == Some(&b'-');
        at += usize::from(negative);
        if bytes.get(at) == Some(&b'0') {
            at += 1;
        } else if digits(&mut at) == 0 {
            return None;
        }
        let mut places = 0;
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            places = digits(&mut at);
            (places > 0).then_some(())?;
        }
        let mut exponent = false;
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            exponent = true;
            at += 1;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            (digits(&mut at) > 0).then_some(())?;
        }
        self.at = at;
        let exact = (digits_exact && !exponent)
            .then(|| EXACT_POWERS_OF_TEN.get(places))
            .flatten()
            .map(|power| {
                let value = mantissa as f64 / power;
                if negative { -value } else { value }
            });
        Some(Number {
            text: &self.text[start..at],
            exact,
        })
    }

    /// A finite number (serde refuses one that overflows to infinity).
    fn f64(&mut self) -> Option<f64> {
        let number = self.number()?;
        number
            .exact
            .or_else(|| number.text.parse::<f64>().ok())
            .filter(|v| v.is_finite())
    }

    /// A whole number in range, written without a sign, a fraction or an exponent, read as it is scanned.
    fn integer<T: TryFrom<u64>>(&mut self) -> Option<T> {
        self.space();
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut value: u64 = 0;
        while let Some(digit) = bytes.get(self.at).filter(|b| b.is_ascii_digit()) {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        let leading_zero = digits > 1 && bytes[start] == b'0';
        if digits == 0 || leading_zero || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        T::try_from(value).ok()
    }

    fn null(&mut self) -> bool {
        self.word("null")
    }

    fn optional<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.null() {
            Some(None)
        } else {
            read(self).map(Some)
        }
    }

    fn bool(&mut self) -> Option<bool> {
        if self.word("true") {
            Some(true)
        } else if self.word("false") {
            Some(false)
        } else {
            None
        }
    }

    /// Items separated by commas up to `close`, the opening bracket already read: `item` reads each.
    fn items(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            if self.eat(b',').is_none() {
                return self.eat(close);
            }
        }
    }

    /// A key and its colon. Golow writes an object's keys in one order, without spaces: the next of `written` (the
    /// keys in that order, less those already read) is matched whole first, which spares reading the key byte by
    /// byte; any other key is read as any string.
    #[inline(always)]
    fn key(&mut self, written: &mut &[Key]) -> Option<&'a str> {
        let rest = &self.text.as_bytes()[self.at..];
        let head = match rest.first_chunk::<KEY_BYTES>() {
            Some(head) => *head,
            // Near the line's end, padded with zeros, which no key has.
            None => {
                let mut head = [0; KEY_BYTES];
                head[..rest.len()].copy_from_slice(rest);
                head
            }
        };
        let chunks = head.as_chunks::<8>().0;
        let words: [u64; KEY_BYTES / 8] = std::array::from_fn(|i| u64::from_le_bytes(chunks[i]));
        if let Some(i) = written.iter().position(|key| key.starts(&words)) {
            let key = written[i].name;
            self.at += key.len() + 3;
            *written = &written[i + 1..];
            return Some(key);
        }
        #[cfg(test)]
        tests::KEYS_NOT_FORESEEN.with(|n| n.set(n.get() + 1));
        let key = self.string()?;
        self.eat(b':')?;
        Some(key)
    }

    /// The fields of an object, `{` already read: `field` reads each key's value, and refuses an unknown key;
    /// `written` are the keys in the order golow writes them.
    fn fields(
        &mut self,
        mut written: &[Key],
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.items(b'}', |s| {
            let key = s.key(&mut written)?;
            field(s, key)
        })
    }

    /// The head fields first (`v`, `t_ms`, `worker`), then `type`, then the body's, as golow writes a record.
    fn record_onto(&mut self, out: &mut Vec<Record>) -> Option<()> {
        self.eat(b'{')?;
        let (mut v, mut t_ms, mut worker) = (None, None, None);
        const KEYS: [Key; 4] = Key::all(["v", "t_ms", "worker", "type"]);
        let mut written: &[Key] = &KEYS;
        let tag = loop {
            match self.key(&mut written)? {
                "v" => once(&mut v, self.integer())?,
                "t_ms" => once(&mut t_ms, self.f64())?,
                "worker" => once(&mut worker, self.optional(|s| s.string().map(Name::from)))?,
                "type" => break self.string()?,
                _ => return None,
            }
            self.eat(b',')?;
        };
        let body = match tag {
            "process" => self.process()?,
            "step" => Body::Step(self.step()?),
            "turn_end" => Body::TurnEnd(self.turn_end()?),
            "machine_load" => self.machine_load()?,
            "operators" => Body::Operators(self.operators()?),
            _ => return None,
        };
        out.push(Record {
            v: v?,
            t_ms: t_ms?,
            worker: worker.flatten(),
            body,
        });
        Some(())
    }

    /// The rest of the record's object after its tag: `,` and fields, or its end.
    fn body_fields(
        &mut self,
        written: &[Key],
        field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        if self.eat(b',').is_none() {
            return self.eat(b'}');
        }
        self.fields(written, field)
    }

    fn process(&mut self) -> Option<Body> {
        const KEYS: [Key; 5] =
            Key::all(["pid", "rss_bytes", "peak_rss_bytes", "cpu_percent", "rank"]);
        let (mut pid, mut rss, mut peak, mut cpu, mut rank) = (None, None, None, None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "pid" => once(&mut pid, s.integer()),
            "rss_bytes" => once(&mut rss, s.integer()),
            "peak_rss_bytes" => once(&mut peak, s.integer()),
            "cpu_percent" => once(&mut cpu, s.optional(Self::f64)),
            "rank" => once(&mut rank, s.optional(Self::integer)),
            _ => None,
        })?;
        Some(Body::Process {
            pid: pid?,
            rss_bytes: rss?,
            peak_rss_bytes: peak?,
            // serde's Option fields may be missing.
            cpu_percent: cpu.flatten(),
            rank: rank.flatten(),
        })
    }

    fn step(&mut self) -> Option<Step> {
        const KEYS: [Key; 14] = Key::all([
            "step",
            "epoch",
            "phase",
            "batch_size",
            "data_ms",
            "h2d_ms",
            "h2d_bytes",
            "compute_ms",
            "loss",
            "correct",
            "warmup",
            "profiled",
            "start_ns",
            "end_ns",
        ]);
        let (mut step, mut epoch, mut phase, mut batch_size, mut data_ms) =
            (None, None, None, None, None);
        let (mut h2d_ms, mut h2d_bytes, mut compute_ms, mut loss) = (None, None, None, None);
        let (mut correct, mut warmup, mut profiled) = (None, None, None);
        let (mut start_ns, mut end_ns) = (None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "step" => once(&mut step, s.integer()),
            "epoch" => once(&mut epoch, s.integer()),
            "phase" => once(
                &mut phase,
                match s.string()? {
                    "train" => Some(Mode::Train),
                    "eval" => Some(Mode::Eval),
                    _ => None,
                },
            ),
            "batch_size" => once(&mut batch_size, s.integer()),
            "data_ms" => once(&mut data_ms, s.f64()),
            "h2d_ms" => once(&mut h2d_ms, s.optional(Self::f64)),
            "h2d_bytes" => once(&mut h2d_bytes, s.optional(Self::integer)),
            "compute_ms" => once(&mut compute_ms, s.f64()),
            // A word ("nan") or null is left to serde.
            "loss" => once(&mut loss, s.f64()),
            "correct" => once(&mut correct, s.integer()),
            "warmup" => once(&mut warmup, s.bool()),
            "profiled" => once(&mut profiled, s.bool()),
            "start_ns" => once(&mut start_ns, s.optional(Self::integer)),
            "end_ns" => once(&mut end_ns, s.optional(Self::integer)),
            _ => None,
        })?;
        Some(Step {
            step: step?,
            epoch: epoch?,
            phase: phase?,
            batch_size: batch_size?,
            data_ms: data_ms?,
            h2d_ms: h2d_ms.flatten(),
            h2d_bytes: h2d_bytes.flatten(),
            compute_ms: compute_ms?,
            loss: loss?,
            correct: correct?,
            warmup: warmup?,
            profiled: profiled.unwrap_or(false),
            start_ns: start_ns.flatten(),
            end_ns: end_ns.flatten(),
        })
    }

    fn turn_end(&mut self) -> Option<TurnEnd> {
        const KEYS: [Key; 1] = Key::all(["steps_done"]);
        let mut steps_done = None;
        self.body_fields(&KEYS, |s, key| match key {
            "steps_done" => once(&mut steps_done, s.integer()),
            _ => None,
        })?;
        Some(TurnEnd {
            steps_done: steps_done?,
        })
    }

    fn machine_load(&mut self) -> Option<Body> {
        const KEYS: [Key; 5] = Key::all([
            "load_1m",
            "busy_percent",
            "steal_percent",
            "others_percent",
            "cpu_mhz",
        ]);
        let (mut load, mut busy, mut steal, mut others, mut mhz) = (None, None, None, None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "load_1m" => once(&mut load, s.f64()),
            "busy_percent" => once(&mut busy, s.f64()),
            "steal_percent" => once(&mut steal, s.f64()),
            "others_percent" => once(&mut others, s.f64()),
            "cpu_mhz" => once(&mut mhz, s.optional(Self::f64)),
            _ => None,
        })?;
        Some(Body::MachineLoad {
            load_1m: load?,
            busy_percent: busy?,
            steal_percent: steal?,
            others_percent: others?,
            cpu_mhz: mhz.flatten(),
        })
    }

    fn operators(&mut self) -> Option<OperatorWindow> {
        const KEYS: [Key; 6] = Key::all([
            "process",
            "steps",
            "compute_ms",
            "every",
            "operators",
            "dropped",
        ]);
        let (mut process, mut steps, mut compute_ms, mut every) = (None, None, None, None);
        let (mut operators, mut dropped) = (None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "process" => once(&mut process, s.integer()),
            "steps" => once(&mut steps, s.integer()),
            "compute_ms" => once(&mut compute_ms, s.f64()),
            "every" => once(&mut every, s.integer()),
            "operators" => once(&mut operators, s.operator_list()),
            "dropped" => once(&mut dropped, s.integer()),
            _ => None,
        })?;
        Some(OperatorWindow {
            process: process.unwrap_or(0),
            steps: steps?,
            compute_ms: compute_ms?,
            every: every?,
            operators: operators?,
            dropped: dropped?,
        })
    }

    fn operator_list(&mut self) -> Option<Vec<OperatorStats>> {
        self.eat(b'[')?;
        // Golow's workers name up to this many, and most windows have as many: one allocation, not five.
        let mut list = Vec::with_capacity(crate::event::MAX_OPERATORS);
        self.items(b']', |s| {
            list.push(s.operator()?);
            Some(())
        })?;
        Some(list)
    }

    fn operator(&mut self) -> Option<OperatorStats> {
        const KEYS: [Key; 5] = Key::all(["name", "calls", "self_ns", "total_ns", "shapes"]);
        self.eat(b'{')?;
        let (mut name, mut calls, mut self_ns, mut total_ns, mut shapes) =
            (None, None, None, None, None);
        self.fields(&KEYS, |s, key| match key {
            "name" => once(&mut name, s.string()),
            "calls" => once(&mut calls, s.integer()),
            "self_ns" => once(&mut self_ns, s.integer()),
            "total_ns" => once(&mut total_ns, s.integer()),
            "shapes" => once(&mut shapes, s.string()),
            _ => None,
        })?;
        Some(OperatorStats {
            name: name?.into(),
            calls: calls?,
            self_ns: self_ns?,
            total_ns: total_ns?,
            shapes: shapes.unwrap_or_default().into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{Damage, every_body};
    use serde::Serialize;
    use serde::de::DeserializeOwned;

    const SCANNED: [&str; 5] = ["process", "step", "turn_end", "machine_load", "operators"];

    thread_local! {
        /// Keys `Scan::key` read as any string: not the next of the keys it was told golow writes.
        pub(super) static KEYS_NOT_FORESEEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// Golow's own records of the scanned kinds, one line per sample.
    fn record_lines() -> Vec<Vec<u8>> {
        every_body()
            .into_iter()
            .enumerate()
            .map(|(i, body)| {
                let worker = (i % 2 == 0).then(|| Name::from("pytorch"));
                serde_json::to_vec(&Record::new(0.125 * i as f64 + 1e-9, worker, body)).unwrap()
            })
            .filter(|line| {
                let tag =
                    serde_json::from_slice::<serde_json::Value>(line).unwrap()["type"].clone();
                SCANNED.iter().any(|kind| tag == *kind)
            })
            .collect()
    }

    /// A worker's lines of the kinds the scan reads, as a worker writes them: a record's line less its head.
    fn worker_lines() -> Vec<Vec<u8>> {
        let head = format!(r#"{{"v":{},"t_ms":1.0,"#, crate::event::SCHEMA_VERSION);
        every_body()
            .into_iter()
            .map(|body| serde_json::to_string(&Record::new(1.0, None, body)).unwrap())
            .filter(|line| {
                ["step", "turn_end", "operators"]
                    .iter()
                    .any(|kind| line.starts_with(&format!(r#"{head}"type":"{kind}""#)))
            })
            .map(|line| line.replacen(&head, "{", 1).into_bytes())
            .collect()
    }

    /// Written out again, so that what `==` on numbers overlooks (0.0 against -0.0) counts.
    fn text<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    fn scan_record(line: &[u8]) -> Option<Record> {
        let mut out = Vec::new();
        record_onto(std::str::from_utf8(line).ok()?, &mut out)
            .then(|| out.pop())
            .flatten()
    }

    fn scan_worker_line(line: &[u8]) -> Option<WorkerEvent> {
        worker_event(std::str::from_utf8(line).ok()?)
    }

    /// Every line is read by `scan` as serde reads it; on 20,000 damaged copies, wherever `scan` answers, serde reads
    /// the same, and both refuse many.
    fn answers_only_as_serde<T: Serialize + DeserializeOwned>(
        lines: &[Vec<u8>],
        scan: impl Fn(&[u8]) -> Option<T>,
    ) {
        assert!(lines.len() >= 3, "{} lines", lines.len());
        for line in lines {
            let scanned = scan(line).unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(line)));
            assert_eq!(
                text(&scanned),
                text(&serde_json::from_slice::<T>(line).unwrap())
            );
        }
        const BYTES: &[u8] = br#"{}[]":, 0123456789-+.eE\nul"#;
        let mut damage = Damage::new(0x9E37_79B9_7F4A_7C15);
        let (mut answered, mut refused_by_both) = (0, 0);
        for case in 0..20_000 {
            let mut bytes = lines[case % lines.len()].clone();
            damage.damage(&mut bytes, BYTES, 2);
            let by_serde = serde_json::from_slice::<T>(&bytes);
            match scan(&bytes) {
                Some(scanned) => {
                    answered += 1;
                    let line = String::from_utf8_lossy(&bytes);
                    let by_serde = by_serde
                        .unwrap_or_else(|e| panic!("case {case}: serde refuses {line}: {e}"));
                    assert_eq!(text(&scanned), text(&by_serde), "case {case}: {line}");
                }
                None if by_serde.is_err() => refused_by_both += 1,
                None => {}
            }
        }
        assert!(
            answered > 1_000 && refused_by_both > 1_000,
            "{answered} answered, {refused_by_both} refused by both"
        );
    }

    /// A whole number's exact value, as the scan reads it.
    fn exact(text: &str) -> Option<f64> {
        let mut scan = Scan::new(text);
        let number = scan.number().unwrap();
        assert!(scan.ended(), "{text}");
        number.exact
    }

    #[test]
    fn a_word_is_seen_to_end_or_escape_a_string_exactly_where_its_first_such_byte_is() {
        let special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
        let first = |word: [u8; 8]| word.iter().position(|&b| special(b));
        for byte in 0..=255u8 {
            for at in 0..8 {
                let mut word = *b"abcdefgh";
                word[at] = byte;
                assert_eq!(
                    first_end_or_escape(u64::from_le_bytes(word)),
                    special(byte).then_some(at),
                    "{byte} at {at}"
                );
            }
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let word = x.to_le_bytes();
            assert_eq!(first_end_or_escape(x), first(word), "{word:?}");
        }
    }

    /// Wherever the fast path answers, it answers as the full parser does, to the bit; and it answers for the
    /// numbers golow writes.
    #[test]
    fn exact_decimals_are_read_as_the_full_parser_reads_them() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut digits = |most: u64| -> String {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let count = x % (most + 1);
            (0..count)
                .map(|i| char::from(b'0' + (x >> (i * 3 % 60) ^ i) as u8 % 10))
                .collect()
        };
        let mut answered = 0;
        for case in 0..200_000 {
            // JSON's grammar: no leading zero but a lone one.
            let whole = match digits(19) {
                w if w.is_empty() || w.starts_with('0') => "0".to_string(),
                w => w,
            };
            let fraction = digits(24);
            let mut text = if fraction.is_empty() {
                whole
            } else {
                format!("{whole}.{fraction}")
            };
            if case % 3 == 0 {
                text.insert(0, '-');
            }
            let full: f64 = text.parse().unwrap();
            if let Some(fast) = exact(&text) {
                answered += 1;
                assert_eq!(fast.to_bits(), full.to_bits(), "{text}");
            }
        }
        assert!(answered > 50_000, "{answered}");
        for written in [
            "4571.091",
            "81.3",
            "0",
            "-0.0",
            "0.000125",
            "9007199254740992",
        ] {
            let fast = exact(written).unwrap_or_else(|| panic!("{written}"));
            assert_eq!(fast.to_bits(), written.parse::<f64>().unwrap().to_bits());
        }
        for declined in ["1e5", "9007199254740993", "1.00000000000000000000001"] {
            assert_eq!(exact(declined), None, "{declined}");
        }
    }

    /// The keys each kind is told golow writes are those serde writes, in its order: every key of golow's own
    /// lines is matched whole.
    #[test]
    fn the_keys_golow_writes_are_foreseen_in_their_order() {
        KEYS_NOT_FORESEEN.with(|n| n.set(0));
        for line in record_lines() {
            assert!(scan_record(&line).is_some());
        }
        for line in worker_lines() {
            assert!(scan_worker_line(&line).is_some());
        }
        assert_eq!(KEYS_NOT_FORESEEN.with(|n| n.get()), 0);
        // A line in another order still reads, the keys then read one by one.
        assert!(scan_record(br#"{"t_ms":1.5,"v":1,"type":"turn_end","steps_done":3}"#).is_some());
        assert!(KEYS_NOT_FORESEEN.with(|n| n.get()) > 0);
    }

    #[test]
    fn the_scan_reads_records_only_as_serde_does() {
        answers_only_as_serde::<Record>(&record_lines(), scan_record);
    }

    #[test]
    fn the_scan_reads_worker_lines_only_as_serde_does() {
        answers_only_as_serde::<WorkerEvent>(&worker_lines(), scan_worker_line);
    }
}
