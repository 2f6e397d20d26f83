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

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
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

/// What of a target golow must leave as it found it: its threads and its open files.
#[derive(Debug, PartialEq)]
struct Baseline {
    threads: String,
    files: usize,
}

impl Baseline {
    fn of(pid: u32) -> Baseline {
        Baseline {
            threads: status_field(pid, "Threads:"),
            files: std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .count(),
        }
    }
}

/// The target is running, heard no signal and has none pending, and has as many threads and open files as before
/// (once the step hook's thread, which lets go as golow's socket closes, is gone with its socket).
fn untouched(pid: u32, heard: &Path, before: &Baseline) {
    wait_until("the step hook to let go", || Baseline::of(pid) == *before);
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
    let before = Baseline::of(pid);
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
    untouched(pid, &heard, &before);
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
            .contains("attached: no step seen"),
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
    attached_headless(tmp, args).0
}

/// `golow attach --headless --no-record ARGS`, which must exit 0: its summary, and what it said on stderr.
fn attached_headless(tmp: &Path, args: &[&str]) -> (serde_json::Value, String) {
    let json = tmp.join("summary.json");
    let out = golow_command(tmp)
        .args(["attach", "--headless", "--no-record", "--summary-json"])
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (summary(&json), stderr)
}

/// golow attached to the busy target until `signal` ends it.
fn signalled_while_attached(signal: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let (target, heard) = busy_target(tmp.path());
    let pid = target.pid;
    let before = Baseline::of(pid);
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
    untouched(pid, &heard, &before);
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
    let mut detach_nothing = golow_command(t);
    detach_nothing.args(["attach", "--detach"]);
    refuses_command(detach_nothing, "name the processes to let go of");
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
    let before = Baseline::of(pid);
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
    untouched(pid, &heard, &before);
    nothing_of_golows_left(tmp.path());
}

/// A training loop started outside golow: it says when its first step is done, keeps each step's start (on the
/// monotonic clock golow and this test read too) and time, and, at its end and once no hook of golow's is left in
/// it, prints its losses and what of the process a hook could have changed. Arguments: the ready file, the times
/// file, the number of steps, the DataLoader's workers.
const TRAIN: &str = r#"
import json, os, sys, time, torch
import torch.nn.modules.module as modules, torch.optim.optimizer as optimizers
ready, times_file, steps, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
torch.set_num_threads(1)
data = torch.utils.data.TensorDataset(torch.randn(512, 16), torch.randn(512, 1))
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(data, batch_size=32, num_workers=workers)
times, losses, step = [], [], 0
while step < steps:
    for x, y in loader:
        began = time.monotonic()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        times.append((began, time.monotonic() - began))
        step += 1
        if step == 1:
            open(ready, "w").write("1")
        time.sleep(0.004)
        if step == steps:
            break
    losses.append(round(loss.item(), 5))
deadline = time.monotonic() + 60
while "golow-step-hook" in sys.modules and time.monotonic() < deadline:
    time.sleep(0.01)
with open(times_file, "w") as f:
    json.dump(times, f)
iterator = torch.utils.data.dataloader._BaseDataLoaderIter
print(losses)
print({
    "meta_path": [type(f).__qualname__ for f in sys.meta_path],
    "optimiser hooks": (len(optimizers._global_optimizer_pre_hooks), len(optimizers._global_optimizer_post_hooks)),
    "forward hooks": (len(modules._global_forward_pre_hooks), len(modules._global_forward_hooks)),
    "wrapped": [f.__qualname__ for f in (torch.autograd.backward, iterator.__next__, os._exit)
                if hasattr(f, "__wrapped__")],
    "modules": sorted(name for name in sys.modules if "golow" in name),
    "descriptors": len(os.listdir("/proc/self/fd")),
    "threads": len(os.listdir("/proc/self/task")),
}, flush=True)
"#;

/// CLOCK_MONOTONIC in seconds, as Python's time.monotonic reads it.
fn monotonic_s() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}

