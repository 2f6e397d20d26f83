//! The observer effect: what watching a run costs the run, measured on real sessions in a real terminal (tmux).
//!
//! 1. **Steady state**, per way of running the same libtorch worker — alone (no golow at all), under `golow run
//!    --headless`, under the live view at 120×40 and 200×60 — over `GOLOW_BENCH_CPU_SECONDS` (default 30) after
//!    10 s to settle: the monitor's own CPU (the `golow` process alone, from the scheduler's exact per-thread run
//!    time; target ≤ 1% of a core), its wake-ups per second (voluntary context switches: each is a sleep that a
//!    wake-up ends), how often the worker's threads were preempted, the terminal's (tmux's) CPU and wake-ups, and
//!    the bytes written to the terminal per second.
//! 2. **Throughput**, in `GOLOW_BENCH_RUNS` (default 7) rounds of the same short run alone, headless and under
//!    the live view at 200×60, in an order that rotates each round so that drift affects all alike: per round
//!    the ratios live/headless (target ≥ 0.98) and headless/alone (target ≥ 0.99), reported as median and range.
//!
//! `GOLOW_BENCH_CPU_RUNS` (default 3) repeats the steady state (medians reported); `GOLOW_BENCH_CPU_ARGS`
//! replaces the golow sessions' workload there. `GOLOW_BENCH_BASELINE=PATH` names another build's `golow`
//! (with its `golow-worker` and collector beside it): every golow measurement then alternates the two builds,
//! for before-and-after figures from one run. The process exits non-zero when this build misses a target.

mod common;

use common::{env_or, median};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use golow_protocol::config::{GpuPolicy, Mode, Model, Optimiser, WorkerConfig};

const GOLOW: &str = env!("CARGO_BIN_EXE_golow");
const SIZE: (u16, u16) = (200, 60);
/// The run every measurement makes, as `golow run` arguments and as the worker's own configuration.
const BATCH: u32 = 16;
const RESOLUTION: u32 = 32;
const WARMUP: u64 = 5;
const SHORT_STEPS: u64 = 60;
const LONG_STEPS: u64 = 100_000;

fn golow_args(steps: u64) -> String {
    format!(
        "--impl libtorch --model resnet50 --resolution {RESOLUTION} --batch-size {BATCH} --steps {steps} --warmup {WARMUP}"
    )
}

/// A build of golow: the monitor, with its worker beside it.
struct Build {
    label: &'static str,
    golow: PathBuf,
}

impl Build {
    fn worker(&self) -> PathBuf {
        self.golow.with_file_name("golow-worker")
    }
}

/// The builds measured: this one, and a baseline to alternate with.
fn builds() -> Vec<Build> {
    let mut builds = vec![Build {
        label: "this build",
        golow: PathBuf::from(GOLOW),
    }];
    if let Ok(baseline) = std::env::var("GOLOW_BENCH_BASELINE") {
        builds.push(Build {
            label: "baseline",
            golow: PathBuf::from(baseline),
        });
    }
    builds
}

/// One way of running the worker.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    /// `golow-worker` by itself, its events to a file.
    Alone,
    Headless,
    Live((u16, u16)),
}

impl Way {
    fn name(self) -> String {
        match self {
            Way::Alone => "alone".into(),
            Way::Headless => "headless".into(),
            Way::Live((w, h)) => format!("live {w}×{h}"),
        }
    }
}

fn tmux(args: &[&str]) {
    // Ending a session that already ended by itself is not an error worth a line.
    let _ = Command::new("tmux")
        .args(args)
        .stderr(std::process::Stdio::null())
        .status();
}

fn tmux_output(args: &[&str]) -> String {
    Command::new("tmux")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn session_name() -> String {
    format!("golow-bench-{}", std::process::id())
}

fn wait_until(what: &str, timeout: Duration, every: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(every);
    }
}

/// The pid of the process started as `program` with `TMPDIR=dir` in its environment.
fn pid_of(program: &Path, dir: &Path) -> Option<u32> {
    let marker = format!("TMPDIR={}", dir.display());
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let argv0 = cmdline.split(|&b| b == 0).next()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let has_marker = environ.split(|&b| b == 0).any(|v| v == marker.as_bytes());
            (argv0 == program.as_os_str().as_encoded_bytes() && has_marker).then_some(pid)
        })
}

