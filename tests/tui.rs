//! The live TUI in a real terminal (tmux): start a tiny CPU session, wait for numbers, switch to the
//! compare view, shrink the terminal to a few cells and back, quit with q; then replay what it recorded
//! and move through the timeline.

mod common;

use std::time::{Duration, Instant};

use common::tmux::{Tmux, closed_and_stopped, endless_live_run, exit_code_in, pid_in, sample_p50};

#[test]
fn the_live_view_shows_numbers_compares_survives_resizing_and_quits_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("summary.json");
    let done = tmp.path().join("exit-code");
    let command = format!(
        "cd {tmp} && TMPDIR={tmp} {golow} run --impl libtorch,pytorch --model resnet18 --batch-size 4 --steps 100000 --summary-json {summary}; echo $? > {done}; sleep 30",
        tmp = tmp.path().display(),
        golow = env!("CARGO_BIN_EXE_golow"),
        summary = summary.display(),
        done = done.display(),
    );
    let tmux = Tmux::start(&command, 200, 60);
    let screen = tmux.wait_for(
        "both workers' sample times",
        Duration::from_secs(120),
        |s| sample_p50(s, "libtorch").is_some() && sample_p50(s, "pytorch").is_some(),
    );
    for worker in ["libtorch", "pytorch"] {
        let p50 = sample_p50(&screen, worker).unwrap();
        assert!(p50 > 0.0 && p50 < 1000.0, "{worker} p50 {p50}:\n{screen}");
    }
    assert!(
        screen.contains("no NVIDIA GPU") || screen.contains("GPU utilisation"),
        "{screen}"
    );
    assert!(screen.contains("● REC recordings/"), "{screen}");

    tmux.keys("c");
    tmux.wait_for("the compare view", Duration::from_secs(30), |s| {
        s.contains("libtorch  vs  pytorch") && s.contains("ratio")
    });
    // Both workers' operators, live: side by side in the compare view, and in the operators pane (0), maximised
    // with one operator charted; the same key goes back.
    tmux.wait_for("the operators side by side", Duration::from_secs(60), |s| {
        s.contains("operators per profiled step") && s.contains("aten::convolution_backward")
    });
    tmux.keys("0");
    tmux.wait_for("the operators pane", Duration::from_secs(30), |s| {
        s.contains("self ms per profiled step") && s.contains("calls per step")
    });
    tmux.keys("0");
    tmux.wait_for("the dashboard", Duration::from_secs(30), |s| {
        s.contains("operators: self time per profiled step") && s.contains("sample time")
    });
    tmux.keys("c");
    tmux.wait_for("the compare view again", Duration::from_secs(30), |s| {
        s.contains("libtorch  vs  pytorch")
    });

    // At 12×4 the notice wraps to 12 columns and its first 4 rows show: its words from the start, the minimum among
    // them (the header's "golow" alone, which the compare view showed already, would not do).
    tmux.resize(12, 4);
    tmux.wait_for("the too-small notice", Duration::from_secs(10), |s| {
        let words = s.split_whitespace().collect::<Vec<_>>().join(" ");
        words.starts_with("golow needs a terminal of at least 60×16")
    });
    tmux.resize(200, 60);
    tmux.wait_for("the full view again", Duration::from_secs(10), |s| {
        s.contains("libtorch  vs  pytorch")
    });

    // Stop one worker (the first, libtorch); the other carries on.
    tmux.keys("s");
    tmux.keys("1");
    tmux.wait_for("libtorch to stop", Duration::from_secs(30), |s| {
        s.contains("libtorch stopped")
    });

    let code = tmux.quit(&done, Duration::from_secs(60));
    assert_eq!(code, "0", "exit code after q; screen:\n{}", tmux.screen());
    let s = common::summary(&summary);
    for worker in ["libtorch", "pytorch"] {
        let w = common::worker(&s, worker);
        assert_eq!(w["status"], "stopped", "{w}");
        assert!(w["steps"].as_u64().unwrap() > 2, "{w}");
    }
    // The terminal is back to normal: the summary table was printed after leaving the TUI.
    let after = tmux.screen();
    assert!(
        after.contains("impl") && after.contains("stopped"),
        "{after}"
    );
    drop(tmux);

    // q closed the recording cleanly, and it replays to the very summary the live run wrote.
    let recordings: Vec<_> = std::fs::read_dir(tmp.path().join("recordings"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(recordings.len(), 1, "{recordings:?}");
    let recording = &recordings[0];
    let replayed = tmp.path().join("replayed.json");
    let out = common::golow(
        tmp.path(),
        &[
            "replay",
            &recording.display().to_string(),
            "--headless",
            "--summary-json",
            &replayed.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    assert!(
        !common::text(&out.stderr).contains("warning"),
        "{}",
        common::text(&out.stderr)
    );
    assert_eq!(common::summary(&replayed), common::summary(&summary));
    let steps = common::worker(&common::summary(&summary), "libtorch")["steps"]
        .as_u64()
        .unwrap();
    replay_moves_through_time(recording, steps);
}

/// A field of every thread of `pid`'s status file.
fn per_thread(pid: u32, field: &str) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

/// Sleeps that a wake-up ended, over every thread of `pid`.
fn wakeups(pid: u32) -> u64 {
    per_thread(pid, "voluntary_ctxt_switches:")
        .iter()
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

#[test]
fn the_live_view_sleeps_until_something_changes_and_stays_on_the_cpu_it_is_given() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        cpus >= 2,
        "this test needs two CPUs to tell pinned from not"
    );
    let last = (cpus - 1).to_string();
    let tmp = tempfile::tempdir().unwrap();
    let done = tmp.path().join("exit-code");
    let golow = env!("CARGO_BIN_EXE_golow");
    let command = format!(
        "cd {tmp} && TMPDIR={tmp} {golow} run --impl libtorch --model resnet18 --batch-size 4 --steps 20 --no-record \
         --monitor-cpu {last}; echo $? > {done}; sleep 30",
        tmp = tmp.path().display(),
        done = done.display(),
    );
    let tmux = Tmux::start(&command, 120, 40);
    tmux.wait_for("the session's end", Duration::from_secs(120), |s| {
        s.contains("ENDED")
    });
    let pid = pid_in(golow, tmp.path()).expect("golow is still showing the ended session");
    for cpus in per_thread(pid, "Cpus_allowed_list:") {
        assert_eq!(cpus, last, "every thread of golow on --monitor-cpu {last}");
    }
    // Nothing arrives and nothing is pressed: a view on a timer of its own would wake 10 times a second.
    let before = wakeups(pid);
    std::thread::sleep(Duration::from_secs(3));
    let woken = wakeups(pid) - before;
    assert!(woken <= 3, "{woken} wake-ups in 3 s with nothing to show");
    assert_eq!(tmux.quit(&done, Duration::from_secs(30)), "0");
}

/// The position shown on the timeline bar, in seconds ("▶ 1× 00:00:03 / 00:00:20").
fn position(screen: &str) -> Option<u64> {
    let line = screen.lines().find(|l| l.contains(" / 00:"))?;
    let at = line.find(" / ")?;
    let clock = line[..at].split_whitespace().last()?;
    let parts: Vec<u64> = clock.split(':').map_while(|p| p.parse().ok()).collect();
    (parts.len() == 3).then(|| parts[0] * 3600 + parts[1] * 60 + parts[2])
}

/// The replay view moves through time on its keys, and `--metrics-addr` serves the state where the player is: at
/// the end, the `libtorch` worker's `steps` steps; back at the start, none.
fn replay_moves_through_time(recording: &std::path::Path, steps: u64) {
    let done = recording.with_extension("exit");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let command = format!(
        "{golow} replay {file} --metrics-addr {port}; echo $? > {done}; sleep 30",
        golow = env!("CARGO_BIN_EXE_golow"),
        file = recording.display(),
        done = done.display(),
    );
    let addr = format!("127.0.0.1:{port}");
    let libtorch_steps = || {
        common::metric(
            &common::get(&addr, "/metrics").1,
            r#"golow_steps_total{worker="libtorch"}"#,
        )
    };
    let tmux = Tmux::start(&command, 160, 45);
    let screen = tmux.wait_for("the replay to play", Duration::from_secs(30), |s| {
        s.contains("REPLAY") && position(s).is_some_and(|p| p >= 2)
    });
    assert!(screen.contains("libtorch"), "{screen}");
    tmux.keys("G");
    let end = tmux.wait_for("the end of the recording", Duration::from_secs(10), |s| {
        s.contains("⏸") && s.contains("libtorch stopped")
    });
    let end_position = position(&end).unwrap();
    assert_eq!(libtorch_steps(), Some(steps as f64));
    tmux.keys("g");
    tmux.wait_for("the start again", Duration::from_secs(10), |s| {
        position(s) == Some(0)
    });
    assert_eq!(libtorch_steps().unwrap_or(0.0), 0.0);
    tmux.keys("]");
    tmux.keys("]");
    tmux.keys(" ");
    tmux.wait_for("4× playback to move on", Duration::from_secs(10), |s| {
        s.contains("4×") && position(s).is_some_and(|p| p >= 2 && p <= end_position)
    });
    assert_eq!(tmux.quit(&done, Duration::from_secs(10)), "0");
}

/// The sweep view in a real terminal: curves fill in as cells finish; q stops the sweep mid-way (exit 130, the
/// finished cells kept); a recorded sweep replays in the same view.
#[test]
fn the_sweep_view_fills_in_stops_on_q_and_replays() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let done = tmp.path().join("sweep.exit");
    let command = format!(
        "cd {tmp} && {golow} sweep --impl libtorch --mode eval --model resnet18 --batch-sizes 4,8,16,32 \
         --resolutions 32 --steps 40 --warmup 1 --out {dir}; echo $? > {done}; sleep 30",
        tmp = tmp.path().display(),
        golow = env!("CARGO_BIN_EXE_golow"),
        dir = dir.display(),
        done = done.display(),
    );
    let tmux = Tmux::start(&command, 160, 44);
    let screen = tmux.wait_for("a finished cell", Duration::from_secs(120), |s| {
        s.contains("1/4 cells")
    });
    assert!(
        screen.contains("ms per sample (median)") && screen.contains("golow sweep"),
        "{screen}"
    );
    assert!(screen.contains("cell 1/4 batch 4 at 32 px: ok"), "{screen}");
    assert_eq!(tmux.quit(&done, Duration::from_secs(60)), "130");
    let results = common::summary(&dir.join("results.json"));
    let rows = results["rows"].as_array().unwrap();
    assert!((1..4).contains(&rows.len()), "{rows:?}");
    drop(tmux);

    let command = format!(
        "{golow} replay {dir}; sleep 30",
        golow = env!("CARGO_BIN_EXE_golow"),
        dir = dir.display(),
    );
    let tmux = Tmux::start(&command, 160, 44);
    let screen = tmux.wait_for("the recorded sweep", Duration::from_secs(20), |s| {
        s.contains("recorded sweep")
    });
    assert!(screen.contains("samples/s"), "{screen}");
    tmux.keys("x");
    tmux.wait_for("the resolution axis", Duration::from_secs(10), |s| {
        s.contains("against resolution 32 (log 2) at batch 4")
    });
    tmux.keys("q");
    tmux.wait_for("the shell again", Duration::from_secs(10), |s| {
        !s.contains("recorded sweep")
    });
}

/// A DDP job on gloo whose rank 1 stalls 40 ms before each step: it arrives last at every all-reduce.
const STRAGGLING_DDP: &str = "\
import time, torch, torch.distributed as dist
dist.init_process_group('gloo')
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    if rank == 1:
        time.sleep(0.04)
    opt.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
";

#[test]
fn a_live_torchrun_job_shows_its_ranks_and_names_the_straggler() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("ddp.py"), STRAGGLING_DDP).unwrap();
    let done = tmp.path().join("exit-code");
    let venv = std::path::Path::new(common::PYTHON).parent().unwrap();
    let command = format!(
        "cd {tmp} && PATH={venv}:$PATH TMPDIR={tmp} {golow} run --no-record --threads 1 --cmd 'ddp=torchrun --standalone --nproc-per-node 2 ddp.py'; echo $? > {done}; sleep 30",
        tmp = tmp.path().display(),
        venv = venv.display(),
        golow = env!("CARGO_BIN_EXE_golow"),
        done = done.display(),
    );
    let tmux = Tmux::start(&command, 200, 60);
    tmux.wait_for("the ranks pane", Duration::from_secs(120), |s| {
        s.contains("ranks: step time across ranks") && s.contains("2 ranks")
    });
    tmux.keys("9");
    let screen = tmux.wait_for("the straggler named", Duration::from_secs(60), |s| {
        s.contains("straggler: rank 1")
    });
    assert!(screen.contains("last most often: rank 1"), "{screen}");
    tmux.keys("Enter");
    tmux.wait_for("a row per rank", Duration::from_secs(10), |s| {
        s.contains("pid") && s.contains("rss")
    });
    let code = tmux.quit(&done, Duration::from_secs(60));
    assert_eq!(code, "0", "exit code after q; screen:\n{}", tmux.screen());
}

