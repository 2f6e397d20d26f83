//! golow's injector (`golow::inject`) on real CPython processes: a file scheduled into a busy loop, an idle loop
//! and a main thread waiting on an Event runs once, in the main thread, in a namespace of its own, and nothing else
//! of the process changes; and each process golow must not touch is refused in its own line, left as it was.
//!
//! The pythons are the venv's (always), Debian's /usr/bin/python3 and every pyenv CPython 3.8–3.13 this machine
//! has (each that is found runs; the others are named in the test's output as skipped).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use golow::inject::{self, PythonVersion};

/// How long a test lets gdb take on a loaded machine: far beyond the tenth of a second it takes.
const GDB_TIMEOUT: Duration = Duration::from_secs(60);

/// The target: `KIND BOX SECONDS`. It runs until the file golow scheduled has run (it writes `BOX/ran`) or for
/// SECONDS, then prints the names its own run added to `__main__` (none but its own, whatever golow did) and exits 0.
const TARGET: &str = r#"
import os, sys, threading, time

def main(kind, box, seconds):
    ran = os.path.join(box, "ran")
    deadline = time.monotonic() + seconds
    def waiting():
        return not os.path.exists(ran) and time.monotonic() < deadline
    open(os.path.join(box, "ready"), "w").close()
    if kind == "busy":
        n = 0
        while waiting():
            for _ in range(1000):
                n += 1
    elif kind in ("idle", "undumpable"):
        if kind == "undumpable":
            import ctypes
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        while waiting():
            time.sleep(0.001)
    elif kind == "event":
        def watch():
            while waiting():
                time.sleep(0.01)
            EVENT.set()
        threading.Thread(target=watch, daemon=True).start()
        EVENT.wait()

EVENT = threading.Event()
BEFORE = set(globals()) | {"BEFORE"}
main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
print("done", sorted(set(globals()) - BEFORE))
"#;

/// The file scheduled: it notes where it ran (pid, main thread or not, its `__name__`, and whether the target's
/// Event was already set, which it is not while the main thread still waits on it), then raises SystemExit, which
/// must not reach the target.
const SNIPPET: &str = r#"
import os, sys, threading
main = sys.modules["__main__"]
line = "%d %s %s %s" % (os.getpid(), threading.current_thread() is threading.main_thread(), __name__,
                        main.EVENT.is_set())
box = os.path.dirname(__file__)
with open(os.path.join(box, "ran.part"), "w") as f:
    f.write(line)
os.replace(os.path.join(box, "ran.part"), os.path.join(box, "ran"))
raise SystemExit(3)
"#;

fn venv_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")
}

/// The pythons to run: the venv's first, then Debian's and pyenv's 3.8–3.13 that are here (a binary the venv's
/// already is runs once).
fn pythons() -> Vec<PathBuf> {
    let mut found = vec![venv_python()];
    let mut seen = vec![std::fs::canonicalize(venv_python()).expect("the venv's python")];
    let mut candidates = vec![PathBuf::from("/usr/bin/python3")];
    for minor in 8..=13 {
        let versions = std::fs::read_dir("/root/.pyenv/versions")
            .into_iter()
            .flatten()
            .flatten();
        candidates.extend(
            versions
                .filter(|v| {
                    v.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("3.{minor}."))
                })
                .map(|v| v.path().join("bin/python3")),
        );
    }
    for candidate in candidates {
        match std::fs::canonicalize(&candidate) {
            Ok(real) if !seen.contains(&real) => {
                seen.push(real);
                found.push(candidate);
            }
            Ok(_) => {}
            Err(_) => println!("skipped {}: not on this machine", candidate.display()),
        }
    }
    found
}

/// A target process and the directory it shares with the test.
struct Target {
    child: Child,
    dir: tempfile::TempDir,
}

impl Target {
    fn start(python: &Path, kind: &str, seconds: u32) -> Target {
        Target::start_with(python, kind, seconds, &[])
    }

    fn start_with(python: &Path, kind: &str, seconds: u32, env: &[(&str, &str)]) -> Target {
        Target::spawn(
            Command::new(python).envs(env.iter().copied()),
            kind,
            seconds,
        )
    }

