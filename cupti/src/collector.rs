//! The collector's life inside a worker process. CUPTI fills buffers the collector lends it (a bounded number:
//! when all are out, CUPTI drops records and counts them); a thread of the collector's own flushes them once per
//! window, folds the records into the [`Aggregator`] and sends the window to the monitor; at exit the last,
//! partial window is sent too. Nothing here can stop or slow the process beyond CUPTI's own cost: every failure
//! ends in a status message and the collector going quiet.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::aggregate::Aggregator;
use crate::api::{Api, Failure, KIND_CONCURRENT_KERNEL, KIND_MEMCPY};
use crate::records::{Activity, decode};
use golow_protocol::collector::{CollectorStatus, KernelWindow, Message};

const BUFFER_BYTES: usize = 4 << 20;
const MAX_BUFFERS: usize = 8;
/// Kernel names per window before the rest fold into one entry; keeps a window's message well under the cap.
const MAX_KERNEL_NAMES: usize = 128;
const DEFAULT_WINDOW_MS: u64 = 1000;

static COLLECTOR: OnceLock<Collector> = OnceLock::new();

struct Collector {
    api: Api,
    monitor: Monitor,
    window_ns: u64,
    aggregator: Mutex<Aggregator>,
    lent: AtomicUsize,
    spare: Mutex<Vec<Box<[u64]>>>,
    finished: AtomicBool,
    /// A forked child inherits the collector's memory but not its thread or CUPTI; it must stay silent.
    pid: u32,
}

/// The socket to the monitor.
#[derive(Clone, Copy)]
struct Monitor(i32);

impl Monitor {
    /// Sends one message; false when the monitor is gone (or the descriptor was never a socket to it).
    fn send(self, message: &Message) -> bool {
        let Some(bytes) = encode(message) else {
            return true;
        };
        loop {
            // SAFETY: send(2) from a live buffer; MSG_NOSIGNAL keeps a closed socket from raising SIGPIPE.
            let sent = unsafe {
                libc::send(
                    self.0,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if sent >= 0 {
                return true;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EMSGSIZE | libc::ENOBUFS) => return true,
                _ => return false,
            }
        }
    }

    fn status(self, active: bool, detail: String) {
        self.send(&Message::Collector(CollectorStatus { active, detail }));
    }
}

/// A message as one datagram, its kernel list cut (least time first) until it fits the monitor's buffer.
fn encode(message: &Message) -> Option<Vec<u8>> {
    let mut bytes = serde_json::to_vec(message).ok()?;
    if let Message::Kernels(window) = message {
        let mut window: KernelWindow = window.clone();
        while bytes.len() > golow_protocol::collector::MAX_MESSAGE_BYTES
            && !window.kernels.is_empty()
        {
            window.kernels.truncate(window.kernels.len() / 2);
            bytes = serde_json::to_vec(&Message::Kernels(window.clone())).ok()?;
        }
    }
    (bytes.len() <= golow_protocol::collector::MAX_MESSAGE_BYTES).then_some(bytes)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What `InitializeInjection` does: nothing without `GOLOW_CUPTI_FD`, otherwise start collecting or say why not.
pub fn start() {
    let Some(fd) = std::env::var(golow_protocol::collector::FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|&fd| fd >= 0)
    else {
        return;
    };
    let monitor = Monitor(fd);
    if COLLECTOR.get().is_some() {
        return;
    }
    let window_ms = std::env::var(golow_protocol::collector::WINDOW_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_WINDOW_MS)
        .clamp(50, 60_000);
    match begin(monitor, window_ms) {
        Ok(detail) => monitor.status(true, detail),
        Err(reason) => monitor.status(false, reason),
    }
}

fn begin(monitor: Monitor, window_ms: u64) -> Result<String, Failure> {
    let api = Api::load()?;
    let version = api.version()?;
    let window_ns = window_ms * 1_000_000;
    let collector = Collector {
        api,
        monitor,
        window_ns,
        aggregator: Mutex::new(Aggregator::new(window_ns, MAX_KERNEL_NAMES)),
        lent: AtomicUsize::new(0),
        spare: Mutex::new(Vec::new()),
        finished: AtomicBool::new(false),
        pid: std::process::id(),
    };
    // The callbacks find the collector here, so it must be in place before CUPTI can call them.
    let c = COLLECTOR.get_or_init(|| collector);
    c.api
        .register_callbacks(buffer_requested, buffer_completed)?;
    c.api.enable(KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL")?;
    if let Err(e) = c.api.enable(KIND_MEMCPY, "MEMCPY") {
        c.api.disable(KIND_CONCURRENT_KERNEL);
        return Err(e);
    }
    std::thread::Builder::new()
        .name("golow-cupti".into())
        .spawn(|| c.run())
        .map_err(|e| {
            c.stop();
            format!("cannot start the collector's thread: {e}")
        })?;
    // SAFETY: registers a plain extern "C" function.
    unsafe { libc::atexit(at_exit) };
    Ok(format!(
        "CUPTI {version} ({}), {window_ms} ms windows",
        c.api.path.display()
    ))
}

impl Collector {
    fn run(&self) {
        while !self.finished.load(Ordering::Acquire) {
            std::thread::sleep(self.until_next_cut());
            if !self.finished.load(Ordering::Acquire) {
                self.flush_and_send(false);
            }
        }
    }

    fn until_next_cut(&self) -> Duration {
        let next = lock(&self.aggregator).next_cut();
        let wait_ns = match (next, self.api.now_ns()) {
            (Some(cut), Some(now)) => cut.saturating_sub(now),
            _ => self.window_ns,
        };
        // A little past the cut, so that kernels ending just before it are in the flushed buffers.
        Duration::from_nanos(wait_ns.clamp(10_000_000, self.window_ns) + 5_000_000)
    }

    /// Flushes CUPTI's buffers and sends every window that has ended; at exit the open one too.
    fn flush_and_send(&self, last: bool) {
        // A failed flush still leaves whatever the completed buffers brought.
        let _ = self.api.flush();
        let Some(now) = self.api.now_ns() else {
            return;
        };
        let windows = {
            let mut aggregator = lock(&self.aggregator);
            let mut windows = Vec::new();
            if let Some(cut) = aggregator.next_cut().filter(|&cut| cut <= now) {
                windows.push(aggregator.cut(cut));
            }
            // Far behind (the process was stopped, say) or at exit: one window up to now, not a backlog.
            if aggregator.next_cut().is_some_and(|cut| cut <= now || last) {
                windows.push(aggregator.cut(now));
            }
            windows
        };
        for window in windows {
            if !self.monitor.send(&Message::Kernels(window)) {
                self.stop();
                return;
            }
        }
    }

    /// The monitor is gone or the collector failed: stop costing the process anything.
    fn stop(&self) {
        self.finished.store(true, Ordering::Release);
        self.api.disable(KIND_CONCURRENT_KERNEL);
        self.api.disable(KIND_MEMCPY);
    }

    fn lend(&self) -> Option<*mut u8> {
        if self.finished.load(Ordering::Acquire) {
            return None;
        }
        if self.lent.fetch_add(1, Ordering::AcqRel) >= MAX_BUFFERS {
            self.lent.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let buffer = lock(&self.spare)
            .pop()
            .unwrap_or_else(|| vec![0u64; BUFFER_BYTES / 8].into_boxed_slice());
        Some(Box::into_raw(buffer).cast())
    }

    /// # Safety
    /// `buffer` must be one [`Collector::lend`] returned, handed back once.
    unsafe fn take_back(&self, buffer: *mut u8) {
        // SAFETY: rebuilds the Box that `lend` leaked, with its original length.
        let buffer = unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                buffer.cast::<u64>(),
                BUFFER_BYTES / 8,
            ))
        };
        let mut spare = lock(&self.spare);
        if spare.len() < MAX_BUFFERS {
            spare.push(buffer);
        }
        self.lent.fetch_sub(1, Ordering::AcqRel);
    }
}

unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let lent = std::panic::catch_unwind(|| COLLECTOR.get().and_then(Collector::lend))
        .ok()
        .flatten();
    // SAFETY: CUPTI passes three valid out-pointers. A null buffer makes CUPTI drop and count records.
    unsafe {
        *buffer = lent.unwrap_or(std::ptr::null_mut());
        *size = if lent.is_some() { BUFFER_BYTES } else { 0 };
        *max_records = 0;
    }
}

