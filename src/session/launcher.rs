//! Starts worker processes: events on a dedicated descriptor (3), turn grants on another (4), the CUPTI
//! collector's messages on a third (5), stdout and stderr captured separately. Everything a worker says reaches
//! the hub as `Incoming`.

use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Command;
use tokio::sync::mpsc::Sender;

use golow_protocol::admit::{Admission, Refusal};
use golow_protocol::channels::{
    COLLECTOR_FD, CONTROL_FD, CONTROL_FD_ENV, EVENT_FD, EVENT_FD_ENV, Grant,
};
use golow_protocol::event::{Body, MAX_WORKER_LINE_BYTES, Stream, parse_worker_line};
use golow_protocol::{collector, script};
use rustix::io::fcntl_dupfd_cloexec;
use rustix::process::{Pid, Signal, kill_process_group, set_parent_process_death_signal};

use super::lines::{Line, for_each_line};
use crate::telemetry::cupti;

/// Output lines longer than this are cut (a worker printing a huge line must not exhaust memory).
const MAX_OUTPUT_LINE_BYTES: usize = 64 * 1024;

/// A worker's streams (events, output, the collector's) are drained for at most this long in all after its process
/// ended (a descendant could hold them open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Something a worker process did, for the hub.
#[derive(Debug)]
pub struct Incoming {
    /// The worker it concerns; `None` for session-wide readings (a whole GPU).
    pub worker: Option<usize>,
    pub body: Body,
}

/// How to start one worker.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: std::path::PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The CUPTI collector library CUDA is to load into the worker; `None` measures no GPU activity.
    pub collector: Option<std::path::PathBuf>,
    /// Where a `--cmd` worker's processes report (see `golow_protocol::script`); a built-in worker writes its events
    /// on descriptor 3 instead.
    pub event_socket: Option<std::path::PathBuf>,
}

impl WorkerCommand {
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// A started worker, as the hub holds it.
pub struct Launched {
    pub pid: u32,
    control: Option<pipe::Sender>,
    stop_requested: Arc<AtomicBool>,
    /// When the worker was asked to stop, while it has not been killed.
    stopping_since: Option<Instant>,
}

impl super::worker::Worker for Launched {
    fn pid(&self) -> u32 {
        self.pid
    }

    /// A worker that cannot hear it is dying, and its exit, reported like any other, moves the turn on.
    fn grant(&mut self, steps: u64) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if let Some(c) = self.control.as_mut() {
                let _ = c.write_all(Grant::Steps(steps).line().as_bytes()).await;
            }
        })
    }

    /// Asks the worker's process group to end; its end is then reported as stopped, not failed.
    fn stop(&mut self) {
        self.stop_requested.store(true, Ordering::SeqCst);
        self.control = None;
        self.stopping_since.get_or_insert_with(Instant::now);
        signal_group(self.pid, Signal::TERM);
    }

    /// Ends the worker's process group at once: a worker that ignored `stop` for `STOP_GRACE`, or a second
    /// interrupt.
    fn kill(&mut self) {
        self.stop_requested.store(true, Ordering::SeqCst);
        self.control = None;
        self.stopping_since = None;
        signal_group(self.pid, Signal::KILL);
    }

    /// Whether the worker was asked to stop more than `STOP_GRACE` ago and is still here.
    fn overdue(&self) -> bool {
        self.stopping_since
            .is_some_and(|since| since.elapsed() >= STOP_GRACE)
    }
}

/// Signals the process group a worker leads; never golow's own (a pid of 0 would name it).
fn signal_group(pid: u32, signal: Signal) {
    if let Some(leader) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process_group(leader, signal);
    }
}

/// How long a worker asked to stop may take before its process group is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// A close-on-exec copy of `fd` above the descriptors a worker is given, so that moving one onto its target cannot
/// clobber another.
fn dup_fd_above(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    Ok(fcntl_dupfd_cloexec(fd, 10)?)
}

