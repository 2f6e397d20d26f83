//! Loads golow's step hook into the Python processes of an attached worker's tree while they run
//! (`crate::inject`), so that they report their steps as a `--cmd` worker's processes do, on a socket of the
//! worker's own. Each process is asked once; what happens is said in one line on the worker's output. The hook lets
//! go of a process (removing all it put there) when its connection closes: when golow detaches, exits or dies.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::fs::{FlockOperation, Mode, OFlags, flock, open};
use tokio::net::UnixListener;
use tokio::sync::mpsc::Sender;

use super::launcher::Incoming;
use crate::inject;
use crate::telemetry::procfs;
use golow_protocol::event::{Body, Stream};

/// The hook, as the attached process loads it (no operator recorder: attach records no operators).
const HOOK_SOURCE: &str = include_str!("../workers/pyhook/golow-hook/golow_step_hook.py");
/// How long gdb may hold a process before golow gives up on it.
const INJECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a process may take to run the hook once gdb has left, before golow says where it waits.
const RUN_WITHIN: Duration = Duration::from_secs(3);

/// The directory an attached worker's processes load the hook from and report to, in the /tmp its root process
/// sees (through /proc/PID/root: a process in a container sees its own), removed when the session ends.
pub struct HookDir {
    /// The directory as golow reaches it.
    here: PathBuf,
    /// The same directory as the target sees it.
    there: PathBuf,
}

impl HookDir {
    /// Makes the directory for worker `root`'s tree, with the hook, the file a process runs to load it, and the
    /// socket the processes connect to.
    pub fn create(root: u32) -> io::Result<(HookDir, UnixListener)> {
        let name = format!("golow-attach-{}-{root}", std::process::id());
        let there = Path::new("/tmp").join(&name);
        let here = PathBuf::from(format!("/proc/{root}/root/tmp")).join(&name);
        std::fs::create_dir(&here)?;
        let dir = HookDir { here, there };
        // Readable by the target's user, whoever it is; only golow writes here.
        std::fs::set_permissions(&dir.here, std::fs::Permissions::from_mode(0o755))?;
        dir.write("golow_step_hook.py", HOOK_SOURCE)?;
        dir.write("attach.py", &dir.bootstrap())?;
        let listener = UnixListener::bind(dir.here.join("events.sock"))?;
        std::fs::set_permissions(
            dir.here.join("events.sock"),
            std::fs::Permissions::from_mode(0o666),
        )?;
        Ok((dir, listener))
    }

    fn write(&self, name: &str, text: &str) -> io::Result<()> {
        let path = self.here.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.write_all(text.as_bytes())?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
    }

    /// What a process runs to load the hook: the hook's module if the process has it already (a `--cmd` worker's,
    /// which then declines), else loaded from this directory under a name no import can reach; then `attach`.
    fn bootstrap(&self) -> String {
        let hook = python_string(&self.there.join("golow_step_hook.py"));
        let socket = python_string(&self.there.join("events.sock"));
        format!(
            "import sys\n\
             name = 'golow-step-hook'\n\
             hook = sys.modules.get(name)\n\
             if hook is None:\n    \
                 import importlib.machinery\n    \
                 loader = importlib.machinery.SourceFileLoader(name, {hook})\n    \
                 hook = type(sys)(name)\n    \
                 hook.__file__, hook.__loader__ = {hook}, loader\n    \
                 hook.__spec__ = importlib.machinery.ModuleSpec(name, loader, origin={hook})\n    \
                 sys.modules[name] = hook\n    \
                 try:\n        \
                     loader.exec_module(hook)\n    \
                 except BaseException:\n        \
                     sys.modules.pop(name, None)\n        \
                     raise\n\
             hook.attach({socket})\n"
        )
    }

    /// The file a process runs, as it sees it.
    fn bootstrap_there(&self) -> PathBuf {
        self.there.join("attach.py")
    }
}

impl Drop for HookDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.here);
    }
}