/// The children of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// golow's training worker: its child that runs `golow-worker run` (not a preparation step).
fn worker_of(golow: u32) -> Option<u32> {
    children(golow).into_iter().find(|&child| {
        std::fs::read(format!("/proc/{child}/cmdline"))
            .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == b"run"))
    })
}

fn tmux_server() -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (comm.trim() == "tmux: server").then_some(pid)
        })
}

/// What the scheduler counted for one thread (or the sum of threads of one name).
#[derive(Clone, Default)]
struct Counts {
    run_ns: u64,
    /// Voluntary context switches: sleeps, each ended by a wake-up.
    wakeups: u64,
    /// Involuntary context switches: the thread was preempted.
    preempted: u64,
}

/// Per thread name, the counts of every thread of `pid`.
fn thread_counts(pid: u32) -> Vec<(String, Counts)> {
    let mut out: Vec<(String, Counts)> = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let read = |file: &str| std::fs::read_to_string(task.path().join(file)).unwrap_or_default();
        let name = read("comm").trim().to_string();
        let status = read("status");
        let field = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let Some(run_ns) = read("schedstat")
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        let counts = Counts {
            run_ns,
            wakeups: field("voluntary_ctxt_switches:"),
            preempted: field("nonvoluntary_ctxt_switches:"),
        };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => {
                c.run_ns += counts.run_ns;
                c.wakeups += counts.wakeups;
                c.preempted += counts.preempted;
            }
            None => out.push((name, counts)),
        }
    }
    out
}

fn total(threads: &[(String, Counts)]) -> Counts {
    threads.iter().fold(Counts::default(), |a, (_, c)| Counts {
        run_ns: a.run_ns + c.run_ns,
        wakeups: a.wakeups + c.wakeups,
        preempted: a.preempted + c.preempted,
    })
}

/// Rates per second between two readings of the same threads.
struct Rates {
    cpu_percent: f64,
    wakeups: f64,
    preempted: f64,
}

fn rates(before: &Counts, after: &Counts, seconds: f64) -> Rates {
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / seconds;
    Rates {
        cpu_percent: per_s(before.run_ns, after.run_ns) / 1e7,
        wakeups: per_s(before.wakeups, after.wakeups),
        preempted: per_s(before.preempted, after.preempted),
    }
}

/// The files the worker needs when it runs alone, made as `golow run` makes them for its session.
fn prepare_alone(build: &Build, dir: &Path, steps: u64) -> PathBuf {
    let spec = golow_data::DatasetSpec::parse("synthetic").expect("synthetic data");
    let data = golow_data::load(&spec, RESOLUTION).expect("synthetic data");
    let data_dir = dir.join("data");
    let meta = golow_data::write_cache(&data, &data_dir).expect("data cache");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let config = WorkerConfig {
        model: Model::Resnet50,
        mode: Mode::Train,
        dataset: "synthetic".into(),
        data_dir,
        weights: dir.join("weights.safetensors"),
        torchscript: None,
        aoti: None,
        channels: meta.channels,
        classes: meta.classes,
        batch_size: BATCH,
        resolution: RESOLUTION,
        steps,
        warmup: WARMUP,
        device: "cpu".into(),
        threads: cores as u32,
        seed: 0,
        pinned: false,
        optimiser: Optimiser::default(),
        gpu_policy: GpuPolicy::default(),
        compile_mode: Default::default(),
        // What the view costs, not what recording operators does.
        ops_every: 0,
        ops_library: None,
    };
    let path = dir.join(format!("config-{steps}.json"));
    std::fs::write(&path, serde_json::to_vec(&config).expect("config")).expect("config");
    let status = Command::new(build.worker())
        .args(["init-weights", "--config"])
        .arg(&path)
        .status()
        .expect("golow-worker init-weights");
    assert!(status.success(), "init-weights failed");
    path
}

/// A run in a tmux terminal of `size`: the command line, and where its result goes.
struct InTerminal<'a> {
    dir: &'a Path,
    size: (u16, u16),
}

