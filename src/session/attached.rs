//! Attached workers (`golow attach`): running processes golow did not start. golow reads them from /proc and NVML
//! and finds their end through a pidfd, without being their parent; it never signals them, never waits for them,
//! and stopping the session lets them go. The step hook loaded into their Python processes (`hook_loader`) reports
//! on a socket of the worker's, read as a `--cmd` worker's is (`launcher`'s reading of it); closing it lets the
//! processes go.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::io::{self, Read};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use rustix::process::{Pid, PidfdFlags, pidfd_open};
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc::Sender;
use tokio::sync::oneshot;

use super::hook_loader::{HookDir, HookLoader};
use super::launcher::{Incoming, Listening, accept_processes};
use super::worker::Worker;
use crate::telemetry::procfs;
use golow_protocol::event::{Body, Stream};

/// A process to attach to, as the command line found it: its pid, and when it started, which tells it from a later
/// process given the same pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    pub start: u64,
    /// Whether golow's step hook is loaded into its Python processes (else golow reads /proc and NVML only).
    pub load_hook: bool,
}

/// An attached process the hub watches.
pub struct Attached {
    pid: u32,
    /// Lets the process go; `None` once it was.
    detach: Option<oneshot::Sender<()>>,
    ranks: RankFinder,
    hook: Option<HookLoader>,
}

impl Worker for Attached {
    fn pid(&self) -> u32 {
        self.pid
    }

    /// No grants: an attached process runs its own loop.
    fn grant(&mut self, _steps: u64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }

    /// Detaches: the process runs on, untouched.
    fn stop(&mut self) {
        if let Some(detach) = self.detach.take() {
            let _ = detach.send(());
        }
    }

    /// golow never kills a process it did not start: detaching is all it does.
    fn kill(&mut self) {
        self.stop();
    }

    fn overdue(&self) -> bool {
        false
    }

    fn tree_read(&mut self, tree: &[u32]) -> Vec<Body> {
        if let Some(hook) = &mut self.hook {
            hook.found(tree);
        }
        self.ranks.found(tree)
    }
}

