//! Signals from outside and the terminal's job control: SIGINT, SIGTERM and SIGHUP end every command as Ctrl-C does
//! (the terminal given back, the workers stopped, nothing half-written, exit 128 + the signal), and Ctrl-Z or SIGTSTP
//! send a full-screen view back to the shell until `fg` brings it back, redrawn, while the workers carry on.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::tmux::{Tmux, closed_and_stopped, endless_live_run, exit_code_in, pid_in, sample_p50};

const GOLOW: &str = env!("CARGO_BIN_EXE_golow");

/// The terminating signals, each with the exit code a shell reports for it.
const TERMINATING: [(i32, &str); 3] = [
    (libc::SIGINT, "130"),
    (libc::SIGTERM, "143"),
    (libc::SIGHUP, "129"),
];

/// A CPU session recorded in the repository: 80 steps each of libtorch, pytorch and torchscript.
fn a_recording() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings/20261126T225734Z-libtorch-pytorch-torchscript.golow")
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: signals a process this test started.
    unsafe { libc::kill(pid as i32, signal) };
}

/// The state letter of `pid` in /proc (`T` when stopped); `None` once it is gone.
fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let parent: u32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            (parent == pid).then_some(child)
        })
        .collect()
}

fn wait_until(what: &str, timeout: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The terminal's local modes as `stty -a` wrote them to `file`: cooked (`icanon`, `echo`, `isig`) once golow has
/// left raw mode.
fn assert_cooked(file: &Path) {
    let stty = std::fs::read_to_string(file).unwrap();
    let words: Vec<&str> = stty.split_whitespace().collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(words.contains(&mode), "{mode} is off: {stty}");
    }
}

/// A replay view sent each terminating signal closes, gives the terminal back (main screen, cursor, no mouse, raw
/// mode off) and exits 128 + the signal.
#[test]
fn a_terminating_signal_closes_the_replay_view_and_gives_the_terminal_back() {
    for (number, code) in TERMINATING {
        let tmp = tempfile::tempdir().unwrap();
        let done = tmp.path().join("exit-code");
        let stty = tmp.path().join("stty");
        let command = format!(
            "cd {tmp} && TMPDIR={tmp} {GOLOW} replay {file}; echo $? > {done}; stty -a > {stty}; sleep 30",
            tmp = tmp.path().display(),
            file = a_recording().display(),
            done = done.display(),
            stty = stty.display(),
        );
        let tmux = Tmux::start(&command, 160, 45);
        tmux.wait_for("the replay", Duration::from_secs(30), |s| {
            s.contains("REPLAY")
        });
        tmux.wait_for_modes("1 0 1", Duration::from_secs(10));
        signal(pid_in(GOLOW, tmp.path()).expect("golow runs"), number);
        assert_eq!(
            exit_code_in(&done, Duration::from_secs(30)),
            code,
            "signal {number}"
        );
        assert_eq!(tmux.modes(), "0 1 0", "signal {number}: {}", tmux.screen());
        wait_until("stty", Duration::from_secs(10), || {
            std::fs::metadata(&stty).is_ok_and(|m| m.len() > 0)
        });
        assert_cooked(&stty);
    }
}

/// An external SIGINT ends the live view as SIGTERM does (and as it ends a headless run): the workers stopped, the
/// recording closed, the terminal given back, exit 130 with no key pressed.
#[test]
fn an_interrupt_closes_the_live_view_and_exits_130() {
    let tmp = tempfile::tempdir().unwrap();
    let (tmux, pid, summary, done) = endless_live_run(tmp.path());
    tmux.wait_for_modes("1 0 1", Duration::from_secs(10));
    let workers = children_of(pid);
    signal(pid, libc::SIGINT);
    assert_eq!(exit_code_in(&done, Duration::from_secs(60)), "130");
    assert_eq!(tmux.modes(), "0 1 0", "{}", tmux.screen());
    closed_and_stopped(tmp.path(), &summary);
    for worker in workers {
        wait_until("golow's children to end", Duration::from_secs(10), || {
            matches!(state_of(worker), None | Some('Z'))
        });
    }
}

