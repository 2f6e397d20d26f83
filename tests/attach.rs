//! `golow attach PID…` on real processes started outside golow: what it reads of them and their trees, and that it
//! never touches them: no signal, no thread, nothing of its own left when it ends, however it ends.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::tmux::{Tmux, pid_in};
use common::{golow, golow_command, summary, text, worker};

/// A busy Python loop that notes every signal it hears in `heard`, with a child that holds 150 MiB.
const TARGET: &str = r#"
import signal, subprocess, sys, time
heard, ready = sys.argv[1], sys.argv[2]
def note(number, _frame):
    with open(heard, "a") as f:
        f.write(f"signal {number}\n")
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT,
          signal.SIGPIPE, signal.SIGALRM, signal.SIGWINCH):
    signal.signal(s, note)
child = subprocess.Popen([sys.executable, "-c",
    "import sys, time; b = b'x' * (150 << 20); open(sys.argv[1], 'w').write('1'); time.sleep(120)", ready])
deadline = time.time() + 120
while time.time() < deadline:
    sum(range(10000))
"#;

/// A process started by a shell that exits at once (not golow's child, nor this test's), leading a process group of
/// its own, which ends with the test.
struct Outside {
    pid: u32,
}

impl Drop for Outside {
    fn drop(&mut self) {
        // SAFETY: ends the process group this test started.
        unsafe { libc::kill(-(self.pid as i32), libc::SIGKILL) };
    }
}

fn started_outside(tmp: &Path, command: &str) -> Outside {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("setsid {command} >/dev/null 2>&1 & echo $!"))
        .current_dir(tmp)
        .output()
        .unwrap();
    let pid: u32 = text(&out.stdout).trim().parse().unwrap();
    // Named after its program once setsid has run it (or gone, for a short one).
    wait_until("the program to start", || {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map_or(true, |cmdline| !cmdline.starts_with(b"setsid\0"))
    });
    Outside { pid }
}

/// The busy target, once its child holds its memory: its pid, and the file its signals are noted in.
fn busy_target(tmp: &Path) -> (Outside, std::path::PathBuf) {
    std::fs::write(tmp.join("target.py"), TARGET).unwrap();
    let ready = tmp.join("ready");
    let target = started_outside(tmp, "python3 target.py heard ready");
    wait_until("the target's child to hold its memory", || ready.exists());
    (target, tmp.join("heard"))
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap()
        .trim()
        .to_string()
}

/// The target is running, heard no signal and has none pending, and has as many threads as before.
fn untouched(pid: u32, heard: &Path, threads: &str) {
    // SAFETY: signal 0 only asks whether the process exists.
    assert_eq!(unsafe { libc::kill(pid as i32, 0) }, 0, "the target runs");
    let state = status_field(pid, "State:");
    assert!(state.starts_with('R') || state.starts_with('S'), "{state}");
    assert!(
        !heard.exists(),
        "{}",
        std::fs::read_to_string(heard).unwrap()
    );
    assert_eq!(status_field(pid, "SigPnd:"), "0000000000000000");
    assert_eq!(status_field(pid, "ShdPnd:"), "0000000000000000");
    assert_eq!(status_field(pid, "TracerPid:"), "0");
    assert_eq!(
        status_field(pid, "Threads:"),
        threads,
        "golow left a thread"
    );
}

/// Nothing golow started (its keeper, a worker) is left once it ended.
fn nothing_of_golows_left(tmp: &Path) {
    wait_until("golow's own processes to end", || {
        pid_in(env!("CARGO_BIN_EXE_golow"), tmp).is_none()
    });
}