/// A path as a Python string literal.
fn python_string(path: &Path) -> String {
    inject::python_literal(&path.to_string_lossy())
}

/// Loads the hook into each Python process of an attached worker's tree as it appears.
pub struct HookLoader {
    worker: usize,
    /// The process the command line named: where it cannot take the hook, golow says why.
    root: u32,
    dir: Arc<HookDir>,
    tx: Sender<Incoming>,
    /// The processes asked (by pid, with their start time: a pid reused is another process).
    asked: HashMap<u32, u64>,
    /// The processes whose hook connected, as the worker's socket saw them.
    connected: Arc<Mutex<HashSet<u32>>>,
    /// Each process's claim on its hook: one golow at a time.
    claims: Arc<Mutex<Vec<Claim>>>,
}

impl HookLoader {
    pub fn new(
        worker: usize,
        root: u32,
        dir: HookDir,
        connected: Arc<Mutex<HashSet<u32>>>,
        tx: Sender<Incoming>,
    ) -> HookLoader {
        HookLoader {
            worker,
            root,
            dir: Arc::new(dir),
            tx,
            asked: HashMap::new(),
            connected,
            claims: Arc::default(),
        }
    }

    /// Asks each process of `tree` not asked before to load the hook, in the background, one at a time.
    pub fn found(&mut self, tree: &[u32]) {
        self.asked.retain(|pid, _| tree.contains(pid));
        let mut new = Vec::new();
        for &pid in tree {
            let Some(identity) = procfs::identity(pid) else {
                continue;
            };
            if self.asked.get(&pid) == Some(&identity.start) {
                continue;
            }
            self.asked.insert(pid, identity.start);
            if !forked_copy(pid, identity.parent) {
                new.push(pid);
            }
        }
        if new.is_empty() {
            return;
        }
        let (worker, root, dir, tx) = (self.worker, self.root, self.dir.clone(), self.tx.clone());
        let (connected, claims) = (self.connected.clone(), self.claims.clone());
        tokio::task::spawn_blocking(move || {
            for pid in new {
                if let Some(line) = load(pid, pid == root, &dir, &connected, &claims) {
                    let body = Body::Output {
                        stream: Stream::Stderr,
                        line: format!("golow: {line}"),
                    };
                    let _ = tx.blocking_send(Incoming {
                        worker: Some(worker),
                        body,
                    });
                }
            }
        });
    }
}

/// Whether `pid` is a copy of its parent forked without an exec (a DataLoader's worker, a multiprocessing fork):
/// it inherits the hook if the parent had it when it forked, and never runs the training loop.
fn forked_copy(pid: u32, parent: u32) -> bool {
    let exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let line = super::attached::command_line;
    exe(pid).is_some() && exe(pid) == exe(parent) && line(pid) == line(parent)
}

/// Loads the hook into `pid`; the line to say of it, if any (a process below the root that is not Python is left
/// alone quietly: a tree holds shells and tools).
fn load(
    pid: u32,
    root: bool,
    dir: &HookDir,
    connected: &Mutex<HashSet<u32>>,
    claims: &Mutex<Vec<Claim>>,
) -> Option<String> {
    let version = match inject::python_in(pid) {
        Ok(version) => version,
        Err(refusal) if root => {
            return Some(format!(
                "{refusal}: no step hook in it (its Python descendants get one); /proc and the GPU say the rest"
            ));
        }
        Err(_) => return None,
    };
    if let Some(why) = watched_already(pid) {
        return Some(why);
    }
    let claim = match claim(pid) {
        Ok(claim) => claim,
        Err(why) => return Some(why),
    };
    let scheduled = match inject::schedule_file(pid, &dir.bootstrap_there(), INJECTION_TIMEOUT) {
        Ok(scheduled) => scheduled,
        Err(refusal) => return Some(format!("process {pid}: {refusal}")),
    };
    claims
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(claim);
    let ran = (0..RUN_WITHIN.as_millis() / 20).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        connected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&pid)
    });
    let stopped = scheduled.stopped.as_millis();
    Some(if ran {
        format!(
            "step hook loaded into process {pid} (Python {version}; it was stopped {stopped} ms)"
        )
    } else {
        let waits = inject::main_thread_waits_in(pid)
            .map(|syscall| format!(" (its main thread waits in {syscall})"))
            .unwrap_or_default();
        format!(
            "process {pid} has not run Python since golow loaded its step hook{waits}: its steps appear when it \
             does"
        )
    })
}