    /// A target run as the user `uid`.
    fn start_as(python: &Path, kind: &str, seconds: u32, uid: u32) -> Target {
        use std::os::unix::process::CommandExt;
        Target::spawn(Command::new(python).uid(uid).gid(uid), kind, seconds)
    }

    /// Runs the target with `command` (a python) in a directory any user may write to.
    fn spawn(command: &mut Command, kind: &str, seconds: u32) -> Target {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(dir.path().join("target.py"), TARGET).unwrap();
        std::fs::write(dir.path().join("snippet.py"), SNIPPET).unwrap();
        let child = command
            .arg(dir.path().join("target.py"))
            .args([
                kind,
                &dir.path().display().to_string(),
                &seconds.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let target = Target { child, dir };
        let ready = target.dir.path().join("ready");
        wait_until("the target to start", || ready.exists());
        target
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn snippet(&self) -> PathBuf {
        self.dir.path().join("snippet.py")
    }

    /// What the snippet wrote, once it ran.
    fn ran(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.path().join("ran")).ok()
    }

    fn finish(self) -> Output {
        let Target { child, dir } = self;
        let out = child.wait_with_output().unwrap();
        drop(dir);
        out
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Schedules the snippet into a target of `kind` under `python`, and checks that it ran once in the main thread,
/// in its own namespace, and changed nothing the target prints: its SystemExit swallowed, no name added to
/// `__main__`, exit status 0.
fn runs_in(python: &Path, kind: &str) -> inject::Scheduled {
    let target = Target::start(python, kind, 120);
    if kind == "event" {
        wait_until("the main thread to wait on its Event", || {
            inject::main_thread_waits_in(target.pid()).as_deref() == Some("futex")
        });
    }
    let scheduled = inject::schedule_file(target.pid(), &target.snippet(), GDB_TIMEOUT)
        .unwrap_or_else(|refusal| panic!("{}: {refusal}", python.display()));
    wait_until("the file to run", || target.ran().is_some());
    let pid = target.pid();
    let ran = target.ran().unwrap();
    assert_eq!(
        ran,
        format!("{pid} True __golow_attach__ False"),
        "{} {kind}: where the file ran",
        python.display()
    );
    let out = target.finish();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "{} {kind}",
        python.display()
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "done []\n",
        "{} {kind}",
        python.display()
    );
    assert!(
        out.status.success(),
        "{} {kind}: {}",
        python.display(),
        out.status
    );
    assert!(scheduled.stopped <= scheduled.gdb, "{scheduled:?}");
    println!("{} {kind}: {scheduled:?}", python.display());
    scheduled
}

#[test]
fn a_busy_loop_runs_the_file_in_every_python_found() {
    for python in pythons() {
        assert!(!runs_in(&python, "busy").nudged);
    }
}

#[test]
fn an_idle_loop_runs_the_file_in_every_python_found() {
    for python in pythons() {
        runs_in(&python, "idle");
    }
}

#[test]
fn a_main_thread_waiting_on_an_event_is_nudged_and_runs_the_file_at_once_in_every_python_found() {
    for python in pythons() {
        let scheduled = runs_in(&python, "event");
        assert!(scheduled.nudged, "{}: {scheduled:?}", python.display());
    }
}

/// A python that sleeps until killed, once it runs Python code.
fn sleeping(python: &Path) -> Killed {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let child = Command::new(python)
        .args([
            "-c",
            "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(120)",
        ])
        .arg(&ready)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let child = Killed(child);
    wait_until("python to start", || ready.exists());
    child
}

#[test]
fn python_in_names_each_version_and_refuses_those_golow_does_not_attach_to() {
    for python in pythons() {
        let out = Command::new(&python)
            .args([
                "-c",
                "import sys; print(sys.version_info[0], sys.version_info[1])",
            ])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        let (major, minor) = said.trim().split_once(' ').unwrap();
        let version = inject::python_in(sleeping(&python).0.id());
        let expected = PythonVersion {
            major: major.parse().unwrap(),
            minor: minor.parse().unwrap(),
        };
        assert_eq!(version, Ok(expected), "{}", python.display());
        assert_eq!(expected.to_string(), format!("{major}.{minor}"));
    }
    let refused = [
        ("2.7", "runs Python 2; golow attaches to CPython 3.8–3.13"),
        (
            "3.6",
            "runs CPython 3.6 or older; golow attaches to CPython 3.8–3.13",
        ),
        (
            "3.7",
            "runs CPython 3.7; golow attaches to CPython 3.8–3.13",
        ),
    ];
    for (version, words) in refused {
        let versions = std::fs::read_dir("/root/.pyenv/versions")
            .into_iter()
            .flatten()
            .flatten();
        let Some(old) = versions.map(|v| v.path()).find(|v| {
            v.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{version}."))
        }) else {
            println!("skipped CPython {version}: not on this machine");
            continue;
        };
        let child = sleeping(&old.join("bin/python"));
        let pid = child.0.id();
        let refusal = inject::python_in(pid).unwrap_err();
        let target = Path::new("/tmp/never-read.py");
        let scheduled = inject::schedule_file(pid, target, GDB_TIMEOUT).unwrap_err();
        assert_eq!(refusal.0, format!("process {pid} {words}"));
        assert_eq!(scheduled, refusal);
    }
}

/// Refuses `pid` and checks the line.
fn refused(pid: u32, snippet: &Path, line: &str) {
    let refusal = inject::schedule_file(pid, snippet, GDB_TIMEOUT).unwrap_err();
    assert_eq!(refusal.0, line);
    assert_eq!(refusal.to_string(), line);
}

/// A target that was refused: the file never ran, and it ended as it would have.
fn untouched(target: Target) {
    let ran = target.ran();
    let out = target.finish();
    assert_eq!(ran, None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done []\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(out.status.success());
}

#[test]
fn a_process_that_is_gone_or_a_zombie_is_refused() {
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let snippet = Path::new("/tmp/never-read.py");
    refused(pid, snippet, &format!("process {pid} is gone"));
    assert_eq!(
        inject::python_in(pid),
        Err(inject::Refusal(format!("process {pid} is gone")))
    );

    let mut zombie = Command::new("true").spawn().unwrap();
    let pid = zombie.id();
    wait_until("the zombie", || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .is_ok_and(|s| s.contains("State:\tZ"))
    });
    refused(pid, snippet, &format!("process {pid} has exited (zombie)"));
    zombie.wait().unwrap();
}

#[test]
fn a_stopped_process_is_refused_and_left_stopped() {
    let target = Target::start(&venv_python(), "idle", 3);
    let pid = target.pid();
    signal(pid, libc::SIGSTOP);
    wait_until("the stop", || state(pid) == 'T');
    refused(
        pid,
        &target.snippet(),
        &format!("process {pid} is stopped (SIGSTOP/Ctrl-Z); resume it and retry"),
    );
    assert_eq!(state(pid), 'T');
    signal(pid, libc::SIGCONT);
    untouched(target);
}

#[test]
fn a_process_another_tracer_holds_is_refused() {
    // The target asks to be traced by its parent: this test's process, which never stops or signals it.
    let dir = tempfile::tempdir().unwrap();
    let traced = Command::new(venv_python())
        .args([
            "-c",
            "import ctypes, sys, time; ctypes.CDLL(None).ptrace(0, 0, None, None); \
             open(sys.argv[1], 'w').close(); time.sleep(120)",
        ])
        .arg(dir.path().join("traced"))
        .spawn()
        .unwrap();
    let mut traced = Killed(traced);
    let pid = traced.0.id();
    wait_until("the target to be traced", || {
        dir.path().join("traced").exists()
    });
    let refusal =
        inject::schedule_file(pid, &dir.path().join("snippet.py"), GDB_TIMEOUT).unwrap_err();
    assert!(
        refusal
            .0
            .starts_with(&format!("process {pid} is being traced by process ")),
        "{refusal}"
    );
    assert!(
        refusal
            .0
            .ends_with("(a debugger, py-spy, strace?); detach it first"),
        "{refusal}"
    );
    assert_eq!(state(pid), 'S', "left running");
    traced.0.kill().unwrap();
}

/// A child killed and reaped however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_program_that_is_not_python_is_refused_by_its_name() {
    let sleeper = Killed(Command::new("sleep").arg("120").spawn().unwrap());
    let pid = sleeper.0.id();
    wait_until("sleep to run", || {
        std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe.ends_with("sleep"))
    });
    let line = format!("process {pid} is not a CPython process (it runs sleep)");
    refused(pid, Path::new("/tmp/never-read.py"), &line);
    assert_eq!(inject::python_in(pid), Err(inject::Refusal(line)));
}

#[test]
fn a_process_that_disabled_remote_debugging_is_refused() {
    let target = Target::start_with(
        &venv_python(),
        "idle",
        3,
        &[("PYTHON_DISABLE_REMOTE_DEBUG", "1")],
    );
    let pid = target.pid();
    refused(
        pid,
        &target.snippet(),
        &format!(
            "process {pid} started with PYTHON_DISABLE_REMOTE_DEBUG set, which forbids running code in it; golow \
             leaves it alone"
        ),
    );
    untouched(target);
}

/// The variable that hands a target's pid, the file and the line expected to this test binary run again in a
/// process of its own: without gdb on its PATH, or as another user.
const REFUSED_ELSEWHERE: &str = "GOLOW_TEST_INJECT_REFUSED";

/// Runs `refusal_in_a_process_of_its_own` in `command` (this test binary), which must pass.
fn refused_elsewhere(mut command: Command, target: &Target, line: &str) {
    let given = format!("{}\t{}\t{line}", target.pid(), target.snippet().display());
    let run = command
        .args([
            "--exact",
            "refusal_in_a_process_of_its_own",
            "--ignored",
            "--nocapture",
        ])
        .env(REFUSED_ELSEWHERE, given)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(said.contains("1 passed"), "{said}");
}

/// Run by the tests below in a process of its own.
#[test]
#[ignore = "run by the tests that refuse in a process of its own"]
fn refusal_in_a_process_of_its_own() {
    let given = std::env::var(REFUSED_ELSEWHERE).expect("run by a test that sets it");
    let [pid, snippet, line] = given.splitn(3, '\t').collect::<Vec<_>>()[..] else {
        panic!("{given}");
    };
    refused(pid.parse().unwrap(), Path::new(snippet), line);
}

#[test]
fn without_gdb_on_path_the_process_is_refused() {
    let target = Target::start(&venv_python(), "idle", 3);
    let mut without_gdb = Command::new(std::env::current_exe().unwrap());
    without_gdb.env("PATH", "/nonexistent");
    refused_elsewhere(
        without_gdb,
        &target,
        "golow attach needs gdb to load its hook into a running process (apt install gdb); showing /proc and GPU \
         data only",
    );
    untouched(target);
}

/// The unprivileged user the tests below run golow's side as.
const NOBODY: u32 = 65534;

/// This test binary run as `nobody`, without capabilities.
fn as_nobody() -> Command {
    let mut command = Command::new("setpriv");
    command
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--",
        ])
        .arg(std::env::current_exe().unwrap());
    command
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn another_users_process_is_refused_with_the_reason() {
    if !running_as_root() {
        println!("skipped: only root can run golow's side as another user");
        return;
    }
    let target = Target::start(&venv_python(), "idle", 3);
    let pid = target.pid();
    let line = format!(
        "cannot attach to process {pid}: ptrace is not permitted (it runs as uid 0, golow as uid {NOBODY}); run \
         golow as the process's user or with CAP_SYS_PTRACE"
    );
    refused_elsewhere(as_nobody(), &target, &line);
    untouched(target);
}