#[test]
fn headless_attach_reads_the_tree_for_its_duration_and_leaves_the_target_running() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, heard) = busy_target(tmp.path());
    let pid = target.pid;
    let threads = status_field(pid, "Threads:");
    let json = tmp.path().join("summary.json");
    let recording = tmp.path().join("attach.golow");
    let out = golow(
        tmp.path(),
        &[
            "attach",
            &pid.to_string(),
            "--headless",
            "--duration",
            "2",
            "--interval",
            "100",
            "--record",
            recording.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    untouched(pid, &heard, &threads);
    nothing_of_golows_left(tmp.path());

    let summary = summary(&json);
    assert_eq!(summary["config"]["attached"]["target"], pid);
    let target = worker(&summary, "target");
    assert_eq!(target["status"], "detached");
    // The child's 150 MiB are the tree's: the target's own process holds a tenth of that.
    let peak = target["peak_host_rss_bytes"].as_u64().unwrap();
    assert!(peak > 140 << 20, "{peak}");
    // The child's thread is the tree's too.
    assert!(
        target["peak_host_threads"].as_u64().unwrap() >= 2,
        "{target}"
    );
    assert!(
        target["host_cpu_percent_mean"].as_f64().unwrap() > 0.0,
        "{target}"
    );
    // Its progress on stderr ends with its status.
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("target ") && l.trim_end().ends_with("detached")),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("target: pid {pid} and its tree: CPU ")),
        "{stdout}"
    );
    assert!(
        target["notice"]
            .as_str()
            .unwrap()
            .contains("/proc and NVML readings only"),
        "{target}"
    );
    assert!(stdout.contains("target       detached"), "{stdout}");

    // What was recorded replays to the same summary.
    let replayed = golow(
        tmp.path(),
        &["replay", recording.to_str().unwrap(), "--headless"],
    );
    assert_eq!(
        replayed.status.code(),
        Some(0),
        "{}",
        text(&replayed.stderr)
    );
    let rows = |table: &str| -> Vec<String> {
        table
            .lines()
            .filter(|l| l.starts_with("target"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(rows(&text(&replayed.stdout)), rows(&stdout));
    assert!(!rows(&stdout).is_empty());
}

#[test]
fn a_target_that_ends_ends_its_worker_and_the_session_when_all_have_ended() {
    let tmp = tempfile::tempdir().unwrap();
    let sleeps = [
        started_outside(tmp.path(), "sleep 3"),
        started_outside(tmp.path(), "sleep 4"),
    ];
    let (short, long) = (sleeps[0].pid, sleeps[1].pid);
    let summary = attached_summary(tmp.path(), &[&short.to_string(), &long.to_string()]);
    // Two `sleep`s: each name gets its pid.
    for pid in [short, long] {
        let w = worker(&summary, &format!("sleep-{pid}"));
        assert_eq!(w["status"], "ended", "{w}");
        assert!(w["error"].is_null(), "{w}");
    }
    nothing_of_golows_left(tmp.path());
}

/// The summary of `golow attach --headless --no-record ARGS`, which must exit 0.
fn attached_summary(tmp: &Path, args: &[&str]) -> serde_json::Value {
    let json = tmp.join("summary.json");
    let out = golow_command(tmp)
        .args(["attach", "--headless", "--no-record", "--summary-json"])
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    summary(&json)
}

/// golow attached to the busy target until `signal` ends it.
fn signalled_while_attached(signal: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let (target, heard) = busy_target(tmp.path());
    let pid = target.pid;
    let threads = status_field(pid, "Threads:");
    let mut golow = golow_command(tmp.path())
        .args(["attach", &pid.to_string(), "--headless", "--no-record"])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(golow.stderr.take().unwrap()),
        &mut said,
    )
    .unwrap();
    let addr = said
        .trim()
        .strip_prefix("golow: metrics at http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{said}"))
        .to_string();
    // The session runs once its metrics hold a reading of the target's tree.
    wait_until("a reading of the target", || {
        common::get(&addr, "/metrics").1.lines().any(|l| {
            l.starts_with("golow_process_resident_memory_bytes{") && l.contains("worker=\"target\"")
        })
    });
    // SAFETY: signals the golow this test started.
    unsafe { libc::kill(golow.id() as i32, signal) };
    let status = golow.wait().unwrap();
    if signal == libc::SIGTERM {
        assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    }
    untouched(pid, &heard, &threads);
    nothing_of_golows_left(tmp.path());
}

#[test]
fn sigterm_to_golow_detaches_and_leaves_the_target_running() {
    signalled_while_attached(libc::SIGTERM);
}

#[test]
fn sigkill_to_golow_leaves_the_target_running() {
    signalled_while_attached(libc::SIGKILL);
}