pub fn spawn(
    worker: usize,
    command: &WorkerCommand,
    controlled: bool,
    tx: Sender<Incoming>,
) -> io::Result<Launched> {
    let events = match &command.event_socket {
        Some(path) => Events::Socket(UnixListener::bind(path)?),
        None => Events::Pipe(io::pipe()?),
    };
    let control = if controlled { Some(io::pipe()?) } else { None };
    let collector = match &command.collector {
        Some(library) => Some((library, cupti::socket_pair()?)),
        None => None,
    };
    let event_fd = match &events {
        Events::Pipe((_, writer)) => Some(writer.as_raw_fd()),
        Events::Socket(_) => None,
    };
    let control_fd = control.as_ref().map(|(r, _)| r.as_raw_fd());
    let collector_fd = collector.as_ref().map(|(_, (_, w))| w.as_raw_fd());

    let mut cmd = Command::new(&command.program);
    cmd.args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    match &command.event_socket {
        Some(path) => cmd.env(script::SOCKET_ENV, path).env_remove(EVENT_FD_ENV),
        None => cmd.env(EVENT_FD_ENV, EVENT_FD.to_string()),
    };
    if controlled {
        cmd.env(CONTROL_FD_ENV, CONTROL_FD.to_string());
    } else {
        cmd.env_remove(CONTROL_FD_ENV);
    }
    if let Some((library, (_, socket))) = &collector {
        cmd.env(collector::INJECTION_ENV, library)
            .env(collector::FD_ENV, COLLECTOR_FD.to_string())
            .env(collector::INODE_ENV, cupti::inode(socket)?.to_string());
    }
    // SAFETY: between fork and exec only async-signal-safe calls (fcntl, dup2, close, prctl, sched_setaffinity)
    // run, and the raw descriptors borrowed there are this process's, open in the child until its exec.
    unsafe {
        cmd.pre_exec(move || {
            let lift = |fd: Option<i32>| fd.map(|fd| dup_fd_above(BorrowedFd::borrow_raw(fd)));
            // Lift the descriptors above the targets first, so moving one cannot clobber another.
            let events = lift(event_fd).transpose()?;
            let control = lift(control_fd).transpose()?;
            let collector = lift(collector_fd).transpose()?;
            for (fd, target) in [
                (events, EVENT_FD),
                (control, CONTROL_FD),
                (collector, COLLECTOR_FD),
            ] {
                // libc: rustix's dup2 takes its target as an OwnedFd, and the child's targets need not be open.
                if let Some(fd) = fd
                    && libc::dup2(fd.as_raw_fd(), target) < 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            // A worker must not outlive its monitor.
            let _ = set_parent_process_death_signal(Some(Signal::KILL));
            super::affinity::unpin_child()
        });
    }
    let mut child = cmd.spawn()?;
    let control_sender = match control {
        Some((reader, writer)) => {
            drop(reader);
            Some(pipe::Sender::from_owned_fd(OwnedFd::from(writer))?)
        }
        None => None,
    };
    let pid = child.id().unwrap_or(0);
    let stop_requested = Arc::new(AtomicBool::new(false));

    let mut exit_heard = None;
    let event_task = match events {
        Events::Pipe((reader, writer)) => {
            drop(writer);
            let reader = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
            let events = read_events(reader, worker, None, Admission::of_worker(), tx.clone());
            tokio::spawn(events)
        }
        Events::Socket(listener) => {
            let (exited, heard) = tokio::sync::oneshot::channel();
            exit_heard = Some(exited);
            let listening = Listening {
                worker,
                root: pid,
                until: heard,
                drain: true,
                on_accept: |_| {},
            };
            tokio::spawn(accept_processes(listener, listening, tx.clone()))
        }
    };
    let mut output_tasks = Vec::new();
    if let Some((_, (monitor_end, worker_end))) = collector {
        drop(worker_end);
        let collector_tx = tx.clone();
        output_tasks.push(tokio::spawn(cupti::forward(monitor_end, move |body| {
            deliver(&collector_tx, worker, Some(body))
        })));
    }
    if let Some(out) = child.stdout.take() {
        output_tasks.push(tokio::spawn(forward_output(
            worker,
            Stream::Stdout,
            out,
            tx.clone(),
        )));
    }
    if let Some(err) = child.stderr.take() {
        output_tasks.push(tokio::spawn(forward_output(
            worker,
            Stream::Stderr,
            err,
            tx.clone(),
        )));
    }
    let stopped = stop_requested.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        // What the worker left behind in its process group (a --cmd shell's background jobs) ends with it. The
        // group outlives its leader while a member is alive, so its ID cannot have been reused.
        signal_group(pid, Signal::KILL);
        if let Some(exited) = exit_heard {
            let _ = exited.send(());
        }
        // What the worker wrote before it ended is drained, within one budget for all its streams; a process that
        // outlived it (a detached descendant) may hold them open, and nothing it says after that is the worker's.
        let deadline = tokio::time::Instant::now() + DRAIN_AFTER_EXIT;
        let mut held = false;
        for mut task in std::iter::once(event_task).chain(output_tasks) {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
                held = true;
            }
        }
        if held {
            deliver(
                &tx,
                worker,
                Some(Body::Output {
                    stream: Stream::Stderr,
                    line: "golow: a process that outlived the worker held its output open; what came after the \
                           worker ended is not the worker's and was not kept"
                        .into(),
                }),
            )
            .await;
        }
        let (exit_code, signal) = match status {
            Ok(s) => (s.code(), s.signal()),
            Err(_) => (None, None),
        };
        let body = Body::WorkerExited {
            exit_code,
            signal,
            stop_requested: stopped.load(Ordering::SeqCst),
        };
        let _ = tx
            .send(Incoming {
                worker: Some(worker),
                body,
            })
            .await;
    });
    Ok(Launched {
        pid,
        control: control_sender,
        stop_requested,
        stopping_since: None,
    })
}

