//! golow against what works against it, with real parts: a stderr nobody reads and a recorder's thread stopped by a
//! tracer while `/metrics` is scraped; a command whose processes say hello first, lie about their pid or rank, or
//! connect from outside it; and a process writing impossible numbers and huge names on the event socket itself.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStderr, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{golow, golow_command, headless, summary_of, text, with_venv_path, worker};

/// How long a scrape may take: the session answers in milliseconds, and a loaded machine is given far more.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

fn write(dir: &Path, name: &str, source: &str) {
    std::fs::write(dir.join(name), source).unwrap();
}

/// A headless session serving its metrics on a port the system chose, its stderr piped; killed if left running.
struct Served {
    golow: Child,
    addr: String,
    /// golow's stderr while nobody reads it, then what a thread of this test read of it.
    stderr: Option<BufReader<ChildStderr>>,
    read: Option<JoinHandle<String>>,
}

impl Served {
    fn start(tmp: &Path, args: &[&str]) -> Served {
        let mut golow = with_venv_path(&mut golow_command(tmp))
            .args(["run", "--headless"])
            .args(args)
            .args(["--metrics-addr", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(golow.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "golow never said where it serves its metrics"
            );
            if let Some(rest) = line.trim().strip_prefix("golow: metrics at http://") {
                break rest.trim_end_matches("/metrics").to_string();
            }
        };
        Served {
            golow,
            addr,
            stderr: Some(stderr),
            read: None,
        }
    }

    /// Reads golow's stderr from now on, on a thread of its own.
    fn read_stderr(&mut self) {
        if let Some(mut stderr) = self.stderr.take() {
            self.read = Some(std::thread::spawn(move || {
                let mut said = String::new();
                stderr.read_to_string(&mut said).unwrap();
                said
            }));
        }
    }

    /// A scrape of /metrics within `SCRAPE_TIMEOUT`: its body, or why there was none.
    fn scrape(&self) -> Result<String, String> {
        let started = Instant::now();
        let failed = |e: std::io::Error| format!("no answer in {:?}: {e}", started.elapsed());
        let addr = self.addr.parse().unwrap();
        let mut stream = TcpStream::connect_timeout(&addr, SCRAPE_TIMEOUT).map_err(failed)?;
        stream.set_read_timeout(Some(SCRAPE_TIMEOUT)).unwrap();
        write!(
            stream,
            "GET /metrics HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .map_err(failed)?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).map_err(failed)?;
        match answer.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.0 200") => Ok(body.to_string()),
            _ => Err(format!("not an answer: {answer}")),
        }
    }

    /// Reads the rest of golow's stderr and waits for its end: its exit code and what it said.
    fn finish(mut self) -> (Option<i32>, String) {
        self.read_stderr();
        let code = self.golow.wait().unwrap().code();
        let said = self
            .read
            .take()
            .map(|r| r.join().unwrap())
            .unwrap_or_default();
        (code, said)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.golow.kill();
        let _ = self.golow.wait();
    }
}

/// Waits for `path` to exist.
fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A script that waits for the file `go`, prints `lines` lines as fast as it can, and says it did in the file
/// `printed`.
fn flood(lines: u32) -> String {
    format!(
        "\
import os, sys, time
while not os.path.exists('go'):
    time.sleep(0.05)
for i in range({lines}):
    print(f'line {{i:07d}} ' + 'x' * 60)
sys.stdout.flush()
open('printed', 'w').close()
"
    )
}

/// The records of `recording` in `dir`, as `golow export --format json` writes them.
fn exported(dir: &Path, recording: &str) -> String {
    let out = golow(
        dir,
        &[
            "export",
            recording,
            "--format",
            "json",
            "-o",
            "exported.json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::fs::read_to_string(dir.join("exported.json")).unwrap()
}

/// golow's thread named `name`, once it is there.
fn thread_named(pid: u32, name: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
            let task = task.unwrap().path();
            if std::fs::read_to_string(task.join("comm")).is_ok_and(|comm| comm.trim() == name) {
                return task.file_name().unwrap().to_str().unwrap().parse().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "golow has no thread {name}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One thread of another process stopped by this one as a debugger stops it (`PTRACE_INTERRUPT`), its process
/// running on; it goes on when dropped.
struct Stopped(i32);

impl Stopped {
    fn thread(tid: i32) -> Stopped {
        let none = std::ptr::null_mut::<libc::c_void>();
        // SAFETY: ptrace(2) and waitpid(2) on one thread of a child of this test, as a debugger does.
        unsafe {
            let seized = libc::ptrace(libc::PTRACE_SEIZE, tid, none, none);
            assert_eq!(seized, 0, "{}", std::io::Error::last_os_error());
            let interrupted = libc::ptrace(libc::PTRACE_INTERRUPT, tid, none, none);
            assert_eq!(interrupted, 0, "{}", std::io::Error::last_os_error());
            let mut status = 0;
            assert_eq!(libc::waitpid(tid, &mut status, libc::__WALL), tid);
        }
        Stopped(tid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let none = std::ptr::null_mut::<libc::c_void>();
        // SAFETY: as in `thread`, on the thread it stopped.
        unsafe {
            libc::ptrace(libc::PTRACE_DETACH, self.0, none, none);
        }
    }
}

/// What golow writes (the recorder's frames, a command's output passed through) blocks only golow's session
/// thread: three scrapes in a row answer while it waits.
fn scrapes_answer_while_held_up(served: &Served, tmp: &Path) {
    write(tmp, "go", "");
    // The flood fills what lies between the command and the writer that does not take it, in well under this.
    std::thread::sleep(Duration::from_secs(3));
    for i in 0..3 {
        let scrape = served.scrape();
        assert!(scrape.is_ok(), "scrape {i}: {}", scrape.unwrap_err());
    }
    assert!(
        !tmp.join("printed").exists(),
        "the command was not held up: the test proves nothing"
    );
}

#[test]
fn a_stderr_nobody_reads_holds_up_no_scrape() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "flood.py", &flood(50_000));
    let served = Served::start(
        tmp.path(),
        &["--cmd", "flood=python flood.py", "--no-record"],
    );
    // From here nobody reads golow's stderr, where the command's lines are passed through.
    scrapes_answer_while_held_up(&served, tmp.path());
    let (code, said) = served.finish();
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("line 0049999"), "{said}");
}

#[test]
fn a_stalled_recorder_holds_up_no_scrape() {
    let tmp = tempfile::tempdir().unwrap();
    // ~120 bytes a record: 24 MB, three times what the recorder lets wait for it.
    let lines = 200_000;
    write(tmp.path(), "flood.py", &flood(lines));
    let mut served = Served::start(
        tmp.path(),
        &["--cmd", "flood=python flood.py", "--record", "flood.golow"],
    );
    // The passed-through lines must not hold golow up here: only the recorder does.
    served.read_stderr();
    let recorder = Stopped::thread(thread_named(served.golow.id(), "golow-recorder"));
    scrapes_answer_while_held_up(&served, tmp.path());
    drop(recorder);
    let (code, said) = served.finish();
    assert_eq!(code, Some(0), "{said}");
    // Nothing was lost while the recorder stood still.
    let exported = exported(tmp.path(), "flood.golow");
    let recorded = exported
        .matches(r#""type":"output","stream":"stdout""#)
        .count();
    assert_eq!(recorded, lines as usize);
}

const DECOY: &str = "\
import time, torch
model = torch.nn.Linear(8, 2)
with torch.no_grad():
    for _ in range(20):
        model(torch.randn(4, 8))
# Long enough for golow to take its connection: a process gone before then cannot be placed in the command.
time.sleep(1)
";

const TRAINER: &str = "\
import json, os, socket, subprocess, sys, time
import torch

path = os.environ['GOLOW_EVENT_SOCKET']
# A process of the command that evaluates a model: it says hello and reports its passes before this one does.
subprocess.run([sys.executable, 'decoy.py'], check=True)
# A connection that says it is another process, rank 0 of 2, and claims a step.
lies = [
    {'type': 'script_process', 'pid': 1, 'rank': 0, 'local_rank': 0, 'world_size': 2, 'python': '3.11.7',
     'torch': None, 'threads': 1},
    {'type': 'optimizer_step', 'step': 0, 'interval_ms': None},
]
liar = socket.socket(socket.AF_UNIX)
liar.connect(path)
liar.sendall(''.join(json.dumps(e) + '\\n' for e in lies).encode())
# A process outside the command (the test) connects meanwhile.
with open('socket.path', 'w') as f:
    f.write(path)
while not os.path.exists('outsider.done'):
    time.sleep(0.05)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(300):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
with open('trainer.pid', 'w') as f:
    f.write(str(os.getpid()))
";

#[test]
fn the_process_that_trains_is_the_primary_and_no_one_speaks_for_another() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "decoy.py", DECOY);
    write(tmp.path(), "train.py", TRAINER);
    let golow = with_venv_path(&mut headless(
        tmp.path(),
        &["--cmd", "train=python train.py", "--no-record"],
    ))
    .spawn()
    .unwrap();
    wait_for_file(&tmp.path().join("socket.path"));
    let path = std::fs::read_to_string(tmp.path().join("socket.path")).unwrap();
    let me = std::process::id();
    let claim = format!(
        "{{\"type\":\"script_process\",\"pid\":{me},\"rank\":0,\"local_rank\":0,\"world_size\":2,\"python\":\"3.11.7\",\"torch\":null,\"threads\":1}}\n\
         {{\"type\":\"optimizer_step\",\"step\":0,\"interval_ms\":null}}\n"
    );
    let mut outsider = std::os::unix::net::UnixStream::connect(path).unwrap();
    // golow may close the connection before the claim is whole.
    let _ = outsider.write_all(claim.as_bytes());
    write(tmp.path(), "outsider.done", "");
    let out = golow.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let summary = summary_of(tmp.path());
    let w = worker(&summary, "train");
    assert_eq!(w["steps"], 300, "the trainer's steps are the worker's: {w}");
    let trainer: u64 = std::fs::read_to_string(tmp.path().join("trainer.pid"))
        .unwrap()
        .parse()
        .unwrap();
    let processes: Vec<(u64, u64, u64)> = w["script"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let n = |field: &str| p[field].as_u64().unwrap();
            (n("pid"), n("steps"), n("forward_passes"))
        })
        .collect();
    assert_eq!(processes.len(), 2, "the decoy and the trainer alone: {w}");
    assert!(processes.contains(&(trainer, 300, 1)), "{w}");
    assert!(
        processes
            .iter()
            .any(|&(pid, steps, passes)| pid != trainer && steps == 0 && passes == 20),
        "{w}"
    );
    assert_eq!(
        w["script"]["forward_passes"], 0,
        "the decoy's passes are not the worker's: {w}"
    );
    let refused = &w["protocol_errors"];
    assert_eq!(refused["count"], 2, "the liar and the outsider: {w}");
    let first = refused["first"].as_str().unwrap();
    assert!(first.contains("said it is pid 1"), "{first}");
}

const HOSTILE: &str = "\
import json, os, socket
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ['GOLOW_EVENT_SOCKET'])
name = 'n' * 1_000_000