/// `golow attach ARGS` refuses in one line with exit 2, naming `expected`.
fn refuses(tmp: &Path, args: &[&str], expected: &str) {
    let mut command = golow_command(tmp);
    command.arg("attach").args(args).arg("--headless");
    refuses_command(command, expected);
}

fn refuses_command(mut command: Command, expected: &str) {
    let out = command.output().unwrap();
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].contains(expected), "'{expected}' in: {stderr}");
}

/// A kernel thread /proc shows here, where one is visible (none is inside a PID namespace).
fn a_kernel_thread() -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let flags: u32 = stat
            .rsplit(')')
            .next()?
            .split_whitespace()
            .nth(6)?
            .parse()
            .ok()?;
        (flags & 0x0020_0000 != 0).then_some(pid)
    })
}

#[test]
fn every_bad_pid_gets_its_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    refuses(t, &[], "name a PID to attach to");
    refuses(t, &["train.py"], "'train.py' is not a process ID");
    refuses(t, &["-5"], "'-5' is not a process ID");
    refuses(t, &["0"], "'0' is not a process ID");
    let gone = started_outside(t, "true").pid;
    wait_until("the process to be gone", || {
        !Path::new(&format!("/proc/{gone}")).exists()
    });
    refuses(t, &[&gone.to_string()], &format!("process {gone} is gone"));
    let ancestor = std::process::id().to_string();
    refuses(t, &[&ancestor], "one of golow's ancestors");
    let thread = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|tid| *tid != ancestor)
        .expect("a test binary runs several threads");
    refuses(t, &[&thread], "is a thread, not a process");
    let sleeping = started_outside(t, "sleep 30");
    let twice = sleeping.pid.to_string();
    refuses(
        t,
        &[&twice, &twice],
        &format!("process {twice} is named twice"),
    );
    let mut itself = Command::new("sh");
    itself.arg("-c").arg(format!(
        "exec {} attach $$ --headless",
        env!("CARGO_BIN_EXE_golow")
    ));
    refuses_command(itself, "is golow itself");
    if let Some(kernel) = a_kernel_thread() {
        refuses(t, &[&kernel.to_string()], "is a kernel thread");
    }
    drop(sleeping);
    assert!(
        std::fs::read_dir(t).unwrap().next().is_none(),
        "nothing left"
    );
}

#[test]
fn a_launchers_children_with_rank_in_their_environment_are_its_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let rank = "import sys, time; b = b'x' * (40 << 20); open(sys.argv[1], 'w').write('1'); time.sleep(60)";
    std::fs::write(
        tmp.path().join("launch.sh"),
        format!(
            "RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 -c \"{rank}\" ready-0 &\n\
             RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 python3 -c \"{rank}\" ready-1 &\n\
             wait\n"
        ),
    )
    .unwrap();
    let launcher = started_outside(tmp.path(), "sh launch.sh");
    wait_until("both ranks to hold their memory", || {
        ["ready-0", "ready-1"]
            .iter()
            .all(|f| tmp.path().join(f).exists())
    });
    let summary = attached_summary(tmp.path(), &[&launcher.pid.to_string(), "--duration", "2"]);
    let launch = worker(&summary, "sh");
    let ranks = launch["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("{launch}"));
    let numbers: Vec<u64> = ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1], "{launch}");
    for rank in ranks {
        let peak = rank["peak_host_rss_bytes"].as_u64().unwrap();
        assert!(peak > 30 << 20, "{launch}");
    }
}

#[test]
fn the_live_view_opens_on_an_attached_process_and_q_detaches() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, heard) = busy_target(tmp.path());
    let pid = target.pid;
    let threads = status_field(pid, "Threads:");
    let done = tmp.path().join("exit-code");
    let command = format!(
        "cd {tmp} && TMPDIR={tmp} {golow} attach {pid} --no-record; echo $? > {done}; sleep 30",
        tmp = tmp.path().display(),
        golow = env!("CARGO_BIN_EXE_golow"),
        done = done.display(),
    );
    let tmux = Tmux::start(&command, 160, 48);
    tmux.wait_for("the attached target", Duration::from_secs(60), |s| {
        s.contains("target") && s.contains("attached")
    });
    assert_eq!(tmux.quit(&done, Duration::from_secs(30)), "0");
    untouched(pid, &heard, &threads);
    nothing_of_golows_left(tmp.path());
}
