//! What the live view costs, measured on a real session in a real terminal (tmux):
//! 1. the monitor's own CPU (the `golow` process alone, not its workers) in steady state at 10 frames/s,
//!    at 120×40 and 200×60, from the scheduler's exact per-thread run time; target ≤ 1% of a core;
//! 2. `libtorch` throughput under the full TUI against the same run headless, alternating TUI and
//!    headless runs, median ratio, target ≥ 0.98.
//!
//! `GOLOW_BENCH_RUNS` (default 3 pairs), `GOLOW_BENCH_CPU_RUNS` (default 3 sessions per size, median
//! reported) and `GOLOW_BENCH_CPU_SECONDS` (default 30) scale it; `GOLOW_BENCH_CPU_ARGS` replaces the
//! CPU measurement's workload (default: the default comparison). `GOLOW_BENCH_BASELINE=PATH` names
//! another build's `golow` (with its `golow-worker` and collector beside it): the CPU measurement then
//! alternates the two builds session by session, and reports both.

mod common;

use common::{env_or, median};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const GOLOW: &str = env!("CARGO_BIN_EXE_golow");

/// The builds whose monitor CPU is measured: this one, and a baseline to alternate with.
fn builds() -> Vec<(&'static str, String)> {
    let mut builds = vec![("this build", GOLOW.to_string())];
    if let Ok(baseline) = std::env::var("GOLOW_BENCH_BASELINE") {
        builds.push(("baseline", baseline));
    }
    builds
}

fn tmux(args: &[&str]) {
    let _ = Command::new("tmux").args(args).status();
}

/// The pid of the `golow` process (not its workers) started as `program` with `TMPDIR=dir`.
fn golow_pid(program: &str, dir: &Path) -> Option<u32> {
    let marker = format!("TMPDIR={}", dir.display());
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let golow = cmdline.split(|&b| b == 0).next()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let has_marker = environ.split(|&b| b == 0).any(|v| v == marker.as_bytes());
            (golow == program.as_bytes() && has_marker).then_some(pid)
        })
}

/// Nanoseconds on a CPU per thread of `pid` (the scheduler's exact sum, not tick samples), by thread
/// name (threads of one name summed).
fn thread_ns(pid: u32) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let name = std::fs::read_to_string(task.path().join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        let Some(ns) = schedstat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 += ns,
            None => out.push((name, ns)),
        }
    }
    out
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs golow in a 200×60 tmux terminal; returns when it exited.
fn run_in_tmux(args: &str, dir: &Path, during: impl FnOnce(u32)) {
    run_in_tmux_sized(GOLOW, args, dir, (200, 60), during)
}

fn run_in_tmux_sized(
    program: &str,
    args: &str,
    dir: &Path,
    (width, height): (u16, u16),
    during: impl FnOnce(u32),
) {
    let done = dir.join("done");
    let _ = std::fs::remove_file(&done);
    let session = session_name();
    let command = format!(
        "cd {dir} && TMPDIR={dir} {program} run {args}; touch {done}",
        dir = dir.display(),
        done = done.display()
    );
    let (w, h) = (width.to_string(), height.to_string());
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        &w,
        "-y",
        &h,
        &command,
    ]);
    let mut pid = None;
    wait_until("golow to start", Duration::from_secs(60), || {
        pid = golow_pid(program, dir);
        pid.is_some() || done.exists()
    });
    if let Some(pid) = pid {
        during(pid);
    }
    wait_until("golow to finish", Duration::from_secs(1200), || {
        done.exists()
    });
    tmux(&["kill-session", "-t", &session]);
}

fn session_name() -> String {
    format!("golow-bench-{}", std::process::id())
}

/// The live view stays open after the session ends, for the user to read: press q then.
fn quit_when_ended() {
    wait_until("the session to end", Duration::from_secs(1200), || {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &session_name()])
            .output();
        out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("[ENDED"))
    });
    tmux(&["send-keys", "-t", &session_name(), "q"]);
}

