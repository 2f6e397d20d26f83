//! What `--metrics-addr` costs, measured (docs/prometheus-grafana.md):
//!
//! 1. **The monitor's CPU with a scrape every second**: the same headless libtorch session (ResNet-50, 32 px, batch
//!    16) without the endpoint, and with it and a scraper that GETs /metrics every second, alternating over
//!    `GOLOW_BENCH_RUNS` rounds (default 5, the order swapped each round); per run the `golow` process's own CPU
//!    (every thread's scheduler run time) over `GOLOW_BENCH_CPU_SECONDS` (default 20) after 10 s to settle. Target:
//!    under 0.1% of a core added (median of the per-round differences).
//! 2. **A scrape's size and render time** for 2 distributed workers × 8 ranks, each with 100 steps per rank, the
//!    collector's 40 kernels and /proc readings, folded from records as a session would: bytes, and the median time
//!    of 1,000 renders.
//! 3. **A live scrape of 2 × 8 ranks**: two `--cmd` torchrun jobs of 8 ranks each (DDP on gloo, a small model, a
//!    step every 50 ms) under one golow; once every rank has stepped 20 times, 10 scrapes a second apart: the bytes
//!    and the time from connecting to the last byte, medians.
//! 4. **A scrape under 1,000 idle connections**: the session of 1, serving; over `GOLOW_BENCH_CROWD_ROUNDS` rounds
//!    (default 30), a scrape alone, then 1,000 connections opened (a third of them sending the start of a request,
//!    the rest nothing) and held while a scrape is timed from connecting to its last byte, then dropped. Target: under
//!    1 s (median and spread of the rounds); also how many of the 1,000 golow had closed by then, and its memory's
//!    growth.
//!
//! `GOLOW_BENCH_PHASES` picks phases by name (`render`, `ranks`, `crowd`, `cpu`; all by default).

mod common;

use common::{env_or, median, spread};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use golow::state::State;
use golow_protocol::event::{Body, KernelStats, OptimizerStep, Record};
use golow_protocol::samples;

/// Nanoseconds the scheduler ran every thread of `pid` (schedstat: exact, unlike /proc's clock ticks); 0 once it
/// is gone.
fn run_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Drains golow's stderr throughout, so that it never blocks on it; first, when `served`, the address it says it
/// serves its metrics at.
fn read_stderr(golow: &mut std::process::Child, served: bool) -> Option<String> {
    let mut lines = BufReader::new(golow.stderr.take().expect("stderr piped")).lines();
    let addr = served.then(|| {
        lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                Some(
                    l.strip_prefix("golow: metrics at http://")?
                        .trim_end_matches("/metrics")
                        .to_string(),
                )
            })
            .expect("golow says where it serves")
    });
    std::thread::spawn(move || lines.for_each(drop));
    addr
}

