//! The kinds a recording is mostly made of (/proc and NVML readings, CUPTI's kernel windows, steps, turns, the
//! machine's load, operator windows), and the kinds a worker says most (steps, turns, operator windows), read straight
//! from the bytes of a line golow wrote.
//! serde's derived reading of a flattened, internally tagged record buffers every field before reading it again, and
//! even a reading that visits each field once spends most of a replay's time in serde's generic machinery; this one
//! is a plain scan.
//!
//! It only ever answers for a line it reads completely and exactly as serde would: anything else — another kind, a
//! field it does not know, a key twice, an escape in a string, a number written as a word, a value out of range —
//! gives `None`, and the caller reads the line serde's way, which decides (a test holds the two to the same answer on
//! every sample record and thousands of damaged lines).

use crate::config::Mode;
use crate::event::{
    Body, Breakdown, CopyKind, CopyRuns, CopyStats, KernelStats, KernelWindow, MemoryKind, Name,
    OperatorStats, OperatorWindow, Record, Run, Step, Timeline, TurnEnd, WorkerEvent,
};

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
        T::try_from(self.unsigned()?).ok()
    }

    /// A whole number that may be negative, as serde reads an `i64`.
    fn signed(&mut self) -> Option<i64> {
        self.space();
        if self.peek() != Some(b'-') {
            return i64::try_from(self.unsigned()?).ok();
        }
        self.at += 1;
        let magnitude = self.unsigned()?;
        // serde_json reads `-0`, and a magnitude past an i64's, as a float, which an i64 refuses.
        (magnitude != 0).then_some(())?;
        0i64.checked_sub_unsigned(magnitude)
    }

    /// The digits of a whole number right here (no space before them), with no fraction or exponent after them.
    fn unsigned(&mut self) -> Option<u64> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut value: u64 = 0;
        while let Some(digit) = bytes.get(self.at).filter(|b| b.is_ascii_digit()) {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
            self.at += 1;
        }
        let length = self.at - start;
        let leading_zero = length > 1 && bytes[start] == b'0';
        if length == 0 || leading_zero || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(value)
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

    /// A JSON array, each item read by `item` into a list allocated for `capacity` at first.
    fn list<T>(
        &mut self,
        capacity: usize,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.eat(b'[')?;
        let mut list = Vec::with_capacity(capacity);
        self.items(b']', |s| {
            list.push(item(s)?);
            Some(())
        })?;
        Some(list)
    }

    /// A comma, then what `read` reads: a tuple's next element.
    fn then<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.eat(b',')?;
        read(self)
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
            "gpu_device" => self.gpu_device()?,
            "gpu_pcie" => self.gpu_pcie()?,
            "gpu_process" => self.gpu_process()?,
            "gpu_processes_unavailable" => self.gpu_processes_unavailable()?,
            "kernels" => Body::Kernels(Box::new(self.kernel_window()?)),
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
        const KEYS: [Key; 6] = Key::all([
            "pid",
            "rss_bytes",
            "peak_rss_bytes",
            "cpu_percent",
            "rank",
            "threads",
        ]);
        let (mut pid, mut rss, mut peak, mut cpu, mut rank, mut threads) =
            (None, None, None, None, None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "pid" => once(&mut pid, s.integer()),
            "rss_bytes" => once(&mut rss, s.integer()),
            "peak_rss_bytes" => once(&mut peak, s.integer()),
            "cpu_percent" => once(&mut cpu, s.optional(Self::f64)),
            "rank" => once(&mut rank, s.optional(Self::integer)),
            "threads" => once(&mut threads, s.optional(Self::integer)),
            _ => None,
        })?;
        Some(Body::Process {
            pid: pid?,
            rss_bytes: rss?,
            peak_rss_bytes: peak?,
            // serde's Option fields may be missing.
            cpu_percent: cpu.flatten(),
            rank: rank.flatten(),
            threads: threads.flatten(),
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

    fn gpu_device(&mut self) -> Option<Body> {
        const KEYS: [Key; 5] = Key::all([
            "index",
            "utilization_percent",
            "memory_used_bytes",
            "power_watts",
            "sm_clock_mhz",
        ]);
        let (mut index, mut utilization, mut memory, mut power, mut clock) =
            (None, None, None, None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "index" => once(&mut index, s.integer()),
            "utilization_percent" => once(&mut utilization, s.optional(Self::integer)),
            "memory_used_bytes" => once(&mut memory, s.optional(Self::integer)),
            "power_watts" => once(&mut power, s.optional(Self::f64)),
            "sm_clock_mhz" => once(&mut clock, s.optional(Self::integer)),
            _ => None,
        })?;
        Some(Body::GpuDevice {
            index: index?,
            utilization_percent: utilization.flatten(),
            memory_used_bytes: memory.flatten(),
            power_watts: power.flatten(),
            sm_clock_mhz: clock.flatten(),
        })
    }

    fn gpu_pcie(&mut self) -> Option<Body> {
        const KEYS: [Key; 3] = Key::all(["index", "rx_bytes_per_s", "tx_bytes_per_s"]);
        let (mut index, mut rx, mut tx) = (None, None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "index" => once(&mut index, s.integer()),
            "rx_bytes_per_s" => once(&mut rx, s.optional(Self::integer)),
            "tx_bytes_per_s" => once(&mut tx, s.optional(Self::integer)),
            _ => None,
        })?;
        Some(Body::GpuPcie {
            index: index?,
            rx_bytes_per_s: rx.flatten(),
            tx_bytes_per_s: tx.flatten(),
        })
    }

    fn gpu_process(&mut self) -> Option<Body> {
        const KEYS: [Key; 6] = Key::all([
            "pid",
            "index",
            "memory_bytes",
            "sm_percent",
            "last_seen_us",
            "rank",
        ]);
        let (mut pid, mut index, mut memory, mut sm, mut seen, mut rank) =
            (None, None, None, None, None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "pid" => once(&mut pid, s.integer()),
            "index" => once(&mut index, s.integer()),
            "memory_bytes" => once(&mut memory, s.optional(Self::integer)),
            "sm_percent" => once(&mut sm, s.optional(Self::integer)),
            "last_seen_us" => once(&mut seen, s.optional(Self::integer)),
            "rank" => once(&mut rank, s.optional(Self::integer)),
            _ => None,
        })?;
        Some(Body::GpuProcess {
            pid: pid?,
            index: index?,
            memory_bytes: memory.flatten(),
            sm_percent: sm.flatten(),
            last_seen_us: seen.flatten(),
            rank: rank.flatten(),
        })
    }

    fn gpu_processes_unavailable(&mut self) -> Option<Body> {
        const KEYS: [Key; 1] = Key::all(["reason"]);
        let mut reason = None;
        self.body_fields(&KEYS, |s, key| match key {
            "reason" => once(&mut reason, s.string()),
            _ => None,
        })?;
        Some(Body::GpuProcessesUnavailable {
            reason: reason?.to_owned(),
        })
    }

    /// A CUPTI collector's window, most of a replay's bytes: its kernels, copies, breakdown and timeline.
    fn kernel_window(&mut self) -> Option<KernelWindow> {
        const KEYS: [Key; 11] = Key::all([
            "window_start_ns",
            "window_end_ns",
            "kernels",
            "copies",
            "breakdown",
            "dropped_records",
            "invalid_records",
            "dropped_windows",
            "monotonic_start_ns",
            "monotonic_end_ns",
            "timeline",
        ]);
        let (mut start, mut end, mut kernels, mut copies, mut breakdown) =
            (None, None, None, None, None);
        let (mut dropped_records, mut invalid_records, mut dropped_windows) = (None, None, None);
        let (mut monotonic_start, mut monotonic_end, mut timeline) = (None, None, None);
        self.body_fields(&KEYS, |s, key| match key {
            "window_start_ns" => once(&mut start, s.integer()),
            "window_end_ns" => once(&mut end, s.integer()),
            "kernels" => once(&mut kernels, s.list(0, Self::kernel)),
            "copies" => once(&mut copies, s.list(0, Self::copy)),
            "breakdown" => once(&mut breakdown, s.breakdown()),
            "dropped_records" => once(&mut dropped_records, s.integer()),
            "invalid_records" => once(&mut invalid_records, s.integer()),
            "dropped_windows" => once(&mut dropped_windows, s.integer()),
            "monotonic_start_ns" => once(&mut monotonic_start, s.optional(Self::integer)),
            "monotonic_end_ns" => once(&mut monotonic_end, s.optional(Self::integer)),
            "timeline" => once(&mut timeline, s.optional(Self::timeline)),
            _ => None,
        })?;
        Some(KernelWindow {
            window_start_ns: start?,
            window_end_ns: end?,
            kernels: kernels?,
            copies: copies?,
            breakdown: breakdown?,
            dropped_records: dropped_records?,
            invalid_records: invalid_records.unwrap_or(0),
            dropped_windows: dropped_windows.unwrap_or(0),
            monotonic_start_ns: monotonic_start.flatten(),
            monotonic_end_ns: monotonic_end.flatten(),
            timeline: timeline.flatten(),
        })
    }

    fn kernel(&mut self) -> Option<KernelStats> {
        const KEYS: [Key; 10] = Key::all([
            "name",
            "count",
            "total_ns",
            "max_ns",
            "grid",
            "block",
            "shapes",
            "registers_per_thread",
            "shared_bytes",
            "grid_histogram",
        ]);
        self.eat(b'{')?;
        let (mut name, mut count, mut total_ns, mut max_ns, mut grid) =
            (None, None, None, None, None);
        let (mut block, mut shapes, mut registers, mut shared, mut histogram) =
            (None, None, None, None, None);
        self.fields(&KEYS, |s, key| match key {
            "name" => once(&mut name, s.string()),
            "count" => once(&mut count, s.integer()),
            "total_ns" => once(&mut total_ns, s.integer()),
            "max_ns" => once(&mut max_ns, s.integer()),
            "grid" => once(&mut grid, s.dimensions()),
            "block" => once(&mut block, s.dimensions()),
            "shapes" => once(&mut shapes, s.integer()),
            "registers_per_thread" => once(&mut registers, s.integer()),
            "shared_bytes" => once(&mut shared, s.integer()),
            "grid_histogram" => once(&mut histogram, s.list(0, Self::grid_count)),
            _ => None,
        })?;
        Some(KernelStats {
            name: name?.to_owned(),
            count: count?,
            total_ns: total_ns?,
            max_ns: max_ns?,
            grid: grid?,
            block: block?,
            shapes: shapes?,
            registers_per_thread: registers?,
            shared_bytes: shared?,
            grid_histogram: histogram?,
        })
    }

    /// A launch's grid or block, `[x,y,z]`.
    fn dimensions(&mut self) -> Option<[u32; 3]> {
        self.eat(b'[')?;
        let x = self.integer()?;
        let y = self.then(Self::integer)?;
        let z = self.then(Self::integer)?;
        self.eat(b']')?;
        Some([x, y, z])
    }

    /// A grid and how many launches had it, `[[x,y,z],count]`.
    fn grid_count(&mut self) -> Option<([u32; 3], u64)> {
        self.eat(b'[')?;
        let grid = self.dimensions()?;
        let count = self.then(Self::integer)?;
        self.eat(b']')?;
        Some((grid, count))
    }

    fn copy(&mut self) -> Option<CopyStats> {
        const KEYS: [Key; 5] = Key::all(["kind", "src", "count", "bytes", "total_ns"]);
        self.eat(b'{')?;
        let (mut kind, mut src, mut count, mut bytes, mut total_ns) =
            (None, None, None, None, None);
        self.fields(&KEYS, |s, key| match key {
            "kind" => once(&mut kind, s.copy_kind()),
            "src" => once(&mut src, s.memory_kind()),
            "count" => once(&mut count, s.integer()),
            "bytes" => once(&mut bytes, s.integer()),
            "total_ns" => once(&mut total_ns, s.integer()),
            _ => None,
        })?;
        Some(CopyStats {
            kind: kind?,
            src: src?,
            count: count?,
            bytes: bytes?,
            total_ns: total_ns?,
        })
    }

    fn copy_kind(&mut self) -> Option<CopyKind> {
        match self.string()? {
            "host_to_device" => Some(CopyKind::HostToDevice),
            "device_to_host" => Some(CopyKind::DeviceToHost),
            "device_to_device" => Some(CopyKind::DeviceToDevice),
            "memset" => Some(CopyKind::Memset),
            "other" => Some(CopyKind::Other),
            _ => None,
        }
    }

    fn memory_kind(&mut self) -> Option<MemoryKind> {
        match self.string()? {
            "pageable" => Some(MemoryKind::Pageable),
            "pinned" => Some(MemoryKind::Pinned),
            "device" => Some(MemoryKind::Device),
            "other" => Some(MemoryKind::Other),
            _ => None,
        }
    }

    fn breakdown(&mut self) -> Option<Breakdown> {
        const KEYS: [Key; 3] = Key::all(["busy", "copy", "idle"]);
        self.eat(b'{')?;
        let (mut busy, mut copy, mut idle) = (None, None, None);
        self.fields(&KEYS, |s, key| match key {
            "busy" => once(&mut busy, s.f64()),
            "copy" => once(&mut copy, s.f64()),
            "idle" => once(&mut idle, s.f64()),
            _ => None,
        })?;
        Some(Breakdown {
            busy: busy?,
            copy: copy?,
            idle: idle?,
        })
    }

    fn timeline(&mut self) -> Option<Timeline> {
        const KEYS: [Key; 3] = Key::all(["kernels", "copies", "merged"]);
        self.eat(b'{')?;
        let (mut kernels, mut copies, mut merged) = (None, None, None);
        self.fields(&KEYS, |s, key| match key {
            "kernels" => once(&mut kernels, s.list(0, Self::run)),
            "copies" => once(&mut copies, s.list(0, Self::copy_runs)),
            "merged" => once(&mut merged, s.integer()),
            _ => None,
        })?;
        Some(Timeline {
            kernels: kernels?,
            copies: copies?,
            merged: merged.unwrap_or(0),
        })
    }

    fn copy_runs(&mut self) -> Option<CopyRuns> {
        const KEYS: [Key; 3] = Key::all(["kind", "src", "runs"]);
        self.eat(b'{')?;
        let (mut kind, mut src, mut runs) = (None, None, None);
        self.fields(&KEYS, |s, key| match key {
            "kind" => once(&mut kind, s.copy_kind()),
            "src" => once(&mut src, s.memory_kind()),
            "runs" => once(&mut runs, s.list(0, Self::run)),
            _ => None,
        })?;
        Some(CopyRuns {
            kind: kind?,
            src: src?,
            runs: runs?,
        })
    }

    /// A run of records as the collector sends it, `[start,end,count,amount]`.
    fn run(&mut self) -> Option<Run> {
        self.eat(b'[')?;
        let start = self.signed()?;
        let end = self.then(Self::signed)?;
        let count = self.then(Self::integer)?;
        let amount = self.then(Self::integer)?;
        self.eat(b']')?;
        Some(Run {
            start,
            end,
            count,
            amount,
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
            // Golow's workers name up to this many, and most windows have as many: one allocation, not five.
            "operators" => once(
                &mut operators,
                s.list(crate::event::MAX_OPERATORS, Self::operator),
            ),
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
    use crate::samples::{Damage, every_body, kernel, kernel_window};
    use serde::Serialize;
    use serde::de::DeserializeOwned;

    const SCANNED: [&str; 10] = [
        "process",
        "step",
        "turn_end",
        "machine_load",
        "operators",
        "gpu_device",
        "gpu_pcie",
        "gpu_process",
        "gpu_processes_unavailable",
        "kernels",
    ];

    thread_local! {
        /// Keys `Scan::key` read as any string: not the next of the keys it was told golow writes.
        pub(super) static KEYS_NOT_FORESEEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// The GPU's kinds in the shapes their samples leave out: every optional field absent and present, lists empty
    /// and as long as the collector sends, each copy's direction and memory, runs before their window, numbers at
    /// the ends of their types and floats that need the full parser.
    fn gpu_shapes() -> Vec<Body> {
        let long = KernelWindow {
            kernels: (0..64u32)
                .map(|i| KernelStats {
                    grid: [u32::MAX, i, 1],
                    registers_per_thread: u16::MAX,
                    grid_histogram: (0..16).map(|g| ([g + 1, i, 1], u64::from(g))).collect(),
                    ..kernel(
                        &format!("sm90_xmma_gemm_{i}_tilesize64x128x32…"),
                        1,
                        u64::MAX,
                    )
                })
                .collect(),
            copies: [
                CopyKind::HostToDevice,
                CopyKind::DeviceToHost,
                CopyKind::DeviceToDevice,
                CopyKind::Memset,
                CopyKind::Other,
            ]
            .into_iter()
            .flat_map(|kind| {
                [
                    MemoryKind::Pageable,
                    MemoryKind::Pinned,
                    MemoryKind::Device,
                    MemoryKind::Other,
                ]
                .map(|src| CopyStats {
                    kind,
                    src,
                    count: 1,
                    bytes: u64::MAX,
                    total_ns: 0,
                })
            })
            .collect(),
            breakdown: Breakdown {
                busy: 0.1 + 0.2,
                copy: 1.0 / 3.0,
                idle: 1e-300,
            },
            monotonic_end_ns: None,
            timeline: Some(Timeline {
                kernels: (0..200)
                    .map(|i| Run::from((i64::MIN + i, i64::MAX - i, i as u64, u64::MAX)))
                    .collect(),
                copies: vec![CopyRuns {
                    kind: CopyKind::Memset,
                    src: MemoryKind::Device,
                    runs: (-100..100).map(|i| Run::from((i, i + 1, 1, 0))).collect(),
                }],
                merged: u64::MAX,
            }),
            ..kernel_window(Vec::new())
        };
        let bare = KernelWindow {
            copies: Vec::new(),
            dropped_records: u64::MAX,
            invalid_records: 0,
            dropped_windows: 0,
            monotonic_start_ns: None,
            monotonic_end_ns: None,
            timeline: None,
            ..kernel_window(Vec::new())
        };
        let empty_timeline = KernelWindow {
            timeline: Some(Timeline::default()),
            ..kernel_window(vec![kernel("(other kernels)", 0, 0)])
        };
        vec![
            Body::Kernels(Box::new(long)),
            Body::Kernels(Box::new(bare)),
            Body::Kernels(Box::new(empty_timeline)),
            Body::GpuDevice {
                index: u32::MAX,
                utilization_percent: None,
                memory_used_bytes: None,
                power_watts: None,
                sm_clock_mhz: None,
            },
            Body::GpuDevice {
                index: 1,
                utilization_percent: Some(0),
                memory_used_bytes: Some(u64::MAX),
                power_watts: Some(0.1 + 0.2),
                sm_clock_mhz: Some(1980),
            },
            Body::GpuPcie {
                index: 0,
                rx_bytes_per_s: None,
                tx_bytes_per_s: None,
            },
            Body::GpuPcie {
                index: 7,
                rx_bytes_per_s: Some(0),
                tx_bytes_per_s: Some(u64::MAX),
            },
            Body::GpuProcess {
                pid: 1,
                index: 0,
                memory_bytes: None,
                sm_percent: None,
                last_seen_us: None,
                rank: None,
            },
            Body::GpuProcess {
                pid: u32::MAX,
                index: 3,
                memory_bytes: Some(0),
                sm_percent: Some(100),
                last_seen_us: Some(u64::MAX),
                rank: Some(u32::MAX),
            },
            Body::GpuProcessesUnavailable {
                reason: String::new(),
            },
            Body::GpuProcessesUnavailable {
                reason: "NVML’s process IDs are the host’s (PID namespace)".into(),
            },
        ]
    }

    /// Golow's own records of the scanned kinds, one line per sample.
    fn record_lines() -> Vec<Vec<u8>> {
        every_body()
            .into_iter()
            .chain(gpu_shapes())
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

    /// Whether the scan answers for `line`, having checked that where it does, serde reads the same.
    fn scanned_as_serde_reads(line: &str) -> bool {
        let Some(scanned) = scan_record(line.as_bytes()) else {
            return false;
        };
        let by_serde: Record =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("serde refuses {line}: {e}"));
        assert_eq!(text(&scanned), text(&by_serde), "{line}");
        true
    }

    /// A number at either end of its field's type, or written as serde reads it otherwise (`-0` as a float), is read
    /// as serde reads it or left to serde: a sample window's line with one of its numbers replaced.
    #[test]
    fn numbers_at_the_ends_of_their_types_read_as_serde_reads_them() {
        let window = kernel_window(vec![kernel("k", 1, 2)]);
        let sample = text(&Record::new(1.0, None, Body::Kernels(Box::new(window))));
        assert!(scanned_as_serde_reads(&sample), "{sample}");
        let cases = [
            // A run's start (and end) is an i64.
            (r#""kernels":[["#, "-9223372036854775808", true),
            (r#""kernels":[["#, "9223372036854775807", true),
            (r#""kernels":[["#, "-9223372036854775809", false),
            (r#""kernels":[["#, "9223372036854775808", false),
            (r#""kernels":[["#, "-0", false),
            (r#""kernels":[["#, "0", true),
            (r#""kernels":[["#, "-01", false),
            (r#""kernels":[["#, "- 1", false),
            (r#""kernels":[["#, "-1.0", false),
            (r#""kernels":[["#, "-1e0", false),
            // A launch's registers are a u16, its grid u32s, its times u64s.
            (r#""registers_per_thread":"#, "65535", true),
            (r#""registers_per_thread":"#, "65536", false),
            (r#""grid":["#, "4294967295", true),
            (r#""grid":["#, "4294967296", false),
            (r#""total_ns":"#, "18446744073709551615", true),
            (r#""total_ns":"#, "18446744073709551616", false),
            (r#""total_ns":"#, "-1", false),
            // Shares read whole, by the fast path or the full parser.
            (r#""busy":"#, "1", true),
            (r#""busy":"#, "-0", true),
            (r#""busy":"#, "2.5e-3", true),
            (r#""busy":"#, "0.30000000000000004", true),
            (r#""busy":"#, "1e400", false),
        ];
        for (after, number, answered) in cases {
            let at = sample.find(after).unwrap_or_else(|| panic!("{after}")) + after.len();
            let old_length = sample[at..].find([',', ']', '}']).unwrap();
            let mut line = sample.clone();
            line.replace_range(at..at + old_length, number);
            assert_eq!(scanned_as_serde_reads(&line), answered, "{line}");
        }
    }

    /// The shape of the GPU's reading `kind` with every field present.
    fn every_field(kind: &str) -> Body {
        gpu_shapes()
            .into_iter()
            .find(|body| {
                let line = text(body);
                line.contains(&format!(r#""type":"{kind}""#)) && !line.contains("null")
            })
            .unwrap()
    }

    /// `line` without its field `key` (one written after another), whatever its value.
    fn without(line: &str, key: &str) -> String {
        let from = line
            .find(&format!(r#","{key}":"#))
            .unwrap_or_else(|| panic!("{key}"));
        let value = from + key.len() + 4;
        let mut depth = 0;
        let length = line[value..]
            .find(|c| {
                match c {
                    '[' | '{' => depth += 1,
                    ']' | '}' if depth > 0 => depth -= 1,
                    ',' | ']' | '}' if depth == 0 => return true,
                    _ => {}
                }
                false
            })
            .unwrap();
        format!("{}{}", &line[..from], &line[value + length..])
    }

    /// A field serde can do without (an option, one with a default, one golow added later) may be missing from a
    /// line: it reads as serde reads it. One serde needs is left to serde, which refuses the line.
    #[test]
    fn fields_serde_can_do_without_may_be_missing() {
        let line = |body: Body| text(&Record::new(2.5, Some("cudnn".into()), body));
        let window = line(Body::Kernels(Box::new(kernel_window(vec![kernel(
            "k", 1, 2,
        )]))));
        let optional: [(String, &[&str]); 4] = [
            (
                line(every_field("gpu_device")),
                &[
                    "utilization_percent",
                    "memory_used_bytes",
                    "power_watts",
                    "sm_clock_mhz",
                ],
            ),
            (
                line(every_field("gpu_pcie")),
                &["rx_bytes_per_s", "tx_bytes_per_s"],
            ),
            (
                line(every_field("gpu_process")),
                &["memory_bytes", "sm_percent", "last_seen_us", "rank"],
            ),
            (
                window.clone(),
                &[
                    "merged",
                    "timeline",
                    "monotonic_end_ns",
                    "monotonic_start_ns",
                    "dropped_windows",
                    "invalid_records",
                ],
            ),
        ];
        for (full, keys) in optional {
            let mut all_missing = full.clone();
            for key in keys {
                let one_missing = without(&full, key);
                assert!(scanned_as_serde_reads(&one_missing), "{one_missing}");
                all_missing = without(&all_missing, key);
            }
            assert!(scanned_as_serde_reads(&all_missing), "{all_missing}");
        }
        for (full, key) in [
            (line(every_field("gpu_device")), "index"),
            (line(every_field("gpu_process")), "pid"),
            (window.clone(), "dropped_records"),
            (window.clone(), "idle"),
            (window.clone(), "grid_histogram"),
            (window.clone(), "total_ns"),
            (window, "runs"),
        ] {
            let missing = without(&full, key);
            assert!(scan_record(missing.as_bytes()).is_none(), "{missing}");
            assert!(
                serde_json::from_str::<Record>(&missing).is_err(),
                "{missing}"
            );
        }
    }

    /// A string with an escape, a key written with one, is serde's to read: the scan leaves the line, and the
    /// record read is serde's.
    #[test]
    fn lines_with_escapes_are_left_to_serde() {
        let window_of =
            |name: &str| Body::Kernels(Box::new(kernel_window(vec![kernel(name, 1, 10)])));
        let mut lines: Vec<String> = [
            window_of("void at::native::\"anonymous\""),
            window_of("C:\\kernels\\gemm"),
            window_of("two\nlines"),
            window_of("a bell \u{7}"),
            Body::GpuProcessesUnavailable {
                reason: "NVML says \"Not Supported\"".into(),
            },
        ]
        .into_iter()
        .map(|body| text(&Record::new(1.0, None, body)))
        .collect();
        let gpu = every_field("gpu_device");
        lines.push(text(&Record::new(1.0, Some("py\ttorch".into()), gpu)));
        lines.push(
            r#"{"v":1,"t_ms":1.0,"type":"gpu_pcie","ind\u0065x":0,"rx_bytes_per_s":null}"#.into(),
        );
        lines.push(
            text(&Record::new(1.0, None, window_of("k")))
                .replace("\"pageable\"", "\"p\\u0061geable\""),
        );
        for line in &lines {
            assert!(line.contains('\\'), "{line}");
            assert!(scan_record(line.as_bytes()).is_none(), "{line}");
            let by_serde: Record = serde_json::from_str(line).unwrap();
            assert_eq!(
                text(&crate::event::parse_record(line.as_bytes()).unwrap()),
                text(&by_serde)
            );
        }
    }

    #[test]
    fn the_scan_reads_worker_lines_only_as_serde_does() {
        answers_only_as_serde::<WorkerEvent>(&worker_lines(), scan_worker_line);
    }
}