/// SIGTERM ends the live view as q does: the workers stopped, the recording closed, the summary written, and the
/// terminal given back as it was (no alternate screen, the cursor shown, no mouse tracking); golow exits 143.
#[test]
fn sigterm_closes_the_live_view_and_gives_the_terminal_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (tmux, pid, summary, done) = endless_live_run(tmp.path());
    assert!(
        tmux.modes().starts_with('1'),
        "the live view is in the alternate screen"
    );
    // SAFETY: signals the golow this test started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert_eq!(exit_code_in(&done, Duration::from_secs(60)), "143");
    assert_eq!(tmux.modes(), "0 1 0", "{}", tmux.screen());
    closed_and_stopped(tmp.path(), &summary);
}

/// Closes `tmux`'s terminal under the live session of golow started with `TMPDIR=dir`, and checks that the session
/// ended as q ends it: nothing golow started is left, the recording is closed and the summary written.
fn close_the_terminal_under(tmux: Tmux, dir: &std::path::Path) {
    tmux.wait_for("libtorch's sample times", Duration::from_secs(120), |s| {
        sample_p50(s, "libtorch").is_some()
    });
    let pid = pid_in(env!("CARGO_BIN_EXE_golow"), dir).expect("golow runs");
    tmux.tmux(&["kill-session", "-t", &tmux.session]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "golow outlived its terminal");
        std::thread::sleep(Duration::from_millis(100));
    }
    closed_and_stopped(dir, &dir.join("summary.json"));
    assert!(
        pid_in("golow-worker", dir).is_none()
            && common::left_in(dir)
                .iter()
                .all(|name| !name.starts_with("golow-session")),
        "{:?}",
        common::left_in(dir)
    );
}