#[test]
fn a_process_that_made_itself_undumpable_is_refused_with_the_reason() {
    // A python another user can run (pyenv's live in root's home).
    let python = Path::new("/usr/bin/python3");
    if !running_as_root() || !python.exists() {
        println!(
            "skipped: needs root, to run a target and golow's side as another user, and /usr/bin/python3"
        );
        return;
    }
    let target = Target::start_as(python, "undumpable", 3, NOBODY);
    let pid = target.pid();
    let line = format!(
        "cannot attach to process {pid}: ptrace is not permitted (it made itself undumpable: prctl \
         PR_SET_DUMPABLE 0, or a change of user); run golow with CAP_SYS_PTRACE"
    );
    refused_elsewhere(as_nobody(), &target, &line);
    untouched(target);
}

/// A target whose main thread blocks in `read` (no bytecode runs there, so the queued call waits) while another
/// thread forks once the call is queued: the child copies the queue, and its forking thread, its main thread now,
/// runs bytecode for a second before it ends. Then the parent's main thread wakes.
const FORKER: &str = r#"
import os, sys, threading, time
box = sys.argv[1]
wake_r, wake_w = os.pipe()
def fork_once_queued():
    while not os.path.exists(os.path.join(box, "queued")):
        time.sleep(0.005)
    pid = os.fork()
    if pid == 0:
        t = time.monotonic()
        while time.monotonic() - t < 1.0:
            pass
        open(os.path.join(box, "child-%d" % os.getpid()), "w").close()
        os._exit(0)
    os.waitpid(pid, 0)
    os.write(wake_w, b"x")
