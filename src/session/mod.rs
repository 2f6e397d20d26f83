//! A session, and its one owner: every run of workers (`golow run`, headless or live, and each cell of `golow
//! sweep`) goes through [`Session`], in one order: prepare what every worker shares → open the recording with its
//! header → run the hub until the workers end → finish the recording → summarise. Callers give the store the hub
//! folds into, and choose who follows the records ([`Session::run`] on this thread, or [`Session::start`] on a thread
//! of its own for the live view).

pub mod affinity;
mod attached;
mod hook_loader;
mod hub;
pub mod keeper;
mod launcher;
mod lines;
mod observer;
mod orphans;
mod prepare;
pub mod programs;
pub mod python;
mod schedule;
mod ticker;
mod worker;

use std::io;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

pub use attached::{Target, command_line as process_command_line};
pub use hook_loader::{let_go, watched_by_golow};
pub use observer::{Observer, TickBell};
pub use prepare::{Length, Plan, PrepareError};

use crate::channels::{Control, Notifier};
use crate::recording::{self, Recorder, Sink, Written, format::Header};
use crate::state::Summary;
use crate::store::Store;

/// Where a session is recorded.
#[derive(Debug, Clone)]
pub enum RecordTo {
    Nowhere,
    /// `<dir>/<UTC time>-<workers>.golow`, the directory created if need be.
    DefaultIn(PathBuf),
    /// This file, which must not exist.
    Path(PathBuf),
}

/// Why a session could not start: its preparation failed, or its recording could not be created.
#[derive(Debug)]
pub enum OpenError {
    Prepare(PrepareError),
    Recording(String),
}

/// A session ready to run: its workers prepared, its recording open.
pub struct Session {
    prepared: prepare::Prepared,
    /// Running processes it watches (`golow attach`), after the workers it starts.
    attached: Vec<(String, Target)>,
    recording: Option<(Recorder, Sink)>,
    interval: Duration,
    /// The session stops by itself this long after it starts (`--duration`).
    stop_after: Option<Duration>,
}

/// How a session ended.
pub struct Finished {
    /// The summary of the session's records, or why it could not run at all.
    pub summary: Result<Summary, String>,
    /// What its recording holds, or why writing it failed; `None` when not recorded.
    pub recorded: Option<io::Result<Written>>,
}

impl Session {
    /// Prepares `plan` and opens its recording: everything that can fail before a worker starts, so bad input
    /// leaves no recording behind. `interval` is the sampling period; `command_line` goes into the header;
    /// `announce` hears of a long step of the preparation as it begins.
    pub fn open(
        plan: &Plan,
        record_to: &RecordTo,
        command_line: Vec<String>,
        interval: Duration,
        announce: &mut dyn FnMut(&str),
    ) -> Result<Session, OpenError> {
        let prepared = prepare::prepare(plan, announce).map_err(OpenError::Prepare)?;
        Session::with_recording(prepared, Vec::new(), record_to, command_line, interval)
    }

    /// A session of running processes golow did not start (`golow attach`), watched as the workers `session`
    /// names, each named in `session.attached` with its pid, and its recording open.
    pub fn attach(
        session: golow_protocol::config::SessionConfig,
        targets: Vec<(String, Target)>,
        record_to: &RecordTo,
        command_line: Vec<String>,
        interval: Duration,
    ) -> Result<Session, OpenError> {
        let dir = prepare::SessionDir::create().map_err(|e| {
            OpenError::Prepare(PrepareError::Setup(format!(
                "cannot create the session directory: {e}"
            )))
        })?;
        let prepared = prepare::Prepared {
            _dir: dir,
            session,
            workers: Vec::new(),
        };
        Session::with_recording(prepared, targets, record_to, command_line, interval)
    }

    fn with_recording(
        prepared: prepare::Prepared,
        attached: Vec<(String, Target)>,
        record_to: &RecordTo,
        command_line: Vec<String>,
        interval: Duration,
    ) -> Result<Session, OpenError> {
        let recording = match record_path(record_to, &prepared.session.workers)? {
            Some(path) => {
                let machine = crate::telemetry::machine::describe();
                let header = Header::new(&prepared.session, command_line, machine);
                let opened = Recorder::create(&path, &header).map_err(|e| {
                    OpenError::Recording(format!(
                        "cannot create the recording {}: {e}",
                        path.display()
                    ))
                })?;
                Some(opened)
            }
            None => None,
        };
        Ok(Session {
            prepared,
            attached,
            recording,
            interval,
            stop_after: None,
        })
    }

