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

/// golow's CPU, in % of one core, over `seconds` of a session, with a scrape every second when `scrape`.
fn monitor_cpu(scrape: bool, seconds: u64) -> f64 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut command = Command::new(env!("CARGO_BIN_EXE_golow"));
    command
        .current_dir(dir.path())
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
    if scrape {
        command.args(["--metrics-addr", "0"]);
    }
    let mut golow = command.spawn().expect("golow runs");
    let addr = read_stderr(&mut golow, scrape);
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

fn main() {
    let runs = env_or("GOLOW_BENCH_RUNS", 5);
    let seconds = env_or("GOLOW_BENCH_CPU_SECONDS", 20);

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

    live_ranks();

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
    let (low, high) = added
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let m = median(&mut added);
    let verdict = if m < 0.1 { "meets" } else { "MISSES" };
    println!(
        "added by the endpoint: median {m:+.3}% of a core, spread {low:+.3} to {high:+.3} ({verdict} target < 0.1%)"
    );
    if m >= 0.1 {
        std::process::exit(1);
    }
}