/// A run of TRAIN started outside golow, in `dir` (made), once its first step is done.
struct Training {
    process: Outside,
    dir: std::path::PathBuf,
}

impl Training {
    fn start(tmp: &Path, name: &str, steps: u32, loader_workers: u32) -> Training {
        let dir = tmp.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("train.py"), TRAIN).unwrap();
        let command = format!(
            "sh -c '{python} train.py ready times.json {steps} {loader_workers} > out.txt 2> err.txt'",
            python = common::PYTHON
        );
        let process = started_outside(&dir, &command);
        let ready = dir.join("ready");
        wait_until("the first step", || ready.exists());
        Training { process, dir }
    }

    /// The python process: the shell's child, or the shell itself where it ran python in its place.
    fn python(&self) -> u32 {
        let shell = self.process.pid;
        let is_python = |pid: u32| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.to_string_lossy().contains("python"))
        };
        if is_python(shell) {
            return shell;
        }
        std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .ok()
            .and_then(|c| c.split_whitespace().next()?.parse().ok())
            .filter(|&pid| is_python(pid))
            .expect("the shell's python")
    }

    /// What it printed, once it ended: (stdout, each step's start and time).
    fn finished(&self) -> (String, Vec<(f64, f64)>) {
        let times = self.dir.join("times.json");
        wait_until("the run to end", || {
            times.exists()
                && std::fs::read_to_string(self.dir.join("out.txt"))
                    .is_ok_and(|o| o.ends_with("}\n"))
        });
        let stderr = std::fs::read_to_string(self.dir.join("err.txt")).unwrap();
        assert_eq!(stderr, "", "the script's stderr");
        let times = serde_json::from_str(&std::fs::read_to_string(times).unwrap()).unwrap();
        (
            std::fs::read_to_string(self.dir.join("out.txt")).unwrap(),
            times,
        )
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty());
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Attaches for `seconds` to a training run (and a run beside it never attached to): the summary of the session.
/// The attached run then prints what the other prints (its losses, and no hook of golow's left in it), and its steps
/// after the session take what its steps took before it.
fn attached_to_training(loader_workers: u32, seconds: &str) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let attached = Training::start(tmp.path(), "attached", 2500, loader_workers);
    let never = Training::start(tmp.path(), "never", 2500, loader_workers);
    let pid = attached.python();
    let began = monotonic_s();
    let (summary, stderr) =
        attached_headless(tmp.path(), &[&pid.to_string(), "--duration", seconds]);
    let ended = monotonic_s();
    assert!(
        stderr.contains(&format!(
            "golow: step hook loaded into process {pid} (Python 3."
        )),
        "{stderr}"
    );
    let (printed, times) = attached.finished();
    let (never_printed, _) = never.finished();
    assert_eq!(printed, never_printed, "what the script printed");
    // Steps before golow started against steps from a second after it ended (the hook lets go on its own thread).
    let before = median(times.iter().filter(|t| t.0 < began).map(|t| t.1).collect());
    let after = median(
        times
            .iter()
            .filter(|t| t.0 > ended + 1.0)
            .map(|t| t.1)
            .collect(),
    );
    let during = median(
        times
            .iter()
            .filter(|t| t.0 > began + 1.0 && t.0 < ended)
            .map(|t| t.1)
            .collect(),
    );
    eprintln!(
        "median step: before {:.3} ms, attached {:.3} ms, after {:.3} ms",
        before * 1e3,
        during * 1e3,
        after * 1e3
    );
    assert!(
        (0.6..1.67).contains(&(after / before)),
        "after detach {after} s a step, before attach {before} s"
    );
    // golow's step times are the script's own intervals between its iterations, while it was attached.
    let own_ms = median(
        times
            .windows(2)
            .filter(|pair| pair[0].0 > began + 1.0 && pair[1].0 < ended)
            .map(|pair| (pair[1].0 - pair[0].0) * 1e3)
            .collect(),
    );
    let train = worker(&summary, "train");
    let golow_ms = train["step_time_ms"]["p50"].as_f64().unwrap();
    assert!(
        (golow_ms - own_ms).abs() < 0.1 * own_ms,
        "golow {golow_ms} ms, the script's own clock {own_ms} ms"
    );
    // Its steps are the script's from one after the hook loaded to the detach.
    let during = times.iter().filter(|t| t.0 > began && t.0 < ended).count() as u64;
    let steps = train["steps"].as_u64().unwrap();
    assert!(
        steps <= during && steps * 10 > during * 6,
        "golow {steps} of the script's {during}"
    );
    summary
}