    /// Stops the session `after` this long, as Ctrl-C would.
    pub fn stop_after(mut self, after: Option<Duration>) -> Session {
        self.stop_after = after;
        self
    }

    /// The file the session is recorded to.
    pub fn recording(&self) -> Option<&Path> {
        self.recording.as_ref().map(|(recorder, _)| recorder.path())
    }

    /// Runs the session on this thread until its workers end, folding into `store`; `observer` sees every record
    /// as the hub stamps it, and `controls` stop workers (Ctrl-C stops them all).
    pub fn run(
        self,
        store: &Store,
        observer: &mut (dyn Observer + Send),
        controls: UnboundedReceiver<Control>,
    ) -> Finished {
        let Session {
            prepared,
            attached,
            recording,
            interval,
            stop_after,
        } = self;
        let (recorder, sink) = recording.unzip();
        let prepare::Prepared {
            _dir: session_dir,
            session,
            workers,
        } = prepared;
        let mark = orphans::adopt();
        // Without its keeper a session still runs; only a `kill -9` of golow would leave its workers' descendants.
        let keeper = keeper::Keeper::start(&mark, session_dir.path()).and_then(Result::ok);
        let workers = workers
            .into_iter()
            .map(|(name, mut command)| {
                command.env.push((orphans::MARK_ENV.into(), mark.clone()));
                (name, worker::WorkerSpec::Launch(command))
            })
            .chain(
                attached
                    .into_iter()
                    .map(|(name, target)| (name, worker::WorkerSpec::Attach(target))),
            )
            .collect();
        let ran = hub::run_blocking(
            session,
            workers,
            interval,
            stop_after,
            store,
            &mut (observer, sink),
            controls,
        );
        orphans::end_adopted(&mark);
        // The sink went with the hub: the recorder writes what is queued and its index.
        let mut recorded = recorder.map(Recorder::finish);
        drop(session_dir);
        drop(keeper);
        let summary = match ran {
            Ok(()) => Ok(Summary::from_state(&store.lock())),
            Err(e) => Err(match recorded.take() {
                // A session that failed before its first record leaves no header-only recording behind.
                Some(Ok(written)) if written.events == 0 => {
                    match std::fs::remove_file(&written.path) {
                        Ok(()) => format!("the session failed: {e}"),
                        Err(_) => format!(
                            "the session failed: {e}; {} holds no record",
                            written.path.display()
                        ),
                    }
                }
                Some(Ok(written)) => format!(
                    "the session failed: {e}; what it recorded is in {}",
                    written.path.display()
                ),
                Some(Err(_)) | None => format!("the session failed: {e}"),
            }),
        };
        Finished { summary, recorded }
    }

    /// Runs the session on a thread of its own, for a view that never waits on the session, nor the session on it for
    /// longer than the view takes to draw a frame from `store`: `notifier` notifies once per sampling tick that brought
    /// records, and controls go in through [`Running::controls`].
    pub fn start(self, store: Store, notifier: Notifier) -> io::Result<Running> {
        let (controls, control_rx) = unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("golow-session".into())
            .spawn(move || self.run(&store, &mut TickBell::new(notifier), control_rx))?;
        Ok(Running { controls, thread })
    }
}

/// A session running on its own thread.
pub struct Running {
    pub controls: UnboundedSender<Control>,
    thread: JoinHandle<Finished>,
}

impl Running {
    /// Stops whatever still runs (the view was left while workers ran) and waits for the session's end.
    pub fn finish(self) -> Finished {
        let _ = self.controls.send(Control::StopAll);
        self.thread.join().unwrap_or_else(|_| Finished {
            summary: Err("the session thread panicked".into()),
            recorded: None,
        })
    }
}

fn record_path(to: &RecordTo, workers: &[String]) -> Result<Option<PathBuf>, OpenError> {
    match to {
        RecordTo::Nowhere => Ok(None),
        RecordTo::Path(path) => Ok(Some(path.clone())),
        RecordTo::DefaultIn(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                OpenError::Recording(format!(
                    "cannot create {}: {e} (or pass --record PATH or --no-record)",
                    dir.display()
                ))
            })?;
            Ok(Some(recording::default_path(
                dir,
                workers,
                SystemTime::now(),
            )))
        }
    }
}

/// The last non-empty line a finished command printed on stderr: what explains its failure in one line.
pub fn last_stderr_line(output: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    last.unwrap_or("no output").trim().to_string()
}