fn throughput(summary: &Path) -> f64 {
    let text = std::fs::read_to_string(summary).expect("summary written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("summary JSON");
    json["workers"][0]["throughput_samples_per_s"]
        .as_f64()
        .expect("throughput")
}

/// The `golow` process's own CPU over `seconds` of a session in a terminal of `size`, after 10 s to settle, in % of a
/// core, and its share per thread.
fn monitor_cpu(
    program: &str,
    workload: &str,
    dir: &Path,
    size: (u16, u16),
    seconds: u64,
) -> (f64, Vec<String>) {
    let mut measured = 0.0;
    let mut threads = Vec::new();
    run_in_tmux_sized(program, workload, dir, size, |pid| {
        std::thread::sleep(Duration::from_secs(10));
        let (t0, threads0) = (Instant::now(), thread_ns(pid));
        std::thread::sleep(Duration::from_secs(seconds));
        let wall = t0.elapsed().as_secs_f64();
        for (name, ns) in thread_ns(pid) {
            let before = threads0
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |&(_, t)| t);
            let share = (ns - before) as f64 / 1e9 / wall * 100.0;
            measured += share;
            threads.push(format!("{name} {share:.2}%"));
        }
        tmux(&["send-keys", "-t", &session_name(), "q"]);
    });
    (measured, threads)
}

fn main() {
    let dir: PathBuf = std::env::temp_dir().join(format!("golow-tui-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");

    let seconds = env_or("GOLOW_BENCH_CPU_SECONDS", 30);
    let cpu_runs = env_or("GOLOW_BENCH_CPU_RUNS", 3);
    // The default comparison (libtorch and pytorch, ResNet-50, alternating), run long enough.
    let cpu_workload =
        std::env::var("GOLOW_BENCH_CPU_ARGS").unwrap_or_else(|_| "--steps 100000".to_string());
    println!("monitor CPU workload: golow run {cpu_workload}");
    let builds = builds();
    let mut cpu = 0.0f64;
    for size in [(120, 40), (200, 60)] {
        let mut totals: Vec<Vec<f64>> = vec![Vec::new(); builds.len()];
        for run in 1..=cpu_runs {
            // Alternate which build goes first, so drift affects both alike.
            let mut order: Vec<usize> = (0..builds.len()).collect();
            if run % 2 == 0 {
                order.reverse();
            }
            for b in order {
                let (label, program) = &builds[b];
                let (measured, threads) = monitor_cpu(program, &cpu_workload, &dir, size, seconds);
                println!(
                    "  {}×{} session {run} ({label}): {measured:.2}% of a core ({})",
                    size.0,
                    size.1,
                    threads.join(", ")
                );
                totals[b].push(measured);
            }
        }
        for ((label, _), totals) in builds.iter().zip(&mut totals) {
            let spread = (
                totals.iter().copied().fold(f64::INFINITY, f64::min),
                totals.iter().copied().fold(0.0, f64::max),
            );
            let measured = median(totals);
            println!(
                "monitor CPU at {}×{} ({label}; golow process alone, TUI at up to 10 frames/s, {seconds} s steady state, median of {cpu_runs} sessions, range {:.2}–{:.2}): {measured:.2}% of a core (target ≤ 1%)",
                size.0, size.1, spread.0, spread.1
            );
            if *label == "this build" {
                cpu = cpu.max(measured);
            }
        }
    }

    let runs = env_or("GOLOW_BENCH_RUNS", 3);
    if runs == 0 {
        let _ = std::fs::remove_dir_all(&dir);
        std::process::exit(if cpu > 1.0 { 1 } else { 0 });
    }
    let workload =
        "--impl libtorch --model resnet50 --resolution 32 --batch-size 16 --steps 60 --warmup 5";
    let (mut ratios, mut tui, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let summary = dir.join("summary.json");
        let mut pair = [0.0; 2];
        // Alternate which goes first, so drift affects both alike.
        for &with_tui in if run % 2 == 0 {
            &[true, false]
        } else {
            &[false, true]
        } {
            let args = format!(
                "{workload} --summary-json {}{}",
                summary.display(),
                if with_tui { "" } else { " --headless" }
            );
            run_in_tmux(&args, &dir, |_| {
                if with_tui {
                    quit_when_ended();
                }
            });
            pair[usize::from(!with_tui)] = throughput(&summary);
        }
        println!(
            "  run {}: TUI {:.1} samples/s, headless {:.1} samples/s, ratio {:.3}",
            run + 1,
            pair[0],
            pair[1],
            pair[0] / pair[1]
        );
        tui.push(pair[0]);
        bare.push(pair[1]);
        ratios.push(pair[0] / pair[1]);
    }
    let ratio = median(&mut ratios);
    println!(
        "libtorch under the TUI: median {:.1} vs {:.1} samples/s headless, median ratio {ratio:.3} (target ≥ 0.98)",
        median(&mut tui),
        median(&mut bare)
    );
    let _ = std::fs::remove_dir_all(&dir);
    if cpu > 1.0 || ratio < 0.98 {
        std::process::exit(1);
    }
}