unsafe extern "C" fn buffer_completed(
    context: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    let Some(c) = COLLECTOR.get() else {
        return;
    };
    if buffer.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        let mut aggregator = lock(&c.aggregator);
        // SAFETY: CUPTI completed this buffer with `valid` bytes of records.
        unsafe {
            c.api
                .for_each_record(buffer, valid, |record| match decode(record) {
                    Some(Activity::Kernel(k)) => aggregator.kernel(k),
                    Some(Activity::Copy(copy)) => aggregator.copy(copy),
                    None => {}
                });
        }
        aggregator.dropped(c.api.dropped(context, stream));
    });
    // SAFETY: CUPTI returns each lent buffer exactly once.
    unsafe { c.take_back(buffer) };
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(c) = COLLECTOR.get()
            && c.pid == std::process::id()
            && !c.finished.swap(true, Ordering::AcqRel)
        {
            c.flush_and_send(true);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::collector::{Breakdown, KernelStats};

    fn window_with(kernels: usize) -> KernelWindow {
        KernelWindow {
            window_start_ns: 0,
            window_end_ns: 1_000_000_000,
            kernels: (0..kernels)
                .map(|i| KernelStats {
                    name: format!("kernel_{i:0>200}"),
                    count: 1,
                    total_ns: (kernels - i) as u64,
                    max_ns: 1,
                    grid: [1, 1, 1],
                    block: [1, 1, 1],
                    shapes: 1,
                    registers_per_thread: 1,
                    shared_bytes: 0,
                    grid_histogram: vec![([1, 1, 1], 1)],
                })
                .collect(),
            copies: Vec::new(),
            breakdown: Breakdown {
                busy: 0.5,
                copy: 0.0,
                idle: 0.5,
            },
            dropped_records: 0,
        }
    }

    #[test]
    fn an_oversized_window_keeps_its_heaviest_kernels() {
        let bytes = encode(&Message::Kernels(window_with(4000))).expect("fits once cut");
        assert!(bytes.len() <= golow_protocol::collector::MAX_MESSAGE_BYTES);
        let Ok(Message::Kernels(w)) = serde_json::from_slice(&bytes) else {
            panic!("not a kernels message");
        };
        assert!(!w.kernels.is_empty() && w.kernels.len() < 4000);
        assert_eq!(w.kernels[0].name, format!("kernel_{:0>200}", 0));
    }

    #[test]
    fn a_full_window_of_names_fits_without_cutting() {
        let bytes = encode(&Message::Kernels(window_with(MAX_KERNEL_NAMES + 1))).unwrap();
        let Ok(Message::Kernels(w)) = serde_json::from_slice(&bytes) else {
            panic!("not a kernels message");
        };
        assert_eq!(w.kernels.len(), MAX_KERNEL_NAMES + 1);
    }
}
