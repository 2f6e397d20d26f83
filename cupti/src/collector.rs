//! The collector's life inside a worker process. CUPTI fills buffers the collector lends it (a bounded number:
//! when all are out, CUPTI drops records and counts them); a thread of the collector's own asks CUPTI a few times per
//! window for the buffers whose records are complete, folds them into the [`Aggregator`] and sends each window to the
//! monitor once the window after it has passed, so that records CUPTI hands back late still land in their window. At
//! exit, or when SIGTERM ends the process, the rest is forced out and sent. Nothing here can stop or slow the
//! process beyond CUPTI's own cost: every failure ends in a status message and the collector going quiet.

use std::ffi::{c_int, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::aggregate::Aggregator;
use crate::api::{
    Api, FLUSH_COMPLETED, FLUSH_FORCED, Failure, KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET,
};
use crate::records::{Activity, decode};
use golow_protocol::collector::{CollectorStatus, KernelWindow, Message};

/// Small buffers: CUPTI hands back only buffers whose records are all complete, and a large one being filled while
/// kernels run would hold its records back for seconds.
const BUFFER_BYTES: usize = 256 << 10;
const MAX_BUFFERS: usize = 64;
/// How often per window the collector asks CUPTI for completed buffers.
const FLUSHES_PER_WINDOW: u64 = 4;
/// Kernel names per window before the rest fold into one entry; keeps a window's message well under the cap.
const MAX_KERNEL_NAMES: usize = 128;
const DEFAULT_WINDOW_MS: u64 = 1000;

static COLLECTOR: OnceLock<Collector> = OnceLock::new();
/// The eventfd SIGTERM's handler writes to, waking the collector's thread to send what it has before the end.
static TERMINATED: AtomicI32 = AtomicI32::new(-1);

struct Collector {
    api: Api,
    monitor: Monitor,
    window_ns: u64,
    aggregator: Mutex<Aggregator>,
    /// Held from a flush to the last send, so that the exit's windows never overtake, or lose, the thread's.
    sending: Mutex<()>,
    /// Windows the socket refused since the last one it took.
    dropped_windows: AtomicU64,
    lent: AtomicUsize,
    spare: Mutex<Vec<Box<[u64]>>>,
    finished: AtomicBool,
    /// A forked child inherits the collector's memory but not its thread or CUPTI; it must stay silent.
    pid: u32,
}

/// What became of a message.
#[derive(Debug, PartialEq)]
enum Sent {
    Delivered,
    /// Too large or no buffer space: this message is lost, the socket still works.
    Refused,
    /// The monitor is gone (or the descriptor was never a socket to it).
    Gone,
}

/// The socket to the monitor.
#[derive(Clone, Copy)]
struct Monitor(RawFd);

impl Monitor {
    /// The socket at `fd` if it is the one the monitor made (`inode`, a message socket), made close-on-exec so that
    /// no program the worker starts inherits it.
    fn check(fd: RawFd, inode: u64) -> Option<Monitor> {
        // SAFETY: fstat and getsockopt write into the locals passed; fcntl only changes the descriptor's flags.
        unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut stat) != 0
                || stat.st_mode & libc::S_IFMT != libc::S_IFSOCK
                || stat.st_ino != inode
            {
                return None;
            }
            let mut kind: c_int = 0;
            let mut len = size_of::<c_int>() as libc::socklen_t;
            if libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&raw mut kind).cast(),
                &mut len,
            ) != 0
                || kind != libc::SOCK_SEQPACKET
            {
                return None;
            }
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) != 0 {
                return None;
            }
        }
        Some(Monitor(fd))
    }

    fn send(self, message: &Message) -> Sent {
        let Some(bytes) = encode(message) else {
            return Sent::Refused;
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
                return Sent::Delivered;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EMSGSIZE | libc::ENOBUFS) => return Sent::Refused,
                _ => return Sent::Gone,
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

/// Sets a window's bounds on the monitor's clock, given one reading of each clock taken together.
fn place(window: &mut KernelWindow, cupti_now: u64, monotonic_now: u64) {
    let shift = |t: u64| {
        u64::try_from(i128::from(t) + i128::from(monotonic_now) - i128::from(cupti_now)).ok()
    };
    window.monotonic_start_ns = shift(window.window_start_ns);
    window.monotonic_end_ns = shift(window.window_end_ns);
}

/// What `InitializeInjection` does: nothing without the monitor's socket, otherwise start collecting or say why not.
pub fn start() {
    let var = |name| std::env::var(name).ok();
    let Some(monitor) = var(golow_protocol::collector::FD_ENV)
        .and_then(|v| v.parse::<RawFd>().ok())
        .zip(var(golow_protocol::collector::INODE_ENV).and_then(|v| v.parse::<u64>().ok()))
        .and_then(|(fd, inode)| Monitor::check(fd, inode))
    else {
        return;
    };
    if COLLECTOR.get().is_some() {
        return;
    }
    let window_ms = var(golow_protocol::collector::WINDOW_ENV)
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
        sending: Mutex::new(()),
        dropped_windows: AtomicU64::new(0),
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
    for (kind, name) in [(KIND_MEMCPY, "MEMCPY"), (KIND_MEMSET, "MEMSET")] {
        if let Err(e) = c.api.enable(kind, name) {
            c.stop();
            return Err(e);
        }
    }
    let terminated = catch_sigterm();
    std::thread::Builder::new()
        .name("golow-cupti".into())
        .spawn(move || c.run(terminated))
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

/// Where nobody else handles SIGTERM, handles it so that the last window is sent before the process ends; returns
/// the descriptor the handler wakes the collector's thread through.
fn catch_sigterm() -> Option<RawFd> {
    // SAFETY: eventfd and sigaction with locals; the handler only calls async-signal-safe functions.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut current) != 0
            || current.sa_sigaction != libc::SIG_DFL
        {
            return None;
        }
        let fd = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
        if fd < 0 {
            return None;
        }
        TERMINATED.store(fd, Ordering::Release);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigterm as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut()) != 0 {
            TERMINATED.store(-1, Ordering::Release);
            libc::close(fd);
            return None;
        }
        Some(fd)
    }
}