impl InTerminal<'_> {
    /// Starts `command` (a shell line) in a new tmux session, its output to the terminal counted in `ttyout`.
    fn start(&self, command: &str) -> PathBuf {
        let done = self.dir.join("done");
        let _ = std::fs::remove_file(&done);
        let full = format!(
            "cd {dir} && TMPDIR={dir} {command}; touch {done}",
            dir = self.dir.display(),
            done = done.display()
        );
        let (w, h) = (self.size.0.to_string(), self.size.1.to_string());
        let session = session_name();
        tmux(&[
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            &w,
            "-y",
            &h,
            &full,
        ]);
        let ttyout = self.dir.join("ttyout");
        let _ = std::fs::remove_file(&ttyout);
        tmux(&[
            "pipe-pane",
            "-o",
            "-t",
            &session,
            &format!("cat > {}", ttyout.display()),
        ]);
        done
    }

    fn wait_done(done: &Path) {
        wait_until(
            "the run to finish",
            Duration::from_secs(1200),
            Duration::from_millis(200),
            || done.exists(),
        );
        tmux(&["kill-session", "-t", &session_name()]);
    }
}

fn command_line(build: &Build, way: Way, config: &Path, steps: u64, summary: &Path) -> String {
    match way {
        Way::Alone => format!(
            "{} run --impl libtorch --config {} > {}",
            build.worker().display(),
            config.display(),
            summary.display()
        ),
        Way::Headless => format!(
            "{} run {} --summary-json {} --headless",
            build.golow.display(),
            golow_args(steps),
            summary.display()
        ),
        Way::Live(_) => format!(
            "{} run {} --summary-json {}",
            build.golow.display(),
            golow_args(steps),
            summary.display()
        ),
    }
}

/// The live view stays open after the session ends, for the user to read. The bench waits, without disturbing the
/// run, for its worker to end, and only then looks at the screen and presses q.
fn quit_live_view_when_ended(golow: &Path, dir: &Path) {
    let mut worker = None;
    wait_until(
        "the worker to start",
        Duration::from_secs(120),
        Duration::from_millis(200),
        || {
            worker = pid_of(golow, dir).and_then(worker_of);
            worker.is_some()
        },
    );
    let worker = worker.expect("found");
    wait_until(
        "the worker to end",
        Duration::from_secs(1200),
        Duration::from_millis(200),
        || !Path::new(&format!("/proc/{worker}")).exists(),
    );
    wait_until(
        "the session to end",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || tmux_output(&["capture-pane", "-p", "-t", &session_name()]).contains("[ENDED"),
    );
    tmux(&["send-keys", "-t", &session_name(), "q"]);
}

/// Samples per second at the median time per sample, as golow's summary counts them: from the summary JSON, or
/// from the worker's own events when it ran alone.
fn throughput(way: Way, result: &Path) -> f64 {
    let text = std::fs::read_to_string(result).expect("result written");
    if way != Way::Alone {
        let json: serde_json::Value = serde_json::from_str(&text).expect("summary JSON");
        return json["workers"][0]["throughput_samples_per_s"]
            .as_f64()
            .expect("throughput");
    }
    let mut sample_ms: Vec<f64> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["type"] == "step" && event["warmup"] == false)
        .map(|event| {
            (event["compute_ms"].as_f64().unwrap_or(0.0) + event["h2d_ms"].as_f64().unwrap_or(0.0))
                / event["batch_size"].as_f64().unwrap_or(1.0).max(1.0)
        })
        .collect();
    sample_ms.sort_by(f64::total_cmp);
    1e3 / sample_ms[sample_ms.len() / 2]
}

/// One short run to its end; its throughput.
fn short_run(build: &Build, way: Way, dir: &Path, config: &Path) -> f64 {
    let result = dir.join("result");
    let _ = std::fs::remove_file(&result);
    let terminal = InTerminal { dir, size: SIZE };
    let done = terminal.start(&command_line(build, way, config, SHORT_STEPS, &result));
    if way != Way::Headless && way != Way::Alone {
        quit_live_view_when_ended(&build.golow, dir);
    }
    InTerminal::wait_done(&done);
    throughput(way, &result)
}

/// What one steady-state window measured.
struct Steady {
    monitor: Option<Rates>,
    monitor_threads: Vec<String>,
    worker: Rates,
    terminal: Rates,
    terminal_bytes: f64,
}