/// An export of a recording of 2,000,000 lines a real command printed: its JSON is about 180 MB, seconds of work.
fn a_large_recording(tmp: &Path) -> PathBuf {
    let out = common::golow(
        tmp,
        &[
            "run",
            "--headless",
            "--hide-output",
            "--cmd",
            "lines=seq 1 2000000",
            "--record",
            "large.golow",
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    tmp.join("large.golow")
}

/// An export interrupted mid-way leaves neither its output nor its temporary file, says so in one line, and exits
/// 128 + the signal.
#[test]
fn an_interrupted_export_leaves_nothing_half_written() {
    let tmp = tempfile::tempdir().unwrap();
    let recording = a_large_recording(tmp.path());
    for (number, code) in TERMINATING {
        let output = tmp.path().join(format!("export-{number}.json"));
        let child = common::golow_command(tmp.path())
            .args([
                "export",
                &recording.display().to_string(),
                "--format",
                "json",
                "-o",
            ])
            .arg(&output)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let temporary = PathBuf::from(format!("{}.{}.tmp", output.display(), child.id()));
        // Mid-way: the temporary file holds 8 MB of some 180.
        wait_until(
            "the export to be under way",
            Duration::from_secs(60),
            || std::fs::metadata(&temporary).is_ok_and(|m| m.len() > 8 << 20),
        );
        signal(child.id(), number);
        let out = child.wait_with_output().unwrap();
        let stderr = common::text(&out.stderr);
        assert_eq!(
            out.status.code().map(|c| c.to_string()).as_deref(),
            Some(code),
            "signal {number}: {stderr}"
        );
        let left: Vec<String> = common::left_in(tmp.path())
            .into_iter()
            .filter(|name| name.starts_with("export-"))
            .collect();
        assert!(left.is_empty(), "signal {number} left {left:?}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("interrupted"), "{stderr}");
    }
}

/// An interactive shell with job control in a terminal, in `dir`, whose TMPDIR is `dir`.
fn shell_in(dir: &Path) -> Tmux {
    let tmux = Tmux::start_argv(
        &["env", "PS1=$ ", "bash", "--norc", "--noprofile", "-i"],
        160,
        48,
    );
    tmux.wait_for("the prompt", Duration::from_secs(10), |s| {
        s.lines().any(|l| l.trim_end() == "$")
    });
    tmux.keys(&format!(
        "cd {dir} && export TMPDIR={dir}",
        dir = dir.display()
    ));
    tmux.keys("Enter");
    tmux
}

/// Runs `command` at the shell's prompt.
fn type_command(tmux: &Tmux, command: &str) {
    tmux.keys(command);
    tmux.keys("Enter");
}

/// golow (`pid`) stopped, `while_stopped` checked, and the terminal the shell's again; then `fg`, and the view is
/// back as `shown` says, drawn whole over what the shell wrote.
fn suspended_then_resumed(
    tmux: &Tmux,
    pid: u32,
    while_stopped: impl Fn(),
    shown: impl Fn(&str) -> bool,
) {
    tmux.wait_for_modes("0 1 0", Duration::from_secs(10));
    tmux.wait_for("the shell's report", Duration::from_secs(10), |s| {
        s.contains("Stopped")
    });
    wait_until("golow to stop", Duration::from_secs(10), || {
        state_of(pid) == Some('T')
    });
    while_stopped();
    type_command(tmux, "fg");
    tmux.wait_for_modes("1 0 1", Duration::from_secs(10));
    tmux.wait_for("the view redrawn", Duration::from_secs(10), |s| {
        shown(s) && !s.contains("Stopped") && !s.contains("$ fg")
    });
    assert_ne!(state_of(pid), Some('T'));
}

/// Quits the view with q, and checks golow's exit code as the shell saw it.
fn quit_at_the_shell(tmux: &Tmux, pid: u32, dir: &Path, expected: &str) {
    tmux.keys("q");
    wait_until("golow to end", Duration::from_secs(60), || {
        state_of(pid).is_none()
    });
    let done = dir.join("exit-code");
    type_command(tmux, &format!("echo $? > {}", done.display()));
    assert_eq!(exit_code_in(&done, Duration::from_secs(10)), expected);
}

/// Ctrl-Z and an external SIGTSTP suspend the replay view to the shell (the terminal given back, golow stopped);
/// `fg` brings it back, redrawn whole.
#[test]
fn ctrl_z_and_sigtstp_suspend_the_replay_view_until_fg() {
    let tmp = tempfile::tempdir().unwrap();
    let tmux = shell_in(tmp.path());
    type_command(
        &tmux,
        &format!("{GOLOW} replay {}", a_recording().display()),
    );
    let replaying =
        |s: &str| s.contains("REPLAY") && s.contains("libtorch") && s.contains(" / 00:");
    tmux.wait_for("the replay", Duration::from_secs(30), replaying);
    tmux.wait_for_modes("1 0 1", Duration::from_secs(10));
    let pid = pid_in(GOLOW, tmp.path()).expect("golow runs");

    tmux.keys("C-z");
    suspended_then_resumed(&tmux, pid, || {}, replaying);
    signal(pid, libc::SIGTSTP);
    suspended_then_resumed(&tmux, pid, || {}, replaying);
    quit_at_the_shell(&tmux, pid, tmp.path(), "0");
}

/// Ctrl-Z suspends the live view, not the session's workers (they are in process groups of their own); `fg` brings
/// the view back, redrawn whole, and the session carries on to a clean end.
#[test]
fn ctrl_z_suspends_the_live_view_and_not_its_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let tmux = shell_in(tmp.path());
    type_command(
        &tmux,
        &format!(
            "{GOLOW} run --impl libtorch --model resnet18 --resolution 32 --batch-size 4 --steps 100000 \
             --summary-json summary.json"
        ),
    );
    let live = |s: &str| s.contains("● REC") && sample_p50(s, "libtorch").is_some();
    tmux.wait_for("libtorch's sample times", Duration::from_secs(120), live);
    let pid = pid_in(GOLOW, tmp.path()).expect("golow runs");
    let workers = children_of(pid);
    assert!(!workers.is_empty());

    tmux.keys("C-z");
    let workers_run_on = || {
        for &worker in &workers {
            assert!(
                matches!(state_of(worker), Some(s) if s != 'T'),
                "worker {worker} stopped with golow"
            );
        }
    };
    suspended_then_resumed(&tmux, pid, workers_run_on, live);
    quit_at_the_shell(&tmux, pid, tmp.path(), "0");
    closed_and_stopped(tmp.path(), &tmp.path().join("summary.json"));
}

/// A headless run keeps SIGTSTP's default: it stops, and carries on at SIGCONT. golow runs in a process group of
/// its own whose parent, this test, is in the same session: the kernel discards SIGTSTP in an orphaned process group,
/// which the test's own group becomes when whatever started the tests has exited before them.
#[test]
fn sigtstp_stops_a_headless_run_as_its_default_does() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let mut child = common::golow_command(tmp.path())
        .process_group(0)
        .args(["run", "--headless", "--no-record", "--cmd", "nap=sleep 600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_until("the command to start", Duration::from_secs(60), || {
        pid_in("sleep", tmp.path()).is_some()
    });
    signal(pid, libc::SIGTSTP);
    wait_until("golow to stop", Duration::from_secs(10), || {
        state_of(pid) == Some('T')
    });
    signal(pid, libc::SIGCONT);
    wait_until("golow to carry on", Duration::from_secs(10), || {
        state_of(pid) != Some('T')
    });
    assert!(child.try_wait().unwrap().is_none());
    signal(pid, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        common::text(&out.stderr)
    );
}