/// A headless libtorch session of ResNet-50 (32 px, batch 16) in `dir`, serving its metrics when `serve`: golow, and
/// the address it serves at.
fn session(dir: &std::path::Path, serve: bool) -> (std::process::Child, Option<String>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_golow"));
    command
        .current_dir(dir)
        .args([
            "run",
            "--headless",
            "--impl",
            "libtorch",
            "--model",
            "resnet50",
        ])
        .args([
            "--resolution",
            "32",
            "--batch-size",
            "16",
            "--steps",
            "100000",
            "--no-record",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if serve {
        command.args(["--metrics-addr", "0"]);
    }
    let mut golow = command.spawn().expect("golow runs");
    let addr = read_stderr(&mut golow, serve);
    (golow, addr)
}

/// golow's CPU, in % of one core, over `seconds` of a session, with a scrape every second when `scrape`.
fn monitor_cpu(scrape: bool, seconds: u64) -> f64 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut golow, addr) = session(dir.path(), scrape);
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = addr.map(|addr| {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(mut s) = TcpStream::connect(&addr) {
                    let _ = write!(s, "GET /metrics HTTP/1.0\r\n\r\n");
                    let _ = s.read_to_end(&mut Vec::new());
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    });
    std::thread::sleep(Duration::from_secs(10));
    let pid = golow.id();
    let (before, start) = (run_ns(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds));
    let (after, elapsed) = (run_ns(pid), start.elapsed());
    assert!(
        golow.try_wait().is_ok_and(|ended| ended.is_none()),
        "golow ended while it was measured"
    );
    stop.store(true, Ordering::SeqCst);
    // SAFETY: a signal to the child we started.
    unsafe {
        libc::kill(pid as i32, libc::SIGINT);
    }
    let _ = golow.wait();
    if let Some(scraper) = scraper {
        let _ = scraper.join();
    }
    // A thread that ended took its run time with it: never a negative difference.
    after.saturating_sub(before) as f64 / elapsed.as_nanos() as f64 * 100.0
}

/// The state of a session with 2 workers of 8 ranks each, folded from records as a session folds them.
fn distributed_state() -> State {
    let mut state = State::default();
    let mut t = 0.0;
    let mut apply = |worker: &str, body: Body| {
        t += 1.0;
        state.apply(&Record::new(t, Some(worker.into()), body));
    };
    let kernels: Vec<KernelStats> = (0..40)
        .map(|i| {
            let name = format!("void at::native::kernel_{i}<float>(int, float*)");
            samples::kernel(&name, 100, 1_000_000 * (i + 1))
        })
        .collect();
    for worker in ["ddp-a", "ddp-b"] {
        for rank in 0..8u32 {
            apply(worker, samples::rank_hello(rank, 1000 + rank, rank, 8));
        }
        for step in 0..100u64 {
            for rank in 0..8u32 {
                apply(
                    worker,
                    Body::OptimizerStep(OptimizerStep {
                        process: rank,
                        optimizer: 0,
                        step,
                        interval_ms: (step > 0).then_some(50.0 + f64::from(rank)),
                        first_step_ms: None,
                        arrived_ns: Some(step * 50_000_000 + u64::from(rank) * 100_000),
                        profiled: false,
                        phases: None,
                        skipped: false,
                        loss: None,
                        t_ns: None,
                    }),
                );
            }
        }
        apply(
            worker,
            Body::Kernels(Box::new(samples::kernel_window(kernels.clone()))),
        );
        apply(
            worker,
            Body::Process {
                pid: 1000,
                rss_bytes: 4 << 30,
                peak_rss_bytes: 5 << 30,
                cpu_percent: Some(800.0),
                rank: None,
                threads: None,
            },
        );
        for rank in 0..8u32 {
            apply(
                worker,
                Body::Process {
                    pid: 1000 + rank,
                    rss_bytes: 500 << 20,
                    peak_rss_bytes: 600 << 20,
                    cpu_percent: Some(100.0),
                    rank: Some(rank),
                    threads: None,
                },
            );
        }
    }
    state
}

/// Each of the 8 ranks of a job steps every 50 ms until stopped.
const DDP: &str = "\
import time, torch, torch.distributed as dist
dist.init_process_group('gloo')
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    opt.zero_grad()
    model(torch.randn(16, 64)).sum().backward()
    opt.step()
    time.sleep(0.05)
";

/// One GET of /metrics: the body's bytes and the time from connecting to its last byte.
fn scrape(addr: &str) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).expect("golow serves");
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").expect("a request");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("an answer");
    let elapsed = start.elapsed();
    let body = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(answer.clone(), |at| answer[at + 4..].to_vec());
    (body, elapsed)
}