extern "C" fn on_sigterm(_: c_int) {
    let fd = TERMINATED.load(Ordering::Acquire);
    let ours = COLLECTOR.get().is_some_and(|c| c.pid == std::process::id());
    // SAFETY: write, signal, getpid and kill are async-signal-safe.
    unsafe {
        if fd >= 0 && ours {
            let one: u64 = 1;
            libc::write(fd, (&raw const one).cast(), size_of::<u64>());
        } else {
            // A forked child ends as it would have without the collector.
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::kill(libc::getpid(), libc::SIGTERM);
        }
    }
}

/// Waits up to `timeout` for SIGTERM's wake-up; true when it came.
fn terminated_within(fd: Option<RawFd>, timeout: Duration) -> bool {
    let Some(fd) = fd else {
        std::thread::sleep(timeout);
        return false;
    };
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
    // SAFETY: poll on one live descriptor.
    unsafe { libc::poll(&mut poll, 1, ms) > 0 && poll.revents & libc::POLLIN != 0 }
}

impl Collector {
    fn run(&self, terminated: Option<RawFd>) {
        let period = Duration::from_nanos(self.window_ns / FLUSHES_PER_WINDOW);
        while !self.finished.load(Ordering::Acquire) {
            if terminated_within(terminated, period) {
                self.finish();
                // SAFETY: back to the default action, then the signal again: the process ends as SIGTERM meant.
                unsafe {
                    libc::signal(libc::SIGTERM, libc::SIG_DFL);
                    libc::kill(libc::getpid(), libc::SIGTERM);
                }
                return;
            }
            if !self.finished.load(Ordering::Acquire) {
                self.flush_and_send(false);
            }
        }
    }

    /// Sends everything still held, once, whichever of exit and SIGTERM comes first.
    fn finish(&self) {
        if self.pid == std::process::id() && !self.finished.swap(true, Ordering::AcqRel) {
            self.flush_and_send(true);
        }
    }