/// A closed terminal ends the session cleanly whether golow leads the terminal's session (the kernel hangs it up)
/// or a shell in front of it keeps the hang-up to itself (golow then finds its terminal gone).
#[test]
fn a_closed_terminal_ends_the_live_session_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().display().to_string();
    let tmpdir = format!("TMPDIR={dir}");
    let summary = tmp.path().join("summary.json").display().to_string();
    let golow = env!("CARGO_BIN_EXE_golow");
    let argv = [
        vec!["-c", &dir, "env", &tmpdir, golow, "run"],
        common::small_run("libtorch", "100000"),
        vec!["--summary-json", &summary],
    ]
    .concat();
    close_the_terminal_under(Tmux::start_argv(&argv, 160, 48), tmp.path());

    let behind_a_shell = tempfile::tempdir().unwrap();
    let (tmux, _, _, _) = endless_live_run(behind_a_shell.path());
    close_the_terminal_under(tmux, behind_a_shell.path());
}

/// SIGTERM ends the sweep view as q does: the running cell stopped, the finished ones kept, the terminal given back;
/// golow exits 143.
#[test]
fn sigterm_closes_the_sweep_view_and_keeps_its_finished_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let done = tmp.path().join("sweep.exit");
    let command = format!(
        "cd {tmp} && TMPDIR={tmp} {golow} sweep --impl libtorch --mode eval --model resnet18 \
         --batch-sizes 4,8,16,32 --resolutions 32 --steps 40 --warmup 1 --out {dir}; echo $? > {done}; sleep 30",
        tmp = tmp.path().display(),
        golow = env!("CARGO_BIN_EXE_golow"),
        dir = dir.display(),
        done = done.display(),
    );
    let tmux = Tmux::start(&command, 160, 44);
    tmux.wait_for("a finished cell", Duration::from_secs(120), |s| {
        s.contains("1/4 cells")
    });
    let pid = pid_in(env!("CARGO_BIN_EXE_golow"), tmp.path()).expect("golow runs");
    // SAFETY: signals the golow this test started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert_eq!(exit_code_in(&done, Duration::from_secs(60)), "143");
    assert_eq!(tmux.modes(), "0 1 0", "{}", tmux.screen());
    let results = common::summary(&dir.join("results.json"));
    let rows = results["rows"].as_array().unwrap();
    assert!((1..4).contains(&rows.len()), "{rows:?}");
}
