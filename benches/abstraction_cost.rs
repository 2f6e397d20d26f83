//! The abstraction-cost benchmark: ResNet-50, 32 px, batch 16, on the CPU with the same thread count for every
//! implementation. Each run alternates the two implementations step by step (golow's `alternate` schedule), so
//! both see the same machine; runs are repeated, swapping which goes first, and the medians are reported.
//!
//! Targets: `libtorch` train throughput ≥ 0.98× `pytorch`; `torchscript` eval throughput ≥ `pytorch`; `aten`
//! (libtorch's kernels without autograd or modules) ≥ 0.98× `libtorch` in training and ≥ `libtorch` in evaluation.
//! Reported without a target: `aten` against `pytorch`, train and eval: what autograd and modules cost; `compile` (torch.compile, Inductor) against `pytorch`, train and eval,
//! with its compile time (each session compiles from a cold cache of its own) and the steps it takes to pay it back;
//! `aoti` (torch.export and AOTInductor's package, run from Rust) against `torchscript`, eval, with its packaging
//! time.
//! `GOLOW_BENCH_RUNS` (default 5) and `GOLOW_BENCH_STEPS` (default 40, of which 5 warm-up) scale it;
//! `GOLOW_BENCH_ONLY=NAME` keeps the comparisons that involve that implementation.

mod common;
#[path = "common/headless.rs"]
mod headless;

use common::{env_or, median, spread};

use std::path::Path;

struct Comparison {
    mode: &'static str,
    a: &'static str,
    b: &'static str,
    /// The least acceptable median of throughput(a) / throughput(b); `None` where the ratio is a finding.
    target: Option<f64>,
}

/// What one alternating session measured.
struct Measured {
    /// Throughputs of a and b, in samples/s.
    a: f64,
    b: f64,
    /// What compiling cost the level that compiles, and the steps after which it paid that back.
    compile_ms: Option<f64>,
    break_even_steps: Option<u64>,
}

/// One alternating session.
fn run_once(c: &Comparison, first: &str, second: &str, steps: u32, threads: usize) -> Measured {
    let dir = std::env::temp_dir().join(format!("golow-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let args = [
        "--model",
        "resnet50",
        "--resolution",
        "32",
        "--batch-size",
        "16",
        "--mode",
        c.mode,
        "--impl",
        &format!("{first},{second}"),
        "--schedule",
        "alternate",
        "--steps",
        &steps.to_string(),
        "--warmup",
        "5",
        "--threads",
        &threads.to_string(),
        // The levels themselves, not what recording their operators costs each (benches/operators.rs).
        "--no-ops",
    ]
    .map(String::from);
    let json = headless::summary(Path::new(env!("CARGO_BIN_EXE_golow")), &dir, &args);
    let worker = |name: &str| headless::worker(&json, name);
    let throughput = |name: &str| {
        worker(name)["throughput_samples_per_s"]
            .as_f64()
            .unwrap_or_else(|| panic!("no throughput for {name}: {json}"))
    };
    let compiled = [c.a, c.b]
        .into_iter()
        .map(worker)
        .find(|w| !w["compile_ms"].is_null());
    let _ = std::fs::remove_dir_all(&dir);
    Measured {
        a: throughput(c.a),
        b: throughput(c.b),
        compile_ms: compiled.and_then(|w| w["compile_ms"].as_f64()),
        break_even_steps: compiled.and_then(|w| w["break_even_steps"].as_u64()),
    }
}

fn main() {
    let runs = env_or("GOLOW_BENCH_RUNS", 5);
    let steps = env_or("GOLOW_BENCH_STEPS", 40);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let comparisons = [
        Comparison {
            mode: "train",
            a: "libtorch",
            b: "pytorch",
            target: Some(0.98),
        },
        Comparison {
            mode: "eval",
            a: "torchscript",
            b: "pytorch",
            target: Some(1.0),
        },
    ]
    .into_iter()
    .chain(["train", "eval"].into_iter().flat_map(|mode| {
        ["libtorch", "pytorch"].map(|b| Comparison {
            mode,
            a: "aten",
            b,
            // The same kernels as libtorch's without autograd or modules: it must not be slower (issue 34).
            target: (b == "libtorch").then_some(if mode == "train" { 0.98 } else { 1.0 }),
        })
    }))
    .chain(["train", "eval"].map(|mode| Comparison {
        mode,
        a: "compile",
        b: "pytorch",
        target: None,
    }))
    .chain([Comparison {
        mode: "eval",
        a: "aoti",
        b: "torchscript",
        target: None,
    }])
    .filter(|c| std::env::var("GOLOW_BENCH_ONLY").map_or(true, |only| c.a == only || c.b == only))
    .collect::<Vec<_>>();
    println!(
        "ResNet-50, 32 px, batch 16, CPU, {threads} threads each, {runs} alternating runs of {steps} steps (5 warm-up)"
    );
    let mut missed = false;
    for c in &comparisons {
        let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let mut compile_ms = Vec::new();
        for run in 0..runs {
            // Swap which implementation takes the first turn, so order effects cancel.
            let (first, second) = if run % 2 == 0 { (c.a, c.b) } else { (c.b, c.a) };
            let measured = run_once(c, first, second, steps, threads);
            let (a, b) = (measured.a, measured.b);
            let compiled = match measured.compile_ms {
                Some(ms) => {
                    compile_ms.push(ms);
                    // The break-even is against eager pytorch, in the same session.
                    let paid = match measured.break_even_steps {
                        Some(n) => format!(", paid back after {n} steps"),
                        None if [c.a, c.b].contains(&"pytorch") => ", never paid back".into(),
                        None => String::new(),
                    };
                    format!(", compiled in {:.1} s{paid}", ms / 1e3)
                }
                None => String::new(),
            };
            println!(
                "  {} run {}: {} {a:.1} samples/s, {} {b:.1} samples/s, ratio {:.3}{compiled}",
                c.mode,
                run + 1,
                c.a,
                c.b,
                a / b
            );
            ta.push(a);
            tb.push(b);
            ratios.push(a / b);
        }
        let (low, high) = spread(&ratios);
        let ratio = median(&mut ratios);
        let compiled = if compile_ms.is_empty() {
            String::new()
        } else {
            let (low, high) = spread(&compile_ms);
            format!(
                "; compile time median {:.1} s, spread {:.1}–{:.1} s",
                median(&mut compile_ms) / 1e3,
                low / 1e3,
                high / 1e3
            )
        };
        let verdict = match c.target {
            Some(target) if ratio >= target => format!("meets target ≥ {target:.2}"),
            Some(target) => {
                missed = true;
                format!("MISSES target ≥ {target:.2}")
            }
            None => "no target".to_string(),
        };
        println!(
            "{} {}: median {:.1} samples/s vs {} {:.1} samples/s; median ratio {ratio:.3}, spread {low:.3}–{high:.3} ({verdict}){compiled}",
            c.mode,
            c.a,
            median(&mut ta),
            c.b,
            median(&mut tb),
        );
    }
    if missed {
        std::process::exit(1);
    }
}