/// Why golow cannot load its hook into `pid`: a golow has (another `golow attach`, which holds its claim), or
/// `pid` is a `--cmd` worker's process.
pub fn watched_by_golow(pid: u32) -> Option<String> {
    watched_already(pid).or_else(|| claim(pid).err())
}

/// Removes the hook an attached session loaded into `pid` (as the hook does itself when its session ends): what
/// happened, in one line; an error line where it could not be asked.
pub fn let_go(pid: u32) -> Result<String, String> {
    if matches!(claim(pid), Ok(Some(_))) {
        return Ok(format!(
            "process {pid} is not attached to by any golow: nothing to let go of"
        ));
    }
    let name = format!("golow-detach-{}-{pid}.py", std::process::id());
    let here = PathBuf::from(format!("/proc/{pid}/root/tmp")).join(&name);
    let there = Path::new("/tmp").join(&name);
    // The file removes itself as it runs: its absence says it ran.
    let text = format!(
        "import os, sys\n\
         os.unlink({there})\n\
         hook = sys.modules.get('golow-step-hook')\n\
         if hook is not None and getattr(hook, '_attached', False):\n    \
             hook.uninstall()\n",
        there = python_string(&there)
    );
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&here)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .and_then(|()| std::fs::set_permissions(&here, std::fs::Permissions::from_mode(0o666)));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&here);
        return Err(format!("cannot write {}: {e}", here.display()));
    }
    if let Err(refusal) = inject::schedule_file(pid, &there, INJECTION_TIMEOUT) {
        let _ = std::fs::remove_file(&here);
        return Err(format!("process {pid}: {refusal}"));
    }
    let ran = (0..RUN_WITHIN.as_millis() / 20).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !here.exists()
    });
    Ok(if ran {
        format!("process {pid} let go: golow's step hook removed")
    } else {
        format!(
            "process {pid} has not run Python since golow asked it to let go: it lets go when its main thread \
             runs Python again"
        )
    })
}

/// Why `pid` reports to a golow already, from its environment: a `--cmd` worker's process.
fn watched_already(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let name = golow_protocol::script::SOCKET_ENV.as_bytes();
    environ
        .split(|&b| b == 0)
        .any(|entry| entry.starts_with(name) && entry.get(name.len()) == Some(&b'='))
        .then(|| format!("process {pid} runs under golow run --cmd, which watches it already"))
}

/// A process's claim on its hook, held while the session lasts: a lock on a file in the /tmp it sees, which the
/// kernel lets go with golow, however golow ends.
pub struct Claim {
    path: String,
    _lock: OwnedFd,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Claims `pid` for this golow: `None` where no claim can be made (no /tmp it sees that golow may write), the line
/// naming the golow that holds it where another does.
fn claim(pid: u32) -> Result<Option<Claim>, String> {
    let start = procfs::identity(pid).map_or(0, |id| id.start);
    let path = format!("/proc/{pid}/root/tmp/golow-attach-{pid}-{start}.lock");
    let Ok(file) = open(
        path.as_str(),
        OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o600),
    ) else {
        return Ok(None);
    };
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        let mut holder = String::new();
        let _ = std::fs::File::from(file)
            .take(16)
            .read_to_string(&mut holder);
        return Err(format!(
            "process {pid} is attached to by another golow already (pid {}): one golow at a time",
            holder.trim()
        ));
    }
    let _ = rustix::fs::ftruncate(&file, 0);
    let _ = rustix::io::write(&file, std::process::id().to_string().as_bytes());
    Ok(Some(Claim { path, _lock: file }))
}
