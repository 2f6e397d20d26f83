//! gdb, run once per file to schedule: the script (no symbols read: the addresses come from `cpython`), its
//! output read as it comes, and its end, however it ends. While gdb is inside a call into the target, the target's
//! main thread runs golow's borrowed registers: killing gdb then lets the thread return to nowhere (the target dies
//! of SIGSEGV), while SIGINT makes gdb abandon the call and restore the thread. So golow only interrupts gdb during
//! its calls, and kills it only outside them, as its markers tell; if golow itself dies, gdb gets SIGINT as its
//! parent-death signal, which does the same.

use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

use super::cpython::Api;
use super::{Refusal, Scheduled, one_line};

/// How long gdb gets to end after an interrupt, before the next step.
const GRACE: Duration = Duration::from_secs(3);
/// Interrupts sent to a gdb that stays inside its call before golow gives up waiting for it.
const INTERRUPTS: u32 = 3;
/// The longest line of gdb's kept; the rest of a longer one is read and dropped.
const LINE: usize = 1024;
/// gdb's error lines kept, to say what went wrong.
const ERRORS: usize = 8;

/// gdb on `path` (the value of PATH), or the line saying it is missing.
pub(super) fn find(path: Option<&OsStr>) -> Result<PathBuf, Refusal> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("gdb"))
        .find(|candidate| candidate.is_absolute() && executable(candidate))
        .ok_or_else(|| {
            Refusal(
                "golow attach needs gdb to load its hook into a running process (apt install gdb); showing /proc \
                 and GPU data only"
                    .into(),
            )
        })
}

/// What gdb's run came to, when it did not queue the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    Gone,
    TracedBy(u32),
    NotPermitted,
    /// Everything else, as one line for the user.
    Other(String),
}

/// Maps a page in `pid`'s main thread, writes `boot` into it and queues it as a pending call.
pub(super) fn schedule(
    gdb: &Path,
    pid: u32,
    api: &Api,
    boot: &str,
    timeout: Duration,
) -> Result<Scheduled, Failure> {
    let workspace = Workspace::create().map_err(|e| {
        Failure::Other(format!(
            "cannot write gdb's script in the temporary directory: {e}"
        ))
    })?;
    workspace
        .write(BOOT_FILE, boot.as_bytes())
        .and_then(|()| workspace.write(SCRIPT_FILE, script(pid, api).as_bytes()))
        .map_err(|e| Failure::Other(format!("cannot write gdb's script: {e}")))?;
    let run = Run::start(gdb, &workspace.dir)
        .map_err(|e| Failure::Other(format!("cannot run {}: {e}", gdb.display())))?;
    let transcript = run.follow(timeout);
    transcript.outcome(pid, timeout)
}

const BOOT_FILE: &str = "boot";
const SCRIPT_FILE: &str = "schedule.gdb";

/// The gdb script. gdb runs in the workspace, so the files it reads are named relatively (a temporary directory's
/// path may hold characters gdb's commands would split on). Nothing of the target's is loaded: neither its
/// libraries' symbols nor the scripts gdb would auto-load from beside its files (CPython ships `python3.X-gdb.py`).
/// Markers (`GOLOW-…`) tell golow where it stands.
fn script(pid: u32, api: &Api) -> String {
    let Api {
        mmap,
        add_pending_call,
        run_simple_string,
    } = api;
    let mut script = format!(
        "set auto-solib-add off\n\
         set auto-load off\n\
         set pagination off\n\
         set confirm off\n\
         set print thread-events off\n\
         set unwindonsignal on\n\
         set unwind-on-terminating-exception on\n\
         file /proc/{pid}/exe\n\
         echo GOLOW-ATTACHING\\n\n\
         attach {pid}\n\
         thread 1\n\
         echo GOLOW-CALLING\\n\n\
         set $golow_buf = ((long(*)(long,long,long,long,long,long)){mmap:#x})(0, {page}, 3, 0x22, -1, 0)\n\
         printf \"GOLOW-BUF %#lx\\n\", $golow_buf\n\
         if $golow_buf == -1\n  echo GOLOW-MMAP-FAILED\\n\n  detach\n  echo GOLOW-DETACHED\\n\n  quit 4\nend\n\
         restore {BOOT_FILE} binary $golow_buf\n\
         set $golow_rc = ((int(*)(long,long)){add_pending_call:#x})({run_simple_string:#x}, $golow_buf)\n\
         printf \"GOLOW-RC %d\\n\", $golow_rc\n",
        page = super::bootstrap::PAGE,
    );
    script.push_str(NUDGE);
    script.push_str("detach\necho GOLOW-DETACHED\\n\nquit\n");
    script
}

