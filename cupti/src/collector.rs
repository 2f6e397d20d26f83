//! The collector's life inside a worker process. CUPTI fills buffers the collector lends it from a pool allocated
//! ahead (`pool`): the thread that launches a kernel only takes one, and when none is left CUPTI drops records and
//! counts them. A thread of the collector's own asks CUPTI once a window for the buffers whose records are complete,
//! reads them into the [`Aggregator`], gives them back to the pool (sized from the bytes of records a window brought)
//! and sends each window to the monitor once the window after it has passed, so that records CUPTI hands back late
//! still land in their window. With `GOLOW_CUPTI_EVERY=N` it traces one window in N (`sampling`). At exit, or when
//! SIGTERM ends the process, the rest is forced out and sent. Nothing here can stop or slow the process beyond
//! CUPTI's own cost: every failure ends in a status message and the collector going quiet.

use std::ffi::{c_int, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::aggregate::Aggregator;
use crate::api::{
    Api, FLUSH_COMPLETED, FLUSH_FORCED, Failure, KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET,
};
use crate::pool::{Filled, Pool};
use crate::records::fold;
use crate::sampling::{Duty, Phase, Sampler};
use golow_protocol::collector::{CollectorStatus, KernelWindow, Message};

/// Small buffers: CUPTI hands back only buffers whose records are all complete, and a large one being filled while
/// kernels run would hold its records back. A kernel record is 216 bytes (`CUpti_ActivityKernel10`), so one holds
/// about 1,200 launches: libtorch's training step (1,340 launches) fills about one.
const BUFFER_BYTES: usize = 256 << 10;
/// The pool's bound, 16 MiB: a window of libtorch's training at 40 steps a second (53,600 launches, 11.6 MB of
/// records) needs 45 buffers.
const MAX_BUFFERS: usize = 64;
/// What the pool starts with, before a window has measured the rate: 4 MiB.
const INITIAL_BUFFERS: usize = 16;
const MIN_BUFFERS: usize = 8;
/// Beyond a window's worth: the buffers being filled when the flush comes, and room for a rising rate.
const SPARE_BUFFERS: usize = 4;
/// A lender leaving this few ready wakes the collector's thread to add buffers, or at the bound to take back the
/// completed ones: a million bytes of records, some 90 ms of libtorch's launches.
const LOW_WATER: usize = 4;
/// Kernel names per window before the rest fold into one entry; keeps a window's message well under the cap.
pub const MAX_KERNEL_NAMES: usize = 128;
const DEFAULT_WINDOW_MS: u64 = 1000;

static COLLECTOR: OnceLock<Collector> = OnceLock::new();
/// The eventfd SIGTERM's handler writes to, waking the collector's thread to send what it has before the end.
static TERMINATED: AtomicI32 = AtomicI32::new(-1);

struct Collector {
    api: Api,
    monitor: Monitor,
    window_ns: u64,
    pool: Pool,
    /// The eventfd a lender finding the pool low wakes the collector's thread through.
    pool_low: Option<RawFd>,
    /// Records CUPTI dropped, as its completion callbacks said, until the collector's thread counts them in a window.
    dropped_records: AtomicU64,
    /// Held from a flush to the last send, so that the exit's windows never overtake, or lose, the thread's.
    work: Mutex<Work>,
    /// Windows the socket refused since the last one it took.
    dropped_windows: AtomicU64,
    finished: AtomicBool,
    /// A forked child inherits the collector's memory but not its thread or CUPTI; it must stay silent.
    pid: u32,
}

/// What the collector's thread reads records into and decides windows with.
struct Work {
    aggregator: Aggregator,
    /// The buffers a flush brought, kept at the pool's capacity so that the pool's queue never grows.
    filled: Vec<Filled>,
    /// Bytes of records read since the last window was cut: the rate the pool is sized from.
    bytes_since_cut: usize,
    /// One window in N traced; `None` traces every window.
    sampler: Option<Sampler>,
    /// Where the traced window closed, on CUPTI's clock, until it is sent.
    closed_at_ns: u64,
}

/// Buffers for a window's records (one flush a window hands them back), with spares, within the pool's bounds.
fn buffers_for(bytes_per_window: usize) -> usize {
    (bytes_per_window.div_ceil(BUFFER_BYTES) + SPARE_BUFFERS).clamp(MIN_BUFFERS, MAX_BUFFERS)
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

    fn status(self, active: bool, detail: String, kernels_every: u32) {
        self.send(&Message::Collector(CollectorStatus {
            active,
            detail,
            kernels_every,
        }));
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
    let every = var(golow_protocol::collector::EVERY_ENV)
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(1)
        .clamp(1, golow_protocol::collector::MAX_EVERY);
    match begin(monitor, window_ms, every) {
        Ok(detail) => monitor.status(true, detail, every),
        Err(reason) => monitor.status(false, reason, every),
    }
}

fn begin(monitor: Monitor, window_ms: u64, every: u32) -> Result<String, Failure> {
    let api = Api::load()?;
    let version = api.version()?;
    let window_ns = window_ms * 1_000_000;
    let pool = Pool::new(BUFFER_BYTES, MAX_BUFFERS);
    pool.resize(INITIAL_BUFFERS);
    let collector = Collector {
        api,
        monitor,
        window_ns,
        pool_low: eventfd(),
        dropped_records: AtomicU64::new(0),
        work: Mutex::new(Work {
            aggregator: Aggregator::new(window_ns, MAX_KERNEL_NAMES),
            filled: Vec::with_capacity(pool.max_buffers()),
            bytes_since_cut: 0,
            sampler: (every > 1).then(|| Sampler::new(u64::from(every))),
            closed_at_ns: 0,
        }),
        pool,
        dropped_windows: AtomicU64::new(0),
        finished: AtomicBool::new(false),
        pid: std::process::id(),
    };
    // The callbacks find the collector here, so it must be in place before CUPTI can call them.
    let c = COLLECTOR.get_or_init(|| collector);
    c.api
        .register_callbacks(buffer_requested, buffer_completed)?;
    c.trace(true)?;
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
    let sampled = if every > 1 {
        format!(", one in {every} traced")
    } else {
        String::new()
    };
    Ok(format!(
        "CUPTI {version} ({}), {window_ms} ms windows{sampled}",
        c.api.path.display()
    ))
}

/// A non-blocking eventfd, or `None` where the kernel gives none (the collector then refills at its ticks only).
fn eventfd() -> Option<RawFd> {
    // SAFETY: creates a descriptor owned by the collector for the process's life.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    (fd >= 0).then_some(fd)
}

/// Wakes whoever polls the eventfd `fd`; never blocks (a full counter only means it is already awake).
fn wake(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: an 8-byte write to an eventfd, which is async-signal-safe.
    unsafe { libc::write(fd, (&raw const one).cast(), size_of::<u64>()) };
}

/// Empties the eventfd `fd`, so that the next wake-up is a new one.
fn drain(fd: RawFd) {
    let mut count: u64 = 0;
    // SAFETY: an 8-byte read from a non-blocking eventfd into a local.
    unsafe { libc::read(fd, (&raw mut count).cast(), size_of::<u64>()) };
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

/// What woke the collector's thread.
#[derive(Debug, PartialEq)]
enum Wake {
    Terminated,
    PoolLow,
    Tick,
}

/// Waits until `deadline` for SIGTERM's or a lender's wake-up.
fn wait(terminated: Option<RawFd>, pool_low: Option<RawFd>, deadline: Instant) -> Wake {
    let mut polls: Vec<libc::pollfd> = [terminated, pool_low]
        .into_iter()
        .flatten()
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout = deadline.saturating_duration_since(Instant::now());
    if polls.is_empty() {
        std::thread::sleep(timeout);
        return Wake::Tick;
    }
    // Rounded up, so that the tick never comes before its deadline.
    let ms = c_int::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(c_int::MAX);
    // SAFETY: poll on live descriptors, as many as the slice holds.
    let ready = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, ms) };
    let woke = |fd: Option<RawFd>| {
        ready > 0
            && polls
                .iter()
                .any(|p| Some(p.fd) == fd && p.revents & libc::POLLIN != 0)
    };
    if woke(terminated) {
        Wake::Terminated
    } else if woke(pool_low) {
        Wake::PoolLow
    } else {
        Wake::Tick
    }
}

impl Collector {
    fn run(&self, terminated: Option<RawFd>) {
        let started = Instant::now();
        let window = Duration::from_nanos(self.window_ns);
        let mut tick = 0u64;
        while !self.finished.load(Ordering::Acquire) {
            let deadline = started + window * u32::try_from(tick + 1).unwrap_or(u32::MAX);
            match wait(terminated, self.pool_low, deadline) {
                Wake::Terminated => {
                    self.finish();
                    // SAFETY: back to the default action, then the signal again: the process ends as SIGTERM meant.
                    unsafe {
                        libc::signal(libc::SIGTERM, libc::SIG_DFL);
                        libc::kill(libc::getpid(), libc::SIGTERM);
                    }
                    return;
                }
                Wake::PoolLow => self.relieve(),
                Wake::Tick => {
                    let now = (started.elapsed().as_nanos() / u128::from(self.window_ns)) as u64;
                    if now > tick && !self.finished.load(Ordering::Acquire) {
                        tick = now;
                        self.at_tick(tick);
                    }
                }
            }
        }
    }

    /// Turns CUPTI's kernel, memcpy and memset activity on or off; a failure to turn it on turns it all off.
    fn trace(&self, on: bool) -> Result<(), Failure> {
        let kinds = [
            (KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"),
            (KIND_MEMCPY, "MEMCPY"),
            (KIND_MEMSET, "MEMSET"),
        ];
        for (kind, name) in kinds {
            if !on {
                self.api.disable(kind);
            } else if let Err(e) = self.api.enable(kind, name) {
                self.stop();
                return Err(e);
            }
        }
        Ok(())
    }

    /// A window's tick: take what CUPTI completed and send the windows due, or, sampling, what the schedule says.
    fn at_tick(&self, tick: u64) {
        let mut work = lock(&self.work);
        let Some(sampler) = work.sampler.as_mut() else {
            self.collect(&mut work, FLUSH_COMPLETED);
            self.send_due(&mut work, false);
            return;
        };
        for duty in sampler.at(tick) {
            match duty {
                Duty::Open => {
                    // A traced window opens at its first activity, not at a time when launches made before tracing
                    // resumed, and not recorded, still kept the GPU busy.
                    work.aggregator = Aggregator::new(self.window_ns, MAX_KERNEL_NAMES);
                    if self.trace(true).is_err() {
                        return;
                    }
                }
                Duty::Close => {
                    let _ = self.trace(false);
                    work.closed_at_ns = self.api.now_ns().unwrap_or(0);
                }
                Duty::Send => {
                    self.collect(&mut work, FLUSH_FORCED);
                    let end = work.closed_at_ns;
                    self.send_traced(&mut work, end);
                }
            }
        }
    }

    /// A lender found the pool low: more buffers, or at the pool's bound, the completed ones back before the tick.
    fn relieve(&self) {
        if let Some(fd) = self.pool_low {
            drain(fd);
        }
        let mut work = lock(&self.work);
        let allocated = self.pool.allocated();
        if allocated < self.pool.max_buffers() {
            self.pool.resize(allocated * 2);
        } else {
            self.collect(&mut work, FLUSH_COMPLETED);
            self.pool.refilled();
        }
    }

    /// Sends everything still held, once, whichever of exit and SIGTERM comes first.
    fn finish(&self) {
        if self.pid != std::process::id() || self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut work = lock(&self.work);
        self.collect(&mut work, FLUSH_FORCED);
        match work.sampler.as_ref().map(Sampler::phase) {
            None => self.send_due(&mut work, true),
            Some(Phase::Tracing { .. }) => {
                if let Some(now) = self.api.now_ns() {
                    self.send_traced(&mut work, now);
                }
            }
            Some(Phase::Closed { .. }) => {
                let end = work.closed_at_ns;
                self.send_traced(&mut work, end);
            }
            Some(Phase::Resting { .. }) => {}
        }
    }

    /// Asks CUPTI for its buffers (`flag`: the completed ones, or all at the end), reads their records and gives
    /// them back to the pool.
    fn collect(&self, work: &mut Work, flag: u32) {
        // A failed flush still leaves whatever the completed buffers brought.
        let _ = self.api.flush(flag);
        let Work {
            aggregator,
            filled,
            bytes_since_cut,
            ..
        } = work;
        self.pool.take_filled(filled);
        for f in filled.drain(..) {
            // SAFETY: CUPTI completed this buffer with `valid` bytes of records and let go of it.
            unsafe { fold(&self.api, aggregator, f.buffer, f.valid) };
            *bytes_since_cut += f.valid;
            self.pool.give_back(f.buffer);
        }
        aggregator.dropped(self.dropped_records.swap(0, Ordering::AcqRel));
    }

    /// Sends every window whose successor has passed; at the end (`last`), the open window up to now as well.
    fn send_due(&self, work: &mut Work, last: bool) {
        let Some((now, monotonic_now)) = self.clocks() else {
            return;
        };
        let late_by = if last { 0 } else { self.window_ns };
        let aggregator = &mut work.aggregator;
        let due = |a: &Aggregator| {
            a.next_cut()
                .filter(|&cut| cut.saturating_add(late_by) <= now)
        };
        let mut windows = Vec::new();
        if let Some(cut) = due(aggregator) {
            windows.push(aggregator.cut(cut));
        }
        // Far behind (the process was stopped, say): one window up to a window ago, not a backlog; at the end,
        // the open window up to now.
        if due(aggregator).is_some() || (last && aggregator.next_cut().is_some()) {
            windows.push(aggregator.cut(now - late_by));
        }
        if !windows.is_empty() {
            self.size_pool(std::mem::take(&mut work.bytes_since_cut));
        }
        for window in windows {
            self.send(window, now, monotonic_now);
        }
    }

    /// Sends the traced window, cut at `end`, if anything ran in it.
    fn send_traced(&self, work: &mut Work, end: u64) {
        let Some((now, monotonic_now)) = self.clocks() else {
            return;
        };
        if work.aggregator.next_cut().is_none() {
            return;
        }
        let window = work.aggregator.cut(end);
        self.size_pool(std::mem::take(&mut work.bytes_since_cut));
        self.send(window, now, monotonic_now);
    }

    /// CUPTI's clock and the host's monotonic one, read together.
    fn clocks(&self) -> Option<(u64, u64)> {
        Some((
            self.api.now_ns()?,
            golow_protocol::collector::monotonic_now_ns()?,
        ))
    }

    /// Fits the pool to the bytes of records a window brought, growing at once and shrinking only well past it.
    fn size_pool(&self, bytes_per_window: usize) {
        let wanted = buffers_for(bytes_per_window);
        let allocated = self.pool.allocated();
        if allocated < wanted || allocated > 2 * wanted {
            self.pool.resize(wanted);
        }
    }

    fn send(&self, mut window: KernelWindow, now: u64, monotonic_now: u64) {
        place(&mut window, now, monotonic_now);
        let dropped_before = self.dropped_windows.swap(0, Ordering::AcqRel);
        window.dropped_windows = dropped_before;
        match self.monitor.send(&Message::Kernels(window)) {
            Sent::Delivered => {}
            Sent::Refused => {
                self.dropped_windows
                    .fetch_add(dropped_before.saturating_add(1), Ordering::AcqRel);
            }
            Sent::Gone => self.stop(),
        }
    }

    /// The monitor is gone or the collector failed: stop costing the process anything.
    fn stop(&self) {
        self.finished.store(true, Ordering::Release);
        let _ = self.trace(false);
    }

    /// A buffer for CUPTI, on the launching thread: taken from the pool, never allocated here.
    fn lend(&self) -> Option<*mut u8> {
        if self.finished.load(Ordering::Acquire) {
            return None;
        }
        self.pool.take(LOW_WATER, || {
            if let Some(fd) = self.pool_low {
                wake(fd);
            }
        })
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

/// CUPTI hands a buffer back, on its own thread or inside the collector's flush: queued for the collector's thread
/// to read, so that CUPTI's thread is never held up by the reading.
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
        // SAFETY: the context and stream CUPTI passed this callback.
        let dropped = unsafe { c.api.dropped(context, stream) };
        c.dropped_records.fetch_add(dropped, Ordering::AcqRel);
        c.pool.complete(Filled { buffer, valid });
    });
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
            kernels_every: 1,
        });
        assert_eq!(monitor.send(&status), Sent::Delivered);
        let huge = Message::Collector(CollectorStatus {
            active: true,
            detail: "x".repeat(golow_protocol::collector::MAX_MESSAGE_BYTES),
            kernels_every: 1,
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
    fn the_pool_holds_a_window_of_records_and_spares_within_its_bounds() {
        let libtorch = 40 * 1_340 * 216;
        assert_eq!(buffers_for(libtorch), 45 + SPARE_BUFFERS);
        assert_eq!(buffers_for(0), MIN_BUFFERS);
        assert_eq!(buffers_for(usize::MAX / 2), MAX_BUFFERS);
    }

    #[test]
    fn a_lender_s_wake_up_comes_before_the_tick_and_the_tick_not_before_its_deadline() {
        let low = eventfd().expect("an eventfd");
        let far = Instant::now() + Duration::from_secs(60);
        wake(low);
        assert_eq!(wait(None, Some(low), far), Wake::PoolLow);
        drain(low);
        let deadline = Instant::now() + Duration::from_millis(30);
        assert_eq!(wait(None, Some(low), deadline), Wake::Tick);
        assert!(Instant::now() >= deadline);
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
