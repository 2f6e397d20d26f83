//! A real terminal for the TUI's tests: tmux sessions running golow, what their panes show and which modes the
//! terminal is in, and the processes a test started there.

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    pub session: String,
}

impl Tmux {
    pub fn start(command: &str, width: u16, height: u16) -> Tmux {
        Tmux::start_argv(&[command], width, height)
    }

    /// A program with its arguments as the pane's own process, started with no shell when there are several (so
    /// that it leads the terminal's session, as a login shell would, and a closed terminal hangs it up).
    pub fn start_argv(argv: &[&str], width: u16, height: u16) -> Tmux {
        // Tests of this binary run at once: each session has a name of its own.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let session = format!("golow-test-{}-{n}", std::process::id());
        // Tests that start the first sessions at once each start a tmux server, and all but one of those clients
        // may fail with "server exited unexpectedly": the one that won is running by then, so try again.
        let mut failures = Vec::new();
        while failures.len() < 5 {
            let out = Command::new("tmux")
                .args([
                    "new-session",
                    "-d",
                    "-s",
                    &session,
                    "-x",
                    &width.to_string(),
                    "-y",
                    &height.to_string(),
                ])
                .args(argv)
                .output()
                .expect("tmux is installed (make test installs it)");
            if out.status.success() {
                return Tmux { session };
            }
            failures.push(String::from_utf8_lossy(&out.stderr).trim().to_string());
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("tmux could not start a session: {failures:?}");
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.session])
    }

    /// Whether the terminal shows the alternate screen, the cursor, and tracks the mouse: "1 0 1" under a view,
    /// "0 1 0" once golow has given the terminal back.
    pub fn modes(&self) -> String {
        self.tmux(&[
            "display-message",
            "-p",
            "-t",
            &self.session,
            "#{alternate_on} #{cursor_flag} #{mouse_any_flag}",
        ])
        .trim()
        .to_string()
    }

    pub fn keys(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", &self.session, keys]);
    }

    pub fn resize(&self, width: u16, height: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            &self.session,
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }

    /// Waits until the terminal's modes (see [`modes`](Tmux::modes)) are `modes`, or fails with the screen.
    pub fn wait_for_modes(&self, modes: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.modes() != modes {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for the modes {modes} (they are {}); screen:\n{}",
                self.modes(),
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Presses q and waits for the command to write its exit code into `done`; returns it.
    pub fn quit(&self, done: &std::path::Path, timeout: Duration) -> String {
        self.keys("q");
        exit_code_in(done, timeout)
    }

    /// Waits until the screen satisfies `done`, or fails with the last screen.
    pub fn wait_for(&self, what: &str, timeout: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-session", "-t", &self.session]);
    }
}

/// The p50 of a worker's row in the sample-time pane: the only row with four numbers (p50 p90 p99 max).
pub fn sample_p50(screen: &str, worker: &str) -> Option<f64> {
    screen.lines().find_map(|line| {
        let at = line.find(&format!("{worker:<12} "))?;
        let numbers: Vec<f64> = line[at + 12..]
            .split_whitespace()
            .take(4)
            .map_while(|t| t.parse().ok())
            .collect();
        (numbers.len() == 4).then(|| numbers[0])
    })
}

/// The pid of the process started as `program` with `TMPDIR=dir`.
pub fn pid_in(program: &str, dir: &std::path::Path) -> Option<u32> {
    let marker = format!("TMPDIR={}", dir.display());
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let ours = cmdline.split(|&b| b == 0).next()? == program.as_bytes()
                && environ.split(|&b| b == 0).any(|v| v == marker.as_bytes());
            ours.then_some(pid)
        })
}

/// Waits for the command to write its exit code into `done`; returns it.
pub fn exit_code_in(done: &std::path::Path, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    while !done.exists() {
        assert!(Instant::now() < deadline, "no exit within {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The shell may have created the file and not yet written it.
    std::thread::sleep(Duration::from_millis(200));
    std::fs::read_to_string(done).unwrap().trim().to_string()
}

/// A live session of libtorch that would go on for ever, in tmux, started by a shell that survives a hang-up (as a
/// login shell's job would be reported): the tmux session, golow's pid, and where its exit code and summary go.
pub fn endless_live_run(
    tmp: &std::path::Path,
) -> (Tmux, u32, std::path::PathBuf, std::path::PathBuf) {
    let summary = tmp.join("summary.json");
    let done = tmp.join("exit-code");
    let command = format!(
        "trap : HUP; cd {tmp} && TMPDIR={tmp} {golow} run --impl libtorch --model resnet18 --resolution 32 \
         --batch-size 4 --steps 100000 --summary-json {summary}; echo $? > {done}; sleep 30",
        tmp = tmp.display(),
        golow = env!("CARGO_BIN_EXE_golow"),
        summary = summary.display(),
        done = done.display(),
    );
    let tmux = Tmux::start(&command, 160, 48);
    tmux.wait_for("libtorch's sample times", Duration::from_secs(120), |s| {
        sample_p50(s, "libtorch").is_some()
    });
    let pid = pid_in(env!("CARGO_BIN_EXE_golow"), tmp).expect("golow runs");
    (tmux, pid, summary, done)
}

/// What was recorded replays with no warning (the recording was closed), to a summary of a stopped worker.
pub fn closed_and_stopped(tmp: &std::path::Path, summary: &std::path::Path) {
    let summary = super::summary(summary);
    assert_eq!(super::worker(&summary, "libtorch")["status"], "stopped");
    let recordings: Vec<_> = std::fs::read_dir(tmp.join("recordings"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(recordings.len(), 1, "{recordings:?}");
    let out = super::golow(
        tmp,
        &["replay", &recordings[0].display().to_string(), "--headless"],
    );
    assert!(out.status.success(), "{}", super::text(&out.stderr));
    assert!(
        !super::text(&out.stderr).contains("warning"),
        "{}",
        super::text(&out.stderr)
    );
}
