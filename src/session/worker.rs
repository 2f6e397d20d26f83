//! What the hub asks of a worker, whichever way it came into the session: launched (golow started its process, and
//! ends it) or attached (a process golow did not start, which it watches and never signals).

use std::future::Future;
use std::pin::Pin;

use tokio::sync::mpsc::Sender;

use super::attached::{self, Target};
use super::launcher::{self, Incoming, WorkerCommand};
use golow_protocol::event::{Body, Stream};

/// How a worker comes into the session.
#[derive(Debug, Clone)]
pub enum WorkerSpec {
    /// A process golow starts.
    Launch(WorkerCommand),
    /// A running process golow watches.
    Attach(Target),
}

/// A worker the hub runs.
pub trait Worker: Send {
    /// Its process: the tree /proc and NVML read hangs from it.
    fn pid(&self) -> u32;
    /// Grants it `steps` more steps (the alternating schedule).
    fn grant(&mut self, steps: u64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
    /// Ends its part in the session: a launched worker is asked to end, an attached one is let go.
    fn stop(&mut self);
    /// Ends it at once, where golow may (a second interrupt, a worker deaf to `stop`).
    fn kill(&mut self);
    /// Whether it was asked to stop long enough ago to be killed.
    fn overdue(&self) -> bool;
    /// What it makes of its process tree as /proc read it this tick: a launched worker nothing; an attached one the
    /// ranks its processes' environments name (and it loads the step hook into the new ones).
    fn tree_read(&mut self, _tree: &[u32]) -> Vec<Body> {
        Vec::new()
    }
}

/// A worker as it started: the worker, and what the session records of its start.
pub struct Started {
    pub worker: Box<dyn Worker>,
    pub body: Body,
}

/// Starts worker `index` as `spec` says; its events reach the hub on `tx`, its end among them.
pub fn start_worker(
    index: usize,
    spec: &WorkerSpec,
    controlled: bool,
    tx: Sender<Incoming>,
) -> std::io::Result<Started> {
    match spec {
        WorkerSpec::Launch(command) => {
            let worker = launcher::spawn(index, command, controlled, tx)?;
            let body = Body::WorkerStarted {
                pid: worker.pid,
                command: command.argv(),
            };
            Ok(Started {
                worker: Box::new(worker),
                body,
            })
        }
        WorkerSpec::Attach(target) => {
            let (worker, command) = attached::watch(index, target, tx)?;
            let body = Body::WorkerStarted {
                pid: target.pid,
                command,
            };
            Ok(Started {
                worker: Box::new(worker),
                body,
            })
        }
    }
}

/// What the session records of a worker that could not start: why, in one line, and its end.
pub fn not_started(spec: &WorkerSpec, why: &std::io::Error) -> [Body; 2] {
    let (line, end) = match spec {
        WorkerSpec::Launch(command) => (
            format!("golow: cannot start {}: {why}", command.program.display()),
            Body::WorkerExited {
                exit_code: None,
                signal: None,
                stop_requested: false,
            },
        ),
        WorkerSpec::Attach(target) => (
            format!("golow: cannot watch process {}: {why}", target.pid),
            Body::AttachedEnd { detached: false },
        ),
    };
    [
        Body::Output {
            stream: Stream::Stderr,
            line,
        },
        end,
    ]
}

/// What the session records of a worker it stopped before it started.
pub fn never_started(spec: &WorkerSpec) -> Body {
    match spec {
        WorkerSpec::Launch(_) => Body::WorkerExited {
            exit_code: None,
            signal: None,
            stop_requested: true,
        },
        WorkerSpec::Attach(_) => Body::AttachedEnd { detached: true },
    }
}

/// Whether `body` says a worker's process left the session.
pub fn is_end(body: &Body) -> bool {
    matches!(body, Body::WorkerExited { .. } | Body::AttachedEnd { .. })
}