threading.Thread(target=fork_once_queued).start()
open(os.path.join(box, "ready"), "w").close()
os.read(wake_r, 1)
deadline = time.monotonic() + 60
while not any(n.startswith("ran-") for n in os.listdir(box)):
    if time.monotonic() > deadline:
        break
    time.sleep(0.01)
"#;

#[test]
fn a_file_queued_before_a_fork_runs_in_the_parent_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("forker.py"), FORKER).unwrap();
    let snippet = dir.path().join("snippet.py");
    std::fs::write(
        &snippet,
        "import os\nopen(os.path.join(os.path.dirname(__file__), 'ran-%d' % os.getpid()), 'w').close()\n",
    )
    .unwrap();
    let mut target = Killed(
        Command::new(venv_python())
            .arg(dir.path().join("forker.py"))
            .arg(dir.path())
            .spawn()
            .unwrap(),
    );
    let pid = target.0.id();
    wait_until("the target to start", || dir.path().join("ready").exists());
    wait_until("the main thread to block in read", || {
        inject::main_thread_waits_in(pid).as_deref() == Some("read")
    });
    inject::schedule_file(pid, &snippet, GDB_TIMEOUT).unwrap();
    std::fs::write(dir.path().join("queued"), "").unwrap();
    assert!(target.0.wait().unwrap().success());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let child = names
        .iter()
        .find_map(|n| n.strip_prefix("child-"))
        .expect("the child ran");
    assert!(names.contains(&format!("ran-{pid}")), "{names:?}");
    assert!(
        !names.contains(&format!("ran-{child}")),
        "the child ran the file: {names:?}"
    );
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: signals a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