/// Phase 3: a live session of two torchrun jobs of 8 ranks, scraped.
fn live_ranks() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("ddp.py"), DDP).expect("the script");
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin");
    let path = format!("{venv}:{}", std::env::var("PATH").unwrap_or_default());
    let mut golow = Command::new(env!("CARGO_BIN_EXE_golow"))
        .current_dir(dir.path())
        .env("PATH", path)
        .env("TMPDIR", dir.path())
        .args([
            "run",
            "--headless",
            "--threads",
            "1",
            "--no-record",
            "--metrics-addr",
            "0",
        ])
        .args([
            "--cmd",
            "job-a=torchrun --standalone --nproc-per-node 8 ddp.py",
        ])
        .args([
            "--cmd",
            "job-b=torchrun --master-port 29511 --nproc-per-node 8 ddp.py",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("golow runs");
    let addr = read_stderr(&mut golow, true).expect("golow says where it serves");
    let stepped = |text: &str| {
        ["job-a", "job-b"].iter().all(|job| {
            (0..8).all(|rank| {
                let sample = format!("golow_rank_steps_total{{worker=\"{job}\",rank=\"{rank}\"}} ");
                text.lines()
                    .find_map(|l| l.strip_prefix(&sample)?.parse::<f64>().ok())
                    .is_some_and(|steps| steps >= 20.0)
            })
        })
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    while !stepped(&String::from_utf8_lossy(&scrape(&addr).0)) {
        assert!(Instant::now() < deadline, "16 ranks never stepped 20 times");
        std::thread::sleep(Duration::from_secs(1));
    }
    let (mut sizes, mut times) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let (body, elapsed) = scrape(&addr);
        sizes.push(body.len() as f64);
        times.push(elapsed.as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_secs(1));
    }
    // SAFETY: a signal to the child we started.
    unsafe {
        libc::kill(golow.id() as i32, libc::SIGINT);
    }
    let _ = golow.wait();
    let (low, high) = spread(&sizes);
    println!(
        "a live scrape of 2 torchrun jobs × 8 ranks: median {:.0} bytes ({low:.0}–{high:.0}), answered in {:.2} ms (median of 10)",
        median(&mut sizes),
        median(&mut times)
    );
}

/// Raises this process's soft limit on open files to `files`, as far as the hard limit allows.
fn allow_open_files(files: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer, setrlimit reads one.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < files {
            limit.rlim_cur = files.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// `size` connections to `addr`, a third of them sending the start of a request and the rest nothing.
fn crowd(addr: &str, size: usize) -> Vec<TcpStream> {
    (0..size)
        .filter_map(|i| {
            let mut stream = TcpStream::connect(addr).ok()?;
            if i % 3 == 0 {
                stream.write_all(b"GET /met").ok()?;
            }
            Some(stream)
        })
        .collect()
}

/// Whether golow has closed `stream` (or reset it), rather than leaving it open and silent.
fn closed(mut stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).expect("a socket");
    !matches!(stream.read(&mut [0u8]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// golow's high-water mark of resident memory, in KiB.
fn high_water_kib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("golow runs")
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmHWM:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .expect("VmHWM")
}

/// Phase 4: scrapes of a live session alone and with 1,000 idle connections just opened and held; whether they meet
/// the target.
fn crowded_scrapes(rounds: usize) -> bool {
    const CROWD: usize = 1000;
    allow_open_files(CROWD as u64 + 256);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut golow, addr) = session(dir.path(), true);
    let addr = addr.expect("golow says where it serves");
    std::thread::sleep(Duration::from_secs(10));
    let before_kib = high_water_kib(golow.id());
    let (mut alone, mut crowded, mut closed_by_then) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        alone.push(scrape(&addr).1.as_secs_f64() * 1e3);
        let held = crowd(&addr, CROWD);
        assert_eq!(held.len(), CROWD, "every connection of the crowd opened");
        crowded.push(scrape(&addr).1.as_secs_f64() * 1e3);
        closed_by_then.push(held.iter().filter(|s| closed(s)).count() as f64);
        drop(held);
        std::thread::sleep(Duration::from_secs(1));
    }
    let grew_kib = high_water_kib(golow.id()) - before_kib;
    // SAFETY: a signal to the child we started.
    unsafe {
        libc::kill(golow.id() as i32, libc::SIGINT);
    }
    let _ = golow.wait();
    let (alone_low, alone_high) = spread(&alone);
    let (low, high) = spread(&crowded);
    let (closed_low, closed_high) = spread(&closed_by_then);
    let m = median(&mut crowded);
    let verdict = if high < 1e3 { "meets" } else { "MISSES" };
    println!(
        "a live scrape with {CROWD} idle connections just opened and held, {rounds} rounds: answered in {m:.2} ms \
         (median; {low:.2}–{high:.2}), alone {:.2} ms ({alone_low:.2}–{alone_high:.2}); golow had closed {:.0} \
         of the {CROWD} by then ({closed_low:.0}–{closed_high:.0}); its high-water memory grew by {grew_kib:.0} KiB \
         ({verdict} target < 1 s)",
        median(&mut alone),
        median(&mut closed_by_then),
    );
    high < 1e3
}

/// Whether `GOLOW_BENCH_PHASES` (all phases when unset) names `phase`.
fn wanted(phase: &str) -> bool {
    std::env::var("GOLOW_BENCH_PHASES").map_or(true, |phases| phases.split(',').any(|p| p == phase))
}

/// Phase 2: a scrape of 2 × 8 ranks folded from records, its size and render time.
fn render_time() {
    let state = distributed_state();
    let text = golow::metrics::render(
        &state,
        "node-1",
        &mut golow::metrics::KernelNames::default(),
    );
    let mut times: Vec<f64> = (0..1_000)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(golow::metrics::render(
                &state,
                "node-1",
                &mut golow::metrics::KernelNames::default(),
            ));
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    println!(
        "a scrape of 2 workers × 8 ranks (40 kernels each, 16 named): {} bytes, {} lines, rendered in {:.0} µs (median of 1,000)",
        text.len(),
        text.lines().count(),
        median(&mut times)
    );
}

/// Phase 1: golow's CPU without and with a scrape every second; whether it meets the target.
fn added_cpu(runs: usize, seconds: u64) -> bool {
    println!(
        "golow's CPU over {seconds} s of a headless libtorch session, without and with a scrape every second, {runs} rounds:"
    );
    let mut added = Vec::new();
    for round in 0..runs {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut cpu = [0.0; 2];
        for scrape in order {
            cpu[usize::from(scrape)] = monitor_cpu(scrape, seconds);
        }
        println!(
            "  round {}: without {:.3}% of a core, with {:.3}%: {:+.3}",
            round + 1,
            cpu[0],
            cpu[1],
            cpu[1] - cpu[0]
        );
        added.push(cpu[1] - cpu[0]);
    }
    let (low, high) = spread(&added);
    let m = median(&mut added);
    let verdict = if m < 0.1 { "meets" } else { "MISSES" };
    println!(
        "added by the endpoint: median {m:+.3}% of a core, spread {low:+.3} to {high:+.3} ({verdict} target < 0.1%)"
    );
    m < 0.1
}

fn main() {
    let mut met = true;
    if wanted("render") {
        render_time();
    }
    if wanted("ranks") {
        live_ranks();
    }
    if wanted("crowd") {
        met &= crowded_scrapes(env_or("GOLOW_BENCH_CROWD_ROUNDS", 30));
    }
    if wanted("cpu") {
        met &= added_cpu(
            env_or("GOLOW_BENCH_RUNS", 5),
            env_or("GOLOW_BENCH_CPU_SECONDS", 20),
        );
    }
    if !met {
        std::process::exit(1);
    }
}