def send(**event):
    s.sendall((json.dumps(event) + '\\n').encode())

send(type='script_process', pid=os.getpid(), rank=None, local_rank=None, world_size=None, python='3' * 1_000_000,
     torch=None, threads=1)
send(type='optimizer', optimizer=0, lr=0.1, **{'class': name})
for step in range(41):
    send(type='optimizer_step', step=step, interval_ms=None if step == 0 else 10.0)
for step, interval in [(41, -5), (42, 0), (43, -1e9), (44, 1e308), (3, 10.0)]:
    send(type='optimizer_step', step=step, interval_ms=interval)
send(type='scalar', name=name, value=1.0)
send(type='phase', name=name)
for step in range(41, 61):
    send(type='optimizer_step', step=step, interval_ms=10.0)
s.close()
";

#[test]
fn impossible_numbers_are_refused_and_names_cut_before_they_are_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "hostile.py", HOSTILE);
    let out = with_venv_path(&mut headless(
        tmp.path(),
        &[
            "--cmd",
            "hostile=python hostile.py",
            "--record",
            "hostile.golow",
        ],
    ))
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary = summary_of(tmp.path());
    let w = worker(&summary, "hostile");
    assert_eq!(w["steps"], 61, "{w}");
    let refused = &w["protocol_errors"];
    assert_eq!(refused["count"], 5, "{w}");
    let first = refused["first"].as_str().unwrap();
    assert!(
        first.starts_with("optimizer_step refused: interval_ms -5.0"),
        "{first}"
    );
    let p99 = w["step_time_ms"]["p99"].as_f64().unwrap();
    assert!((9.9..10.1).contains(&p99), "{p99} ms");

    let exported = exported(tmp.path(), "hostile.golow");
    let longest = exported.lines().map(str::len).max().unwrap();
    assert!(longest < 4096, "a recorded line of {longest} bytes");
    assert!(exported.contains(&format!("\"name\":\"{}\"", "n".repeat(64))));
}