fn state(pid: u32) -> char {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("State:")).unwrap();
    line["State:".len()..].trim().chars().next().unwrap()
}

/// gdb interrupted wherever a short timeout finds it (before its attach, attached, inside its calls into the
/// target, detaching) leaves the target running and consistent: the file runs if and only if scheduling said it
/// was scheduled, and the target ends as it would have.
#[test]
fn a_timeout_anywhere_in_gdbs_run_leaves_the_target_whole_and_says_whether_the_file_runs() {
    let venv = venv_python();
    let mut outcomes = Vec::new();
    for millis in [1, 40, 70, 90, 110, 130, 160, 200] {
        let target = Target::start(&venv, "idle", 4);
        let scheduled = inject::schedule_file(
            target.pid(),
            &target.snippet(),
            Duration::from_millis(millis),
        );
        match &scheduled {
            Ok(_) => wait_until("the file to run", || target.ran().is_some()),
            Err(refusal) => {
                assert!(
                    refusal.0.starts_with(&format!(
                        "could not load the step hook into {}: ",
                        target.pid()
                    )),
                    "{refusal}"
                );
                // An idle loop runs a queued call within milliseconds.
                std::thread::sleep(Duration::from_secs(1));
                assert_eq!(target.ran(), None, "{millis} ms: refused, yet the file ran");
            }
        }
        let ran = target.ran().is_some();
        let out = target.finish();
        assert!(out.status.success(), "{millis} ms: {}", out.status);
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{millis} ms");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "done []\n",
            "{millis} ms"
        );
        outcomes.push(format!("{millis} ms: {ran} {scheduled:?}"));
    }
    println!("{outcomes:?}");
}