/// Where a worker's events come from: descriptor 3 of a built-in worker, or a socket every process of a `--cmd`
/// worker can reach.
enum Events {
    Pipe((io::PipeReader, io::PipeWriter)),
    Socket(UnixListener),
}

/// Reads one event stream to its end: a built-in worker's (`process` is `None`), or one process's of a `--cmd`
/// worker, whose events are stamped with the number the monitor gave its connection. Each line is admitted first;
/// a connection that does not open with its own process's hello is not read any further.
async fn read_events<R: tokio::io::AsyncRead + Unpin>(
    reader: R,
    worker: usize,
    process: Option<u32>,
    mut admission: Admission,
    tx: Sender<Incoming>,
) {
    for_each_line(reader, MAX_WORKER_LINE_BYTES, |line| {
        let (body, flow) = match line {
            Line::Text(text) if text.trim().is_empty() => (None, ControlFlow::Continue(())),
            Line::Text(text) => {
                let (body, flow) = event_body(&text, process, &mut admission);
                (Some(body), flow)
            }
            Line::TooLong => {
                let message =
                    format!("event line longer than {MAX_WORKER_LINE_BYTES} bytes skipped");
                (
                    Some(Body::ProtocolError { message }),
                    ControlFlow::Continue(()),
                )
            }
        };
        let delivered = deliver(&tx, worker, body);
        async move {
            delivered.await;
            flow
        }
    })
    .await;
}

/// What one line of an event stream becomes: the event it says, stamped, or a protocol error; and whether the
/// stream is read on.
fn event_body(
    text: &str,
    process: Option<u32>,
    admission: &mut Admission,
) -> (Body, ControlFlow<()>) {
    let admitted = parse_worker_line(text)
        .map_err(Refusal::Line)
        .and_then(|event| admission.admit(event));
    let event = match admitted {
        Ok(event) => event,
        Err(refusal) => {
            let flow = match refusal {
                Refusal::Line(_) => ControlFlow::Continue(()),
                Refusal::Connection(_) => ControlFlow::Break(()),
            };
            let message = refusal.message().to_string();
            return (Body::ProtocolError { message }, flow);
        }
    };
    let body = match process {
        Some(process) => event.from_script_process(process),
        None => Ok(Body::from(event)),
    };
    let body = body.unwrap_or_else(|message| Body::ProtocolError { message });
    (body, ControlFlow::Continue(()))
}