    /// Takes CUPTI's completed buffers and sends every window whose successor has passed; at the end, forces out
    /// every buffer and sends the rest.
    fn flush_and_send(&self, last: bool) {
        let _sending = lock(&self.sending);
        // A failed flush still leaves whatever the completed buffers brought.
        let _ = self
            .api
            .flush(if last { FLUSH_FORCED } else { FLUSH_COMPLETED });
        let (Some(now), Some(monotonic_now)) = (
            self.api.now_ns(),
            golow_protocol::collector::monotonic_now_ns(),
        ) else {
            return;
        };
        let late_by = if last { 0 } else { self.window_ns };
        let windows = {
            let mut aggregator = lock(&self.aggregator);
            let mut windows = Vec::new();
            let due = |a: &Aggregator| {
                a.next_cut()
                    .filter(|&cut| cut.saturating_add(late_by) <= now)
            };
            if let Some(cut) = due(&aggregator) {
                windows.push(aggregator.cut(cut));
            }
            // Far behind (the process was stopped, say): one window up to a window ago, not a backlog; at the end,
            // the open window up to now.
            if due(&aggregator).is_some() || (last && aggregator.next_cut().is_some()) {
                windows.push(aggregator.cut(now - late_by));
            }
            windows
        };
        for mut window in windows {
            place(&mut window, now, monotonic_now);
            let dropped_before = self.dropped_windows.swap(0, Ordering::AcqRel);
            window.dropped_windows = dropped_before;
            match self.monitor.send(&Message::Kernels(window)) {
                Sent::Delivered => {}
                Sent::Refused => {
                    self.dropped_windows
                        .fetch_add(dropped_before.saturating_add(1), Ordering::AcqRel);
                }
                Sent::Gone => {
                    self.stop();
                    return;
                }
            }
        }
    }

    /// The monitor is gone or the collector failed: stop costing the process anything.
    fn stop(&self) {
        self.finished.store(true, Ordering::Release);
        for kind in [KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET] {
            self.api.disable(kind);
        }
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
        if let Some(c) = COLLECTOR.get() {
            c.finish();
        }
    });
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
            invalid_records: 0,
            dropped_windows: 0,
            monotonic_start_ns: None,
            monotonic_end_ns: None,
            timeline: None,
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
    fn a_window_is_placed_on_the_monitor_s_clock() {
        let mut w = window_with(0);
        w.window_start_ns = 5_000;
        w.window_end_ns = 9_000;
        place(&mut w, 10_000, 1_000_000);
        assert_eq!(
            (w.monotonic_start_ns, w.monotonic_end_ns),
            (Some(995_000), Some(999_000))
        );
        place(&mut w, 10_000_000, 1_000);
        assert_eq!((w.monotonic_start_ns, w.monotonic_end_ns), (None, None));
    }

    fn socket(kind: c_int) -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two new descriptors, which the OwnedFds then own.
        unsafe {
            assert_eq!(
                libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()),
                0
            );
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        }
    }

    fn inode(fd: &OwnedFd) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::File::from(fd.try_clone().unwrap())
            .metadata()
            .unwrap()
            .ino()
    }

    #[test]
    fn only_the_monitor_s_own_socket_is_written_to() {
        let (ours, _) = socket(libc::SOCK_SEQPACKET);
        let (stream, _) = socket(libc::SOCK_STREAM);
        let (pipe, _) = std::io::pipe().unwrap();
        let pipe = OwnedFd::from(pipe);
        assert!(Monitor::check(ours.as_raw_fd(), inode(&ours) + 1).is_none());
        assert!(Monitor::check(stream.as_raw_fd(), inode(&stream)).is_none());
        assert!(Monitor::check(pipe.as_raw_fd(), inode(&pipe)).is_none());
        assert!(Monitor::check(-1, 0).is_none());
        // SAFETY: F_GETFD on a live descriptor.
        let cloexec = || unsafe { libc::fcntl(ours.as_raw_fd(), libc::F_GETFD) } & libc::FD_CLOEXEC;
        assert_eq!(cloexec(), 0);
        assert!(Monitor::check(ours.as_raw_fd(), inode(&ours)).is_some());
        assert_ne!(cloexec(), 0);
    }

    #[test]
    fn a_refused_message_is_told_from_a_gone_monitor() {
        let (ours, theirs) = socket(libc::SOCK_SEQPACKET);
        let monitor = Monitor(ours.as_raw_fd());
        let status = Message::Collector(CollectorStatus {
            active: true,
            detail: String::new(),
        });
        assert_eq!(monitor.send(&status), Sent::Delivered);
        let huge = Message::Collector(CollectorStatus {
            active: true,
            detail: "x".repeat(golow_protocol::collector::MAX_MESSAGE_BYTES),
        });
        assert_eq!(monitor.send(&huge), Sent::Refused);
        drop(theirs);
        assert_eq!(monitor.send(&status), Sent::Gone);
    }

    #[test]
    fn a_forked_child_still_ends_on_sigterm() {
        // SAFETY: the child calls only async-signal-safe functions (eventfd, sigaction, kill, pause, _exit).
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            // SAFETY: as above.
            unsafe {
                if catch_sigterm().is_none() {
                    libc::_exit(3);
                }
                libc::kill(libc::getpid(), libc::SIGTERM);
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTERM,
            "status {status:#x}"
        );
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