/// A main thread blocked in futex (a lock, join, Event.wait, queue.get) is made to return EINTR from it instead of
/// restarting the wait: CPython's lock loop then runs the pending calls at once and waits again. Any signal can do
/// the same, so every caller of futex handles it.
#[cfg(target_arch = "x86_64")]
const NUDGE: &str = "if $golow_rc == 0 && $orig_rax == 202 && ($rax == -512 || $rax == -514 || $rax == -516)\n  \
                     set $rax = -4\n  echo GOLOW-NUDGED\\n\nend\n";
#[cfg(not(target_arch = "x86_64"))]
const NUDGE: &str = "";

/// A directory of golow's own for gdb's files, removed with everything in it when dropped.
struct Workspace {
    dir: PathBuf,
}

impl Workspace {
    fn create() -> io::Result<Workspace> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for attempt in 0..100u32 {
            let dir = base.join(format!(
                "golow-inject-{}-{nanos}-{attempt}",
                std::process::id()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(Workspace { dir }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free name for a directory",
        ))
    }

    fn write(&self, name: &str, contents: &[u8]) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(self.dir.join(name))?
            .write_all(contents)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Which of gdb's streams a line came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

/// What the threads watching gdb tell the one that waits.
enum Heard {
    Line(Stream, Instant, String),
    Closed,
    Exited(Instant, Option<i32>),
}

/// gdb running: signalled through a pidfd (never a pid that may be taken again once it is reaped), its output
/// and its end heard on one channel.
struct Run {
    pidfd: OwnedFd,
    pid: u32,
    started: Instant,
    heard: Receiver<Heard>,
}

impl Run {
    fn start(gdb: &Path, workspace: &Path) -> io::Result<Run> {
        let golow = rustix::process::getpid();
        let mut command = Command::new(gdb);
        command
            .args(["-batch", "-nx", "--readnever", "-x", SCRIPT_FILE])
            .current_dir(workspace)
            // English messages, which golow reads; no symbol server asked about the target's files.
            .env("LC_ALL", "C")
            .env_remove("LANGUAGE")
            .env_remove("DEBUGINFOD_URLS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group: an interrupt at golow's terminal is golow's to pass on, at the right moment.
            .process_group(0);
        // SAFETY: between fork and exec only async-signal-safe calls (prctl, getppid) run.
        unsafe {
            command.pre_exec(move || {
                // If golow ends, gdb is interrupted: it abandons a call in progress and detaches. (The signal comes
                // when the thread that started gdb ends, which `schedule` keeps waiting until gdb has ended.)
                rustix::process::set_parent_process_death_signal(Some(Signal::INT))?;
                if rustix::process::getppid() != Some(golow) {
                    return Err(io::Error::other("golow ended"));
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = command.spawn()?;
        let pid = child.id();
        let pidfd = match Pid::from_raw(pid as i32).map(|p| pidfd_open(p, PidfdFlags::empty())) {
            Some(Ok(fd)) => fd,
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other("cannot watch gdb through a pidfd"));
            }
        };
        let (tell, heard) = mpsc::sync_channel(64);
        let out = child
            .stdout
            .take()
            .map(|s| (Stream::Out, Box::new(s) as Box<dyn Read + Send>));
        let err = child
            .stderr
            .take()
            .map(|s| (Stream::Err, Box::new(s) as Box<dyn Read + Send>));
        for (stream, reader) in out.into_iter().chain(err) {
            let tell = tell.clone();
            std::thread::spawn(move || read_lines(stream, reader, &tell));
        }
        std::thread::spawn(move || wait_for(child, &tell));
        Ok(Run {
            pidfd,
            pid,
            started,
            heard,
        })
    }

    fn signal(&self, signal: Signal) {
        let _ = pidfd_send_signal(&self.pidfd, signal);
    }

    /// Reads gdb's output until it has ended, interrupting it once `timeout` has passed.
    fn follow(self, timeout: Duration) -> Transcript {
        let mut transcript = Transcript::new(self.started);
        let mut deadline = self.started + timeout;
        let mut interrupts = 0;
        let mut open_streams = 2;
        let mut exited = false;
        while open_streams > 0 || !exited {
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.heard.recv_timeout(wait) {
                Ok(Heard::Line(stream, at, line)) => transcript.note(stream, at, line),
                Ok(Heard::Closed) => open_streams -= 1,
                Ok(Heard::Exited(at, code)) => {
                    exited = true;
                    transcript.ended = Some((at, code));
                    // Output still in a pipe comes at once; something else holding it open is not waited for.
                    deadline = deadline.min(Instant::now() + GRACE);
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) if exited => break,
                Err(RecvTimeoutError::Timeout) => {
                    transcript.timed_out = true;
                    if interrupts >= INTERRUPTS {
                        transcript.left_running = Some(self.pid);
                        break;
                    }
                    if interrupts == 0 || transcript.in_call {
                        self.signal(Signal::INT);
                        interrupts += 1;
                    } else {
                        // Interrupted and no longer calling into the target: ending gdb now only detaches it.
                        self.signal(Signal::KILL);
                        interrupts = INTERRUPTS;
                    }
                    deadline = Instant::now() + GRACE;
                }
            }
        }
        transcript
    }
}

/// Sends each line of `reader`, cut to `LINE` bytes, then that it closed.
fn read_lines(stream: Stream, reader: Box<dyn Read + Send>, tell: &SyncSender<Heard>) {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line_cut(&mut reader, &mut line, LINE) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                if tell
                    .send(Heard::Line(stream, Instant::now(), text))
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = tell.send(Heard::Closed);
}

/// Reads one line into `line`, keeping at most `most` bytes of it and dropping the rest; the bytes read.
fn read_line_cut(reader: &mut impl BufRead, line: &mut Vec<u8>, most: usize) -> io::Result<usize> {
    let mut total = 0;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, ends) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        let room = most.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = ends.unwrap_or(available.len());
        reader.consume(used);
        total += used;
        if ends.is_some() {
            return Ok(total);
        }
    }
}

fn wait_for(mut child: Child, tell: &SyncSender<Heard>) {
    let code = child.wait().ok().and_then(|status| status.code());
    let _ = tell.send(Heard::Exited(Instant::now(), code));
}

/// What gdb said and did, as golow heard it.
#[derive(Debug)]
struct Transcript {
    started: Instant,
    attaching: Option<Instant>,
    detached: Option<Instant>,
    /// Between golow's first call into the target and the last one's return.
    in_call: bool,
    queued: Option<i64>,
    mmap_failed: bool,
    nudged: bool,
    /// The LWP gdb's thread 1 is, which must be the process's main thread.
    thread_one: Option<u32>,
    errors: Vec<String>,
    ended: Option<(Instant, Option<i32>)>,
    timed_out: bool,
    /// gdb's pid when it would not end when interrupted (inside a call into the target) or killed (outside),
    /// and was left to finish.
    left_running: Option<u32>,
}

impl Transcript {
    fn new(started: Instant) -> Transcript {
        Transcript {
            started,
            attaching: None,
            detached: None,
            in_call: false,
            queued: None,
            mmap_failed: false,
            nudged: false,
            thread_one: None,
            errors: Vec::new(),
            ended: None,
            timed_out: false,
            left_running: None,
        }
    }

    fn note(&mut self, stream: Stream, at: Instant, line: String) {
        if stream == Stream::Err {
            if !line.is_empty() && self.errors.len() < ERRORS {
                self.errors.push(line);
            }
            return;
        }
        let mut words = line.split_whitespace();
        match words.next() {
            Some("GOLOW-ATTACHING") => self.attaching = Some(at),
            Some("GOLOW-CALLING") => self.in_call = true,
            Some("GOLOW-MMAP-FAILED") => {
                self.mmap_failed = true;
                self.in_call = false;
            }
            Some("GOLOW-RC") => {
                self.queued = words.next().and_then(|rc| rc.parse().ok());
                self.in_call = false;
            }
            Some("GOLOW-NUDGED") => self.nudged = true,
            Some("GOLOW-DETACHED") => self.detached = Some(at),
            _ => {
                if let Some(lwp) = thread_one(&line) {
                    self.thread_one = Some(lwp);
                }
            }
        }
    }

    fn outcome(&self, pid: u32, timeout: Duration) -> Result<Scheduled, Failure> {
        let failed =
            |why: String| Failure::Other(format!("could not load the step hook into {pid}: {why}"));
        if let Some(gdb) = self.left_running {
            return Err(failed(match self.in_call {
                true => format!(
                    "gdb did not return from its call into the process after {INTERRUPTS} interrupts; it was left \
                     to finish (gdb is process {gdb}), since killing it then would kill the process"
                ),
                false => format!("gdb did not end even when killed (gdb is process {gdb})"),
            }));
        }
        match self.queued {
            Some(0) => {}
            Some(-1) => {
                return Err(failed(
                    "its queue of pending calls is full (32); retry later".into(),
                ));
            }
            Some(rc) => return Err(failed(format!("Py_AddPendingCall returned {rc}"))),
            None if self.mmap_failed => return Err(failed("mmap of one page failed in it".into())),
            None => return Err(self.failure_before_queueing(pid, timeout)),
        }
        if self.thread_one.is_some_and(|lwp| lwp != pid) {
            return Err(failed(format!(
                "gdb's thread 1 was LWP {}, not the main thread; the file may run late",
                self.thread_one.unwrap_or(0)
            )));
        }
        let ended = self.ended.map_or_else(Instant::now, |(at, _)| at);
        let stopped = match self.attaching {
            Some(attaching) => self
                .detached
                .unwrap_or(ended)
                .saturating_duration_since(attaching),
            None => Duration::ZERO,
        };
        Ok(Scheduled {
            stopped,
            gdb: ended.saturating_duration_since(self.started),
            nudged: self.nudged,
        })
    }

    fn failure_before_queueing(&self, pid: u32, timeout: Duration) -> Failure {
        let said = |words: &str| self.errors.iter().find(|line| line.contains(words));
        if said("No such process").is_some() || said("/exe: No such file").is_some() {
            return Failure::Gone;
        }
        if let Some(line) = said("already traced by process") {
            let tracer = line
                .rsplit(' ')
                .next()
                .and_then(|n| n.trim_end_matches('.').parse().ok());
            if let Some(tracer) = tracer {
                return Failure::TracedBy(tracer);
            }
        }
        if said("Operation not permitted").is_some() {
            return Failure::NotPermitted;
        }
        let why = if self.timed_out {
            format!(
                "gdb did not finish within {} s and was interrupted; nothing was queued",
                timeout.as_secs_f64()
            )
        } else {
            match self
                .errors
                .iter()
                .find(|line| !line.starts_with("warning:"))
                .or(self.errors.first())
            {
                Some(line) => one_line(line, 200),
                None => match self.ended {
                    Some((_, Some(code))) => {
                        format!("gdb ended (exit status {code}) before queueing the call")
                    }
                    _ => "gdb ended before queueing the call".to_string(),
                },
            }
        };
        Failure::Other(format!("could not load the step hook into {pid}: {why}"))
    }
}

/// The LWP of gdb's thread 1, from `[Switching to thread 1 (Thread 0x… (LWP 42))]` or `[Current thread is 1 (…)]`
/// (`(process 42)` where gdb has no thread library to ask).
fn thread_one(line: &str) -> Option<u32> {
    let rest = line
        .strip_prefix("[Switching to thread 1 (")
        .or_else(|| line.strip_prefix("[Current thread is 1 ("))?;
    let at = rest
        .find("LWP ")
        .map(|i| i + 4)
        .or_else(|| rest.find("process ").map(|i| i + 8))?;
    let digits: String = rest[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_is_found_on_path_or_its_absence_said() {
        let dir = tempfile::tempdir().unwrap();
        let found = find(Some(OsStr::new(&format!(
            "{}:/usr/bin",
            dir.path().display()
        ))));
        assert_eq!(found, Ok(PathBuf::from("/usr/bin/gdb")));
        let missing = find(Some(dir.path().as_os_str())).unwrap_err();
        assert!(missing.0.starts_with("golow attach needs gdb"), "{missing}");
        assert!(find(None).is_err());
        assert!(
            find(Some(OsStr::new("usr/bin"))).is_err(),
            "a relative directory on PATH is not searched"
        );
    }

    #[test]
    fn thread_one_is_read_from_what_gdb_prints() {
        assert_eq!(
            thread_one("[Switching to thread 1 (Thread 0x7f7e9d7b3040 (LWP 3377))]"),
            Some(3377)
        );
        assert_eq!(
            thread_one("[Current thread is 1 (Thread 0x7f (LWP 12))]"),
            Some(12)
        );
        assert_eq!(thread_one("[Current thread is 1 (process 99)]"), Some(99));
        assert_eq!(
            thread_one("[Switching to thread 2 (Thread 0x7f (LWP 13))]"),
            None
        );
        assert_eq!(
            thread_one("#0  0x00007f in clock_nanosleep () from libc.so.6"),
            None
        );
    }

    #[test]
    fn long_lines_are_cut_and_the_rest_dropped() {
        let text = format!("{}\nshort\n{}", "x".repeat(5000), "y".repeat(10));
        let mut reader = BufReader::with_capacity(64, text.as_bytes());
        let mut line = Vec::new();
        assert_eq!(read_line_cut(&mut reader, &mut line, 100).unwrap(), 5001);
        assert_eq!(line, vec![b'x'; 100]);
        line.clear();
        read_line_cut(&mut reader, &mut line, 100).unwrap();
        assert_eq!(line, b"short");
        line.clear();
        assert_eq!(read_line_cut(&mut reader, &mut line, 100).unwrap(), 10);
        line.clear();
        assert_eq!(read_line_cut(&mut reader, &mut line, 100).unwrap(), 0);
    }

    fn transcript(lines: &[(Stream, &str)]) -> Transcript {
        let started = Instant::now();
        let mut t = Transcript::new(started);
        for (stream, line) in lines {
            t.note(*stream, Instant::now(), line.to_string());
        }
        t.ended = Some((Instant::now(), Some(1)));
        t
    }

    #[test]
    fn gdbs_words_become_the_failure_they_mean() {
        let gone = transcript(&[(Stream::Err, "ptrace: No such process.")]);
        assert_eq!(gone.outcome(5, Duration::from_secs(1)), Err(Failure::Gone));
        let traced = transcript(&[
            (
                Stream::Err,
                "warning: process 5 is already traced by process 77",
            ),
            (Stream::Err, "ptrace: Operation not permitted."),
        ]);
        assert_eq!(
            traced.outcome(5, Duration::from_secs(1)),
            Err(Failure::TracedBy(77))
        );
        let other = transcript(&[
            (Stream::Err, "warning: something harmless"),
            (Stream::Err, "Cannot access memory at address 0x1234"),
        ]);
        assert_eq!(
            other.outcome(5, Duration::from_secs(1)),
            Err(Failure::Other(
                "could not load the step hook into 5: Cannot access memory at address 0x1234"
                    .into()
            ))
        );
        let full = transcript(&[(Stream::Out, "GOLOW-CALLING"), (Stream::Out, "GOLOW-RC -1")]);
        assert!(
            matches!(full.outcome(5, Duration::from_secs(1)), Err(Failure::Other(l)) if l.contains("full"))
        );
    }

    #[test]
    fn a_queued_call_from_the_main_thread_is_scheduled_and_from_another_refused() {
        let ok = transcript(&[
            (Stream::Out, "GOLOW-ATTACHING"),
            (Stream::Out, "[Current thread is 1 (Thread 0x7f (LWP 5))]"),
            (Stream::Out, "GOLOW-CALLING"),
            (Stream::Out, "GOLOW-BUF 0x7f0000"),
            (Stream::Out, "GOLOW-RC 0"),
            (Stream::Out, "GOLOW-NUDGED"),
            (Stream::Out, "GOLOW-DETACHED"),
        ]);
        assert!(!ok.in_call);
        let scheduled = ok.outcome(5, Duration::from_secs(1)).unwrap();
        assert!(scheduled.nudged);
        assert!(scheduled.stopped <= scheduled.gdb);
        let other_thread = transcript(&[
            (Stream::Out, "[Current thread is 1 (Thread 0x7f (LWP 6))]"),
            (Stream::Out, "GOLOW-RC 0"),
        ]);
        assert!(other_thread.outcome(5, Duration::from_secs(1)).is_err());
    }

    /// A python that loops for `seconds` (busy, so that its main thread makes no system call of its own) and
    /// prints "done"; started once it runs.
    fn looping_python(seconds: u32) -> std::process::Child {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let target = Command::new(python)
            .args([
                "-c",
                &format!(
                    "import sys, time\nopen(sys.argv[1], 'w').close()\nt = time.monotonic()\n\
                     while time.monotonic() - t < {seconds}: pass\nprint('done')"
                ),
            ])
            .arg(&ready)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        while !ready.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        target
    }

    /// The target's real C API but for one address: libc's `sleep` where `Py_AddPendingCall` would be, called
    /// with 5, so that gdb's second call into the target lasts five seconds.
    fn lasting_api(pid: u32) -> Api {
        use super::super::symbols::{Exports, Kind};
        use super::super::{cpython, permission, process};
        let process = process::Process::open(pid).unwrap();
        let status = process.status().unwrap();
        let access = permission::check(&process, &status).unwrap();
        let api = cpython::Interpreter::find(&process, &access)
            .unwrap()
            .c_api(&process)
            .unwrap();
        let libc = process
            .mapped_files()
            .unwrap()
            .into_iter()
            .find(|m| String::from_utf8_lossy(&m.path).contains("/libc.so"))
            .unwrap();
        let mut in_root = b"root".to_vec();
        in_root.extend_from_slice(&libc.path);
        let exports = Exports::read(process.open_file_bytes(&in_root).unwrap(), |n| {
            n == b"sleep"
        })
        .unwrap();
        Api {
            add_pending_call: exports
                .address("sleep", Kind::Function, libc.start)
                .unwrap(),
            run_simple_string: 5,
            ..api
        }
    }

    /// Schedules into `pid` with gdb's second call lasting five seconds.
    fn schedule_lasting(pid: u32, timeout: Duration) -> Result<Scheduled, Failure> {
        let gdb = find(std::env::var_os("PATH").as_deref()).unwrap();
        schedule(&gdb, pid, &lasting_api(pid), "pass", timeout)
    }

    /// The target ended as it would have without golow: "done", nothing else, exit status 0.
    fn ran_on(target: std::process::Child) {
        let out = target.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        assert!(out.status.success(), "{}", out.status);
    }

    /// gdb interrupted inside a call into the target abandons it and restores the thread, and the target runs
    /// on as if nothing happened. (Killed there instead, gdb would leave the thread to return to nowhere.)
    #[test]
    fn a_timeout_inside_a_call_into_the_target_interrupts_gdb_and_the_target_runs_on() {
        let target = looping_python(8);
        let pid = target.id();
        let failure = schedule_lasting(pid, Duration::from_secs(1)).unwrap_err();
        assert_eq!(
            failure,
            Failure::Other(format!(
                "could not load the step hook into {pid}: gdb did not finish within 1 s and was interrupted; \
                 nothing was queued"
            ))
        );
        ran_on(target);
    }

    /// The variable that hands the target's pid to this test binary run again, to die in gdb's call.
    const DIES_IN_CALL: &str = "GOLOW_TEST_INJECT_DIES_IN_CALL";

    /// golow killed (SIGKILL) while gdb is inside its call into the target: gdb gets SIGINT as its parent-death
    /// signal, abandons the call, detaches and ends, and the target runs on.
    #[test]
    fn golow_killed_during_a_call_into_the_target_interrupts_gdb_and_the_target_runs_on() {
        let target = looping_python(10);
        let pid = target.id();
        let mut golow = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "inject::gdb::tests::dies_in_call", "--ignored"])
            .env(DIES_IN_CALL, pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The call sleeps in the main thread, which otherwise makes no system call.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while super::super::main_thread_waits_in(pid).as_deref() != Some("clock_nanosleep") {
            assert!(
                std::time::Instant::now() < deadline,
                "gdb never called into the target"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let gdb = super::super::process::Status::parse(pid, &status).tracer;
        assert_ne!(gdb, 0, "gdb holds the target");
        golow.kill().unwrap();
        golow.wait().unwrap();
        while Path::new(&format!("/proc/{gdb}")).exists()
            && std::fs::read_to_string(format!("/proc/{gdb}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(std::time::Instant::now() < deadline, "gdb outlived golow");
            std::thread::sleep(Duration::from_millis(10));
        }
        ran_on(target);
    }

    /// Run by the test above in a process of its own, which it kills while gdb is inside its call.
    #[test]
    #[ignore = "run by golow_killed_during_a_call_into_the_target_interrupts_gdb_and_the_target_runs_on"]
    fn dies_in_call() {
        let pid: u32 = std::env::var(DIES_IN_CALL).unwrap().parse().unwrap();
        let _ = schedule_lasting(pid, Duration::from_secs(60));
    }

    #[test]
    fn the_script_calls_the_addresses_it_is_given_and_reads_no_symbols() {
        let api = Api {
            mmap: 0x1000,
            add_pending_call: 0x2000,
            run_simple_string: 0x3000,
        };
        let script = script(42, &api);
        assert!(script.starts_with("set auto-solib-add off\nset auto-load off\n"));
        assert!(script.find("set auto-load off") < script.find("file /proc/42/exe"));
        assert!(script.contains("attach 42\nthread 1\n"));
        assert!(script.contains(")0x1000)(0, 4096, 3, 0x22, -1, 0)"));
        assert!(script.contains(")0x2000)(0x3000, $golow_buf)"));
        assert!(script.ends_with("detach\necho GOLOW-DETACHED\\n\nquit\n"));
    }
}