/// How a worker's processes' connections are taken: whose tree may connect, until when, and what then.
pub struct Listening<F> {
    pub worker: usize,
    /// The worker's process: only it and its descendants may connect.
    pub root: u32,
    /// Fires when the worker's process has exited (a launched one) or the session lets it go (an attached one).
    pub until: tokio::sync::oneshot::Receiver<()>,
    /// Whether the connections are read to their end after `until` (a launched worker's processes are gone, and
    /// what they wrote is kept) or closed at once (an attached worker's processes run on: closing is letting go).
    pub drain: bool,
    /// Told the pid of each process that connects.
    pub on_accept: F,
}

/// Takes the connections of a worker's processes, numbered in the order they come, until `until`; then waits for
/// what they still say (a launched worker's: at most `DRAIN_AFTER_EXIT`, as this is itself waited for) or closes
/// them. A connection from a process outside `root`'s tree is refused and takes no number.
pub async fn accept_processes<F: FnMut(u32)>(
    listener: UnixListener,
    listening: Listening<F>,
    tx: Sender<Incoming>,
) {
    let Listening {
        worker,
        root,
        until: mut exited,
        drain,
        mut on_accept,
    } = listening;
    let mut readers = tokio::task::JoinSet::new();
    let mut next = 0u32;
    loop {
        tokio::select! {
            _ = &mut exited => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { break };
                let pid = match command_process(&stream, root) {
                    Ok(pid) => pid,
                    Err(message) => {
                        deliver(&tx, worker, Some(Body::ProtocolError { message })).await;
                        continue;
                    }
                };
                if next == script::MAX_PROCESSES {
                    let message = format!(
                        "more than {} processes reported; the others are not listened to",
                        script::MAX_PROCESSES
                    );
                    deliver(&tx, worker, Some(Body::ProtocolError { message })).await;
                }
                if next >= script::MAX_PROCESSES {
                    next = next.saturating_add(1);
                    continue;
                }
                on_accept(pid);
                let admission = Admission::of_process(pid);
                readers.spawn(read_events(stream, worker, Some(next), admission, tx.clone()));
                next += 1;
            }
            Some(_) = readers.join_next(), if !readers.is_empty() => {}
        }
    }
    if drain {
        while readers.join_next().await.is_some() {}
    }
}

/// The pid of the process at the other end of `stream` (as the kernel says, `SO_PEERCRED`), when it is `root` or
/// one of its descendants (as /proc says); why the connection is refused otherwise.
fn command_process(stream: &UnixStream, root: u32) -> Result<u32, String> {
    let pid = stream
        .peer_cred()
        .ok()
        .and_then(|credentials| credentials.pid())
        .and_then(|pid| u32::try_from(pid).ok())
        .ok_or("a connection whose process the kernel does not name was refused")?;
    if crate::telemetry::procfs::descends_from(pid, root) {
        Ok(pid)
    } else {
        Err(format!(
            "a connection from pid {pid}, which is not one of the command's processes, was refused"
        ))
    }
}

/// Hands `body` to the hub, waiting while the hub is behind: a worker that floods its pipes then waits on them.
fn deliver(
    tx: &Sender<Incoming>,
    worker: usize,
    body: Option<Body>,
) -> impl Future<Output = ()> + Send + use<> {
    let tx = tx.clone();
    async move {
        if let Some(body) = body {
            let _ = tx
                .send(Incoming {
                    worker: Some(worker),
                    body,
                })
                .await;
        }
    }
}

async fn forward_output<R: tokio::io::AsyncRead + Unpin>(
    worker: usize,
    stream: Stream,
    reader: R,
    tx: Sender<Incoming>,
) {
    for_each_line(reader, MAX_OUTPUT_LINE_BYTES, |line| {
        let line = match line {
            Line::Text(text) => text,
            Line::TooLong => {
                format!("[golow: line longer than {MAX_OUTPUT_LINE_BYTES} bytes skipped]")
            }
        };
        let delivered = deliver(&tx, worker, Some(Body::Output { stream, line }));
        async move {
            delivered.await;
            ControlFlow::Continue(())
        }
    })
    .await;
}