#[test]
fn an_attached_training_loop_reports_its_steps_and_is_left_as_it_was() {
    let summary = attached_to_training(0, "4");
    let train = worker(&summary, "train");
    assert!(train["steps"].as_u64().unwrap() > 20, "{train}");
    assert!(train["notice"].is_null(), "{train}");
    assert!(train["loss"]["last"].is_number(), "{train}");
    let phases = &train["script"]["phases"];
    assert!(
        phases["forward"]["p50_ms"].as_f64().unwrap() > 0.0,
        "{train}"
    );
}

#[test]
fn a_loader_with_workers_forked_after_the_attach_keeps_them_under_their_trainer() {
    let summary = attached_to_training(2, "5");
    let train = worker(&summary, "train");
    assert!(train["steps"].as_u64().unwrap() > 20, "{train}");
    assert!(
        train["ranks"].is_null() || train["ranks"].as_array().is_some_and(Vec::is_empty),
        "{train}"
    );
}

/// Reads a golow's stderr on a thread of its own, line by line, so that a test can wait for a line.
struct Said {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Said {
    fn follow(child: &mut std::process::Child) -> Said {
        let lines = std::sync::Arc::<std::sync::Mutex<Vec<String>>>::default();
        let reader = std::io::BufReader::new(child.stderr.take().unwrap());
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(reader).map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        Said { lines }
    }

    fn wait_for(&self, what: &str) -> String {
        let mut found = None;
        wait_until(what, || {
            found = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(what))
                .cloned();
            found.is_some()
        });
        found.unwrap()
    }
}