/// Starts watching `target` as worker `worker`: its end (or the session letting it go) reaches the hub as
/// `AttachedEnd`. Returns the worker and the process's command line; an error when it is no longer the process
/// the command line named.
pub fn watch(
    worker: usize,
    target: &Target,
    tx: Sender<Incoming>,
) -> io::Result<(Attached, Vec<String>)> {
    let gone = || io::Error::new(io::ErrorKind::NotFound, "the process is gone");
    let pid = i32::try_from(target.pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(gone)?;
    let pidfd = pidfd_open(pid, PidfdFlags::empty())?;
    // Checked after the pidfd is open: it then names the process the command line named, or that one is gone.
    if procfs::identity(target.pid).is_none_or(|now| now.start != target.start || now.zombie) {
        return Err(gone());
    }
    let command = command_line(target.pid);
    // SAFETY: the AsyncFd owns the pidfd, which stays open and the same until the AsyncFd is dropped.
    let ended = unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
        .map_err(io::Error::from)?;
    let (detach, detached) = oneshot::channel();
    let (let_go, until) = oneshot::channel();
    let hook = target
        .load_hook
        .then(|| hook_loader(worker, target.pid, until, &tx))
        .flatten();
    tokio::spawn(async move {
        let detached = tokio::select! {
            _ = ended.readable() => false,
            _ = detached => true,
        };
        let _ = let_go.send(());
        let _ = tx
            .send(Incoming {
                worker: Some(worker),
                body: Body::AttachedEnd { detached },
            })
            .await;
    });
    Ok((
        Attached {
            pid: target.pid,
            detach: Some(detach),
            ranks: RankFinder::default(),
            hook,
        },
        command,
    ))
}

/// The loader of the step hook into `root`'s tree, with its socket taken until the session lets the tree go; none
/// (and a line saying why) where its directory cannot be made.
fn hook_loader(
    worker: usize,
    root: u32,
    until: oneshot::Receiver<()>,
    tx: &Sender<Incoming>,
) -> Option<HookLoader> {
    let (dir, listener) = match HookDir::create(root) {
        Ok(made) => made,
        Err(e) => {
            let line = format!(
                "golow: cannot prepare the step hook for process {root} ({e}); showing what /proc and the GPU say"
            );
            let _ = tx.try_send(Incoming {
                worker: Some(worker),
                body: Body::Output {
                    stream: Stream::Stderr,
                    line,
                },
            });
            return None;
        }
    };
    let connected: Arc<Mutex<HashSet<u32>>> = Arc::default();
    let seen = connected.clone();
    let listening = Listening {
        worker,
        root,
        until,
        drain: false,
        on_accept: move |pid| {
            seen.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
        },
    };
    tokio::spawn(accept_processes(listener, listening, tx.clone()));
    Some(HookLoader::new(worker, root, dir, connected, tx.clone()))
}

/// What of a process's command line or environment is read: enough for any real one's names.
const MAX_PROC_TEXT_BYTES: u64 = 256 * 1024;
/// Arguments of a command line kept for the session's records.
const MAX_ARGS: usize = 64;
/// Bytes of each argument kept.
const MAX_ARG_BYTES: usize = 1024;

/// A /proc file of `pid` that holds NUL-separated strings, bounded; empty when it cannot be read (another user's
/// environment, a process gone).
fn nul_separated(pid: u32, file: &str) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    let read = std::fs::File::open(format!("/proc/{pid}/{file}"))
        .and_then(|f| f.take(MAX_PROC_TEXT_BYTES).read_to_end(&mut bytes));
    if read.is_err() {
        return Vec::new();
    }
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// `pid`'s command line, its arguments bounded in number and length (it is the process's to say, and anything).
pub fn command_line(pid: u32) -> Vec<String> {
    nul_separated(pid, "cmdline")
        .into_iter()
        .take(MAX_ARGS)
        .map(|arg| {
            let text = String::from_utf8_lossy(&arg[..arg.len().min(MAX_ARG_BYTES)]);
            text.trim_end_matches('\u{fffd}').to_string()
        })
        .collect()
}

/// What a process's environment says of its place in a distributed job, as torchrun, accelerate and Lightning set
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankEnv {
    pub rank: u32,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
}

impl RankEnv {
    /// From a process's environment entries; `None` without a `RANK` that is a number.
    fn of(entries: &[Vec<u8>]) -> Option<RankEnv> {
        let number = |name: &[u8]| {
            entries.iter().find_map(|entry| {
                let value = entry.strip_prefix(name)?.strip_prefix(b"=")?;
                std::str::from_utf8(value).ok()?.parse::<u32>().ok()
            })
        };
        Some(RankEnv {
            rank: number(b"RANK")?,
            local_rank: number(b"LOCAL_RANK"),
            world_size: number(b"WORLD_SIZE"),
        })
    }
}

/// Finds the ranks of an attached worker's tree from its processes' environments (readable for the user's own
/// processes only). A rank's process is the first of the tree (root first, breadth first: the highest) whose
/// environment names that rank: what it starts (DataLoader workers, a launcher's helpers) inherits its `RANK`.
#[derive(Default)]
pub struct RankFinder {
    /// What each process of the tree said, and how often it was read; only those still in it.
    read: HashMap<u32, Reading>,
    /// Each rank's process, as last told to the hub.
    told: BTreeMap<u32, u32>,
}

/// A process's environment as read: its rank, if it names one, and how often it was read.
struct Reading {
    rank: Option<RankEnv>,
    times: u8,
}

/// Reads of a process whose environment names no rank: a second catches one first read between its fork and its
/// exec (`RANK=0 python train.py &` sets `RANK` at the exec).
const READS_WITHOUT_RANK: u8 = 2;

impl RankFinder {
    /// The ranks whose process is new since the last call, each with what its environment says.
    pub fn found(&mut self, tree: &[u32]) -> Vec<Body> {
        self.read.retain(|pid, _| tree.contains(pid));
        let mut ranks: BTreeMap<u32, (u32, RankEnv)> = BTreeMap::new();
        for &pid in tree {
            let reading = self.read.entry(pid).or_insert(Reading {
                rank: None,
                times: 0,
            });
            if reading.rank.is_none() && reading.times < READS_WITHOUT_RANK {
                reading.rank = RankEnv::of(&nul_separated(pid, "environ"));
                reading.times += 1;
            }
            if let Some(env) = reading.rank {
                ranks.entry(env.rank).or_insert((pid, env));
            }
        }
        ranks
            .into_iter()
            .filter(|&(rank, (pid, _))| self.told.insert(rank, pid) != Some(pid))
            .map(|(_, (pid, env))| Body::RankProcess {
                pid,
                rank: env.rank,
                local_rank: env.local_rank,
                world_size: env.world_size,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &[&str]) -> Vec<Vec<u8>> {
        text.iter().map(|e| e.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_rank_is_read_from_the_environment_and_only_from_its_own_names() {
        let env = entries(&["LOCAL_RANK=1", "RANK=3", "WORLD_SIZE=4", "GROUP_RANK=0"]);
        assert_eq!(
            RankEnv::of(&env),
            Some(RankEnv {
                rank: 3,
                local_rank: Some(1),
                world_size: Some(4)
            })
        );
        for without in [
            &["LOCAL_RANK=1", "WORLD_SIZE=4"][..],
            &["RANK=", "WORLD_SIZE=4"],
            &["RANK=-1"],
            &["RANK=x"],
            &["RANKS=1"],
        ] {
            assert_eq!(RankEnv::of(&entries(without)), None, "{without:?}");
        }
    }

    #[test]
    fn a_ranks_process_is_the_highest_of_the_tree_that_names_it() {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .env("RANK", "1")
            .env("WORLD_SIZE", "2")
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until the child has run sleep, its environment is this test's.
        while command_line(pid).first().is_none_or(|a| a != "sleep") {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut finder = RankFinder::default();
        let tree = [std::process::id(), pid];
        let found = finder.found(&tree);
        assert_eq!(
            found,
            vec![Body::RankProcess {
                pid,
                rank: 1,
                local_rank: None,
                world_size: Some(2)
            }]
        );
        assert!(finder.found(&tree).is_empty(), "told once");
        // Its DataLoader worker, started later, inherits its RANK and is not the rank's process.
        let below = std::process::Command::new("sleep")
            .arg("30")
            .env("RANK", "1")
            .spawn()
            .unwrap();
        while command_line(below.id())
            .first()
            .is_none_or(|a| a != "sleep")
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(finder.found(&[tree[0], pid, below.id()]).is_empty());
        // The rank's process restarted as another: that one is the rank's now.
        let found = finder.found(&[tree[0], below.id()]);
        assert!(
            matches!(found[..], [Body::RankProcess { pid, rank: 1, .. }] if pid == below.id()),
            "{found:?}"
        );
        for mut process in [child, below] {
            process.kill().unwrap();
            process.wait().unwrap();
        }
    }

    #[test]
    fn a_command_line_is_bounded() {
        let long = "x".repeat(5000);
        let mut args = vec![long.clone()];
        args.extend((0..100).map(|i| i.to_string()));
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; :"])
            .args(&args)
            .spawn()
            .unwrap();
        // Until the child has run sh, its command line is this test's.
        let read = (0..1000)
            .map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(5));
                command_line(child.id())
            })
            .find(|read| read.first().is_some_and(|a| a == "sh"))
            .unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(read.len(), MAX_ARGS);
        assert_eq!(read[3].len(), MAX_ARG_BYTES);
        assert_eq!(read[4], "0");
    }
}