/// A long run, measured for `seconds` after 10 s to settle, then stopped.
fn steady(build: &Build, way: Way, dir: &Path, config: &Path, seconds: u64) -> Steady {
    let size = match way {
        Way::Live(size) => size,
        _ => SIZE,
    };
    let terminal = InTerminal { dir, size };
    let args = std::env::var("GOLOW_BENCH_CPU_ARGS").ok();
    let mut command = command_line(build, way, config, LONG_STEPS, &dir.join("result"));
    if let (Some(args), false) = (&args, way == Way::Alone) {
        command = format!(
            "{} run {args}{}",
            build.golow.display(),
            if way == Way::Headless {
                " --headless"
            } else {
                ""
            }
        );
    }
    let done = terminal.start(&command);
    let program = if way == Way::Alone {
        build.worker()
    } else {
        build.golow.clone()
    };
    let mut pid = None;
    wait_until(
        "the run to start",
        Duration::from_secs(120),
        Duration::from_millis(200),
        || {
            pid = pid_of(&program, dir);
            pid.is_some()
        },
    );
    let pid = pid.expect("found");
    std::thread::sleep(Duration::from_secs(10));
    let (monitor, worker) = match way {
        Way::Alone => (None, pid),
        _ => (Some(pid), worker_of(pid).expect("a running worker")),
    };
    let tmux_pid = tmux_server().expect("the tmux server");
    let ttyout = dir.join("ttyout");
    let bytes = || std::fs::metadata(&ttyout).map_or(0, |m| m.len());
    let read = || {
        (
            monitor.map(thread_counts),
            total(&thread_counts(worker)),
            total(&thread_counts(tmux_pid)),
            bytes(),
        )
    };
    let (t0, before) = (Instant::now(), read());
    std::thread::sleep(Duration::from_secs(seconds));
    let after = read();
    let wall = t0.elapsed().as_secs_f64();
    let (monitor_rates, monitor_threads) = match (&before.0, &after.0) {
        (Some(b), Some(a)) => {
            let threads = a
                .iter()
                .map(|(name, c)| {
                    let earlier = b
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, c)| c.clone())
                        .unwrap_or_default();
                    let r = rates(&earlier, c, wall);
                    format!("{name} {:.2}%, {:.1} wake-ups/s", r.cpu_percent, r.wakeups)
                })
                .collect();
            (Some(rates(&total(b), &total(a), wall)), threads)
        }
        _ => (None, Vec::new()),
    };
    let measured = Steady {
        monitor: monitor_rates,
        monitor_threads,
        worker: rates(&before.1, &after.1, wall),
        terminal: rates(&before.2, &after.2, wall),
        terminal_bytes: after.3.saturating_sub(before.3) as f64 / wall,
    };
    // Only the run is told to stop: a Ctrl-C in the terminal would stop the shell that reports its end as well.
    match way {
        Way::Live(_) => tmux(&["send-keys", "-t", &session_name(), "q"]),
        // SAFETY: kill(2) of a process this bench started and found running.
        _ => unsafe {
            libc::kill(pid as i32, libc::SIGINT);
        },
    }
    InTerminal::wait_done(&done);
    measured
}

/// "median (min–max)" of `values`.
fn spread(values: &[f64], decimals: usize) -> String {
    let (lo, hi) = common::spread(values);
    let mut sorted = values.to_vec();
    format!(
        "{:.decimals$} ({lo:.decimals$}–{hi:.decimals$})",
        median(&mut sorted)
    )
}