#[test]
fn one_golow_at_a_time_and_detach_lets_the_process_go() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, heard) = busy_target(tmp.path());
    let pid = target.pid;
    let before = Baseline::of(pid);
    let mut first = golow_command(tmp.path())
        .args(["attach", &pid.to_string(), "--headless", "--no-record"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = Said::follow(&mut first);
    said.wait_for(&format!("step hook loaded into process {pid}"));
    // The hook's thread waits on golow's socket.
    assert_ne!(status_field(pid, "Threads:"), before.threads);
    refuses(
        tmp.path(),
        &[&pid.to_string()],
        &format!(
            "process {pid} is attached to by another golow already (pid {})",
            first.id()
        ),
    );
    let out = golow(tmp.path(), &["attach", "--detach", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("process {pid} let go: golow's step hook removed\n")
    );
    untouched(pid, &heard, &before);
    // SAFETY: signals the golow this test started.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    first.wait().unwrap();
    // Let go, it can be attached to again.
    let (_, stderr) = attached_headless(tmp.path(), &[&pid.to_string(), "--duration", "1"]);
    assert!(
        stderr.contains(&format!("step hook loaded into process {pid}")),
        "{stderr}"
    );
    untouched(pid, &heard, &before);
    nothing_of_golows_left(tmp.path());
}

#[test]
fn a_process_that_is_not_python_is_read_from_outside_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let sleep = started_outside(tmp.path(), "sleep 30");
    let (summary, stderr) =
        attached_headless(tmp.path(), &[&sleep.pid.to_string(), "--duration", "1"]);
    let line = stderr
        .lines()
        .find(|l| l.contains("no step hook in it"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains(&sleep.pid.to_string()) && line.contains("sleep"),
        "{line}"
    );
    let w = worker(&summary, "sleep");
    assert!(
        w["notice"]
            .as_str()
            .unwrap()
            .contains("/proc and NVML readings"),
        "{w}"
    );
}

#[test]
fn a_main_thread_asleep_runs_the_hook_when_it_wakes() {
    let tmp = tempfile::tempdir().unwrap();
    let script = TRAIN.replace(
        "times, losses, step = [], [], 0\n",
        "times, losses, step = [], [], 0\nopen(ready, 'w').write('1')\ntime.sleep(5)\n",
    );
    std::fs::write(tmp.path().join("train.py"), script).unwrap();
    let python = common::PYTHON;
    let sleeper = started_outside(
        tmp.path(),
        &format!("{python} train.py ready times.json 600 0"),
    );
    wait_until("the script to fall asleep", || {
        tmp.path().join("ready").exists()
    });
    let (summary, stderr) =
        attached_headless(tmp.path(), &[&sleeper.pid.to_string(), "--duration", "10"]);
    assert!(
        stderr.contains(&format!(
            "process {} has not run Python since golow loaded its step hook (its main thread waits in",
            sleeper.pid
        )),
        "{stderr}"
    );
    let w = worker(&summary, "train");
    assert!(w["steps"].as_u64().unwrap() > 10, "steps once it woke: {w}");
}

#[test]
fn without_a_pid_attach_lists_the_python_processes_that_use_torch() {
    let tmp = tempfile::tempdir().unwrap();
    let training = Training::start(tmp.path(), "listed", 100_000, 0);
    let python = training.python();
    let (plain, _) = busy_target(tmp.path());
    let out = golow(tmp.path(), &["attach"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let header = stdout.lines().next().unwrap();
    assert!(
        header.starts_with("PID") && header.contains("GPU MEMORY"),
        "{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&python.to_string()))
        .unwrap_or_else(|| panic!("{python} in {stdout}"));
    assert!(row.contains("3.11") && row.contains("train.py"), "{row}");
    assert!(
        !stdout
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&plain.pid.to_string())),
        "a Python without torch is not listed: {stdout}"
    );
}

#[test]
fn an_attached_torchrun_job_reports_each_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let ddp = "\
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group('gloo')
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
open(f'ready-{dist.get_rank()}', 'w').write('1')
for i in range(1500):
    opt.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    time.sleep(0.01)
dist.destroy_process_group()
";
    std::fs::write(tmp.path().join("ddp.py"), ddp).unwrap();
    let torchrun = format!("{}/.venv/bin/torchrun", env!("CARGO_MANIFEST_DIR"));
    let job = started_outside(
        tmp.path(),
        &format!("{torchrun} --standalone --nproc-per-node 2 ddp.py"),
    );
    wait_until("both ranks to train", || {
        ["ready-0", "ready-1"]
            .iter()
            .all(|f| tmp.path().join(f).exists())
    });
    let summary = attached_summary(tmp.path(), &[&job.pid.to_string(), "--duration", "6"]);
    let w = worker(&summary, "ddp");
    let processes = w["script"]["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("{w}"));
    let mut ranks: Vec<u64> = processes
        .iter()
        .filter(|p| p["steps"].as_u64().unwrap_or(0) > 10)
        .map(|p| p["rank"].as_u64().unwrap())
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [0, 1], "each rank's steps: {w}");
}

#[test]
fn a_main_thread_in_a_long_c_call_runs_the_hook_when_the_call_returns() {
    let tmp = tempfile::tempdir().unwrap();
    // One C call that holds the GIL and runs no bytecode for seconds, then a loop that notes when it first finds
    // golow's hook in itself.
    let script = TRAIN
        .replace(
            "times, losses, step = [], [], 0\n",
            "times, losses, step = [], [], 0\nopen(ready, 'w').write('1')\nsum(range(150_000_000))\n\
             returned, hooked = time.monotonic(), None\n",
        )
        .replace(
            "        began = time.monotonic()\n",
            "        began = time.monotonic()\n        if hooked is None and 'golow-step-hook' in sys.modules:\n            \
             hooked = began\n",
        )
        .replace(
            "with open(times_file, \"w\") as f:\n",
            "open('hooked', 'w').write(f'{returned} {hooked}')\nwith open(times_file, \"w\") as f:\n",
        );
    std::fs::write(tmp.path().join("train.py"), script).unwrap();
    let python = common::PYTHON;
    let busy = started_outside(
        tmp.path(),
        &format!("{python} train.py ready times.json 500 0"),
    );
    wait_until("the C call to begin", || tmp.path().join("ready").exists());
    let attached = monotonic_s();
    let (summary, _) = attached_headless(tmp.path(), &[&busy.pid.to_string(), "--duration", "12"]);
    wait_until("the script to end", || tmp.path().join("hooked").exists());
    let noted = std::fs::read_to_string(tmp.path().join("hooked")).unwrap();
    let (returned, hooked) = noted.split_once(' ').unwrap();
    let returned: f64 = returned.parse().unwrap();
    let hooked: f64 = hooked
        .parse()
        .unwrap_or_else(|_| panic!("the hook never ran: {noted}"));
    eprintln!(
        "the C call returned {:.2} s after the attach began; the hook ran {:.3} s after that",
        returned - attached,
        hooked - returned
    );
    assert!(returned > attached, "the attach came during the call");
    assert!(
        hooked - returned < 0.5,
        "the hook ran once the call returned"
    );
    let w = worker(&summary, "train");
    assert!(w["steps"].as_u64().unwrap() > 10, "{w}");
}

/// Lightning's and Hugging Face's trainers, running for a while when golow attaches to both: each counts its optimiser
/// steps with their two micro-batches, splits them into phases and gives the loss its framework computed.
#[test]
fn attached_lightning_and_hugging_face_trainers_report_their_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let lightning = common::frameworks::LIGHTNING
        .replace("max_epochs=2", "max_epochs=1000")
        .replace(
            "        self.losses.append(loss.item())\n",
            "        self.losses.append(loss.item())\n        open('ready-lit', 'w').write('1')\n",
        );
    let hugging_face = common::frameworks::HUGGING_FACE
        .replace("num_train_epochs=2", "num_train_epochs=1000")
        .replace(
            "        if 'loss' in logs:\n",
            "        open('ready-hf', 'w').write('1')\n        if 'loss' in logs:\n",
        );
    std::fs::write(tmp.path().join("lit.py"), lightning).unwrap();
    std::fs::write(tmp.path().join("hf.py"), hugging_face).unwrap();
    let python = common::PYTHON;
    let lit = started_outside(tmp.path(), &format!("{python} lit.py"));
    let hf = started_outside(tmp.path(), &format!("{python} hf.py"));
    wait_until("both trainers to train", || {
        ["ready-lit", "ready-hf"]
            .iter()
            .all(|f| tmp.path().join(f).exists())
    });
    let (summary, stderr) = attached_headless(
        tmp.path(),
        &[&lit.pid.to_string(), &hf.pid.to_string(), "--duration", "8"],
    );
    for name in ["lit", "hf"] {
        let w = worker(&summary, name);
        let script = &w["script"];
        assert!(w["steps"].as_u64().unwrap() > 3, "{name}: {w}\n{stderr}");
        assert_eq!(script["steps_counted_by"], "optimizer", "{w}");
        assert_eq!(script["micro_batches_per_step"], 2, "{w}");
        for phase in ["forward", "backward", "optimizer"] {
            let p50 = script["phases"][phase]["p50_ms"].as_f64().unwrap();
            assert!(p50 > 0.0, "{name} {phase}: {w}");
        }
        assert!(w["loss"]["last"].is_number(), "{w}");
    }
}