fn main() {
    let dir: PathBuf = std::env::temp_dir().join(format!("golow-tui-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let builds = builds();
    let short_config = prepare_alone(&builds[0], &dir, SHORT_STEPS);
    let long_config = prepare_alone(&builds[0], &dir, LONG_STEPS);
    let mut missed = Vec::new();

    let seconds = env_or("GOLOW_BENCH_CPU_SECONDS", 30);
    let cpu_runs = env_or("GOLOW_BENCH_CPU_RUNS", 3);
    println!(
        "steady state: {} (golow sessions: golow run {}), {seconds} s after 10 s to settle, median of {cpu_runs} (range)",
        golow_args(LONG_STEPS),
        std::env::var("GOLOW_BENCH_CPU_ARGS").unwrap_or_else(|_| golow_args(LONG_STEPS))
    );
    let ways = [
        Way::Alone,
        Way::Headless,
        Way::Live((120, 40)),
        Way::Live(SIZE),
    ];
    for way in ways {
        let measured_builds: &[Build] = if way == Way::Alone {
            &builds[..1]
        } else {
            &builds
        };
        let mut runs: Vec<Vec<Steady>> = (0..measured_builds.len()).map(|_| Vec::new()).collect();
        for run in 0..cpu_runs {
            let mut order: Vec<usize> = (0..measured_builds.len()).collect();
            if run % 2 == 1 {
                order.reverse();
            }
            for b in order {
                let measured = steady(&measured_builds[b], way, &dir, &long_config, seconds);
                if let Some(m) = &measured.monitor {
                    println!(
                        "  {} ({}) session {}: monitor {:.2}% of a core, {:.1} wake-ups/s ({})",
                        way.name(),
                        measured_builds[b].label,
                        run + 1,
                        m.cpu_percent,
                        m.wakeups,
                        measured.monitor_threads.join("; ")
                    );
                }
                runs[b].push(measured);
            }
        }
        for (build, runs) in measured_builds.iter().zip(&runs) {
            let of = |f: &dyn Fn(&Steady) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
            let label = if way == Way::Alone {
                String::new()
            } else {
                format!(" ({})", build.label)
            };
            println!("{}{label}:", way.name());
            if runs[0].monitor.is_some() {
                let cpu = of(&|s| s.monitor.as_ref().map_or(0.0, |m| m.cpu_percent));
                println!(
                    "    monitor CPU {}% of a core (target ≤ 1%), wake-ups {}/s",
                    spread(&cpu, 2),
                    spread(&of(&|s| s.monitor.as_ref().map_or(0.0, |m| m.wakeups)), 1)
                );
                let mut cpu = cpu;
                if build.label == "this build" && median(&mut cpu) > 1.0 {
                    missed.push(format!("monitor CPU {} > 1%", way.name()));
                }
            }
            println!(
                "    worker preempted {}/s; terminal {}% CPU, {} wake-ups/s, {} bytes/s",
                spread(&of(&|s| s.worker.preempted), 1),
                spread(&of(&|s| s.terminal.cpu_percent), 2),
                spread(&of(&|s| s.terminal.wakeups), 1),
                spread(&of(&|s| s.terminal_bytes), 0)
            );
        }
    }

    let rounds = env_or("GOLOW_BENCH_RUNS", 7);
    if rounds > 0 {
        println!(
            "throughput: golow run {} in {}×{}, {rounds} rounds, order rotating",
            golow_args(SHORT_STEPS),
            SIZE.0,
            SIZE.1
        );
    }
    // Every run of a round: (build, way); the worker alone once per round.
    let mut runs: Vec<(usize, Way)> = vec![(0, Way::Alone)];
    for b in 0..builds.len() {
        runs.extend([(b, Way::Headless), (b, Way::Live(SIZE))]);
    }
    let mut alone = Vec::new();
    let mut headless: Vec<Vec<f64>> = vec![Vec::new(); builds.len()];
    let mut live: Vec<Vec<f64>> = vec![Vec::new(); builds.len()];
    for round in 0..rounds {
        let mut order = runs.clone();
        order.rotate_left(round % runs.len());
        let mut line = Vec::new();
        for (b, way) in order {
            let samples_per_s = short_run(&builds[b], way, &dir, &short_config);
            match way {
                Way::Alone => alone.push(samples_per_s),
                Way::Headless => headless[b].push(samples_per_s),
                Way::Live(_) => live[b].push(samples_per_s),
            }
            let label = if way == Way::Alone {
                String::new()
            } else {
                format!(" ({})", builds[b].label)
            };
            line.push(format!("{}{label} {samples_per_s:.1}", way.name()));
        }
        println!("  round {}: {} samples/s", round + 1, line.join(", "));
    }
    if rounds > 0 {
        println!("  alone {} samples/s", spread(&alone, 1));
        for (b, build) in builds.iter().enumerate() {
            let live_ratio: Vec<f64> = live[b]
                .iter()
                .zip(&headless[b])
                .map(|(l, h)| l / h)
                .collect();
            let headless_ratio: Vec<f64> =
                headless[b].iter().zip(&alone).map(|(h, a)| h / a).collect();
            println!(
                "  {}: headless {} samples/s, live {}; live/headless {} (target ≥ 0.98), headless/alone {} (target ≥ 0.99)",
                build.label,
                spread(&headless[b], 1),
                spread(&live[b], 1),
                spread(&live_ratio, 3),
                spread(&headless_ratio, 3)
            );
            if build.label == "this build" {
                let (mut l, mut h) = (live_ratio, headless_ratio);
                if median(&mut l) < 0.98 {
                    missed.push("live/headless < 0.98".into());
                }
                if median(&mut h) < 0.99 {
                    missed.push("headless/alone < 0.99".into());
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !missed.is_empty() {
        println!("missed: {}", missed.join(", "));
        std::process::exit(1);
    }
}
