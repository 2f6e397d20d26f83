//! The operator breakdown, measured (README, "Operators"):
//!
//! 1. **What looking costs**: the same headless session (ResNet-50, 32 px, batch 16, train, 2 threads) with the
//!    default `--ops-every` and with `--no-ops`, alternating over `GOLOW_BENCH_RUNS` rounds (default 5, the order
//!    swapped each round), for `libtorch` (libtorch's operator callbacks) and `pytorch` (torch.profiler). Per run the
//!    wall time per step past the warm-up, from the recording (the mean: a profiled step's cost is in its own step
//!    and in the bookkeeping after it); per round the ratio with to without, less 1. Target: ≤ 2% (median).
//!    Beside it each run's own figure: a profiled step's compute time over an unprofiled one's.
//! 2. **The top five operators per level**, ResNet-50 train at 32 px, batch 16: self and total ms and calls per
//!    profiled step, and the share of compute the operators explain.
//! 3. **What explains the gap between `pytorch` and `libtorch` at batch 4**: the operators whose self time per step
//!    differs most, and the time between operators (compute less the operators' self times).
//!
//! `GOLOW_BENCH_STEPS` (default 60) sets the steps per run.

mod common;

use common::{env_or, median};

use std::path::Path;
use std::process::Command;

/// One headless session of `levels` in `dir`, recorded there; its summary.
fn session(dir: &Path, levels: &str, batch: u32, steps: u32, ops: bool) -> serde_json::Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_golow"));
    command
        .current_dir(dir)
        .env("TMPDIR", dir)
        .args(["run", "--headless", "--impl", levels, "--model", "resnet50"])
        .args(["--resolution", "32", "--batch-size", &batch.to_string()])
        .args([
            "--steps",
            &steps.to_string(),
            "--warmup",
            "5",
            "--threads",
            "2",
        ])
        .args(["--record", "run.golow", "--summary-json", "summary.json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if !ops {
        command.arg("--no-ops");
    }
    let _ = std::fs::remove_file(dir.join("run.golow"));
    assert!(
        command.status().expect("golow runs").success(),
        "golow run failed"
    );
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("a summary");
    serde_json::from_str(&text).expect("the summary is JSON")
}

/// The mean wall time per step past the warm-up of `level` in the recording `dir/run.golow`, in ms.
fn wall_ms_per_step(dir: &Path, level: &str) -> f64 {
    let out = dir.join("run.json");
    let _ = std::fs::remove_file(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_golow"))
        .current_dir(dir)
        .args(["export", "run.golow", "--format", "json", "-o", "run.json"])
        .status()
        .expect("golow export runs");
    assert!(status.success(), "golow export failed");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("the export")).expect("JSON");
    let times: Vec<f64> = json["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["type"] == "step" && r["worker"] == level && r["warmup"] == false)
        .map(|r| r["t_ms"].as_f64().expect("t_ms"))
        .collect();
    assert!(times.len() >= 2, "too few steps of {level}");
    (times[times.len() - 1] - times[0]) / (times.len() - 1) as f64
}

fn worker<'a>(summary: &'a serde_json::Value, level: &str) -> &'a serde_json::Value {
    summary["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .find(|w| w["impl"] == level)
        .expect("the level's worker")
}

fn spread(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        })
}

fn cost_of_looking(dir: &Path, runs: usize, steps: u32) -> bool {
    let mut met = true;
    for level in ["libtorch", "pytorch"] {
        let (mut added, mut in_run) = (Vec::new(), Vec::new());
        for round in 0..runs {
            let order = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            let mut wall = [0.0; 2];
            for ops in order {
                let summary = session(dir, level, 16, steps, ops);
                wall[usize::from(ops)] = wall_ms_per_step(dir, level);
                if let Some(per_step) =
                    worker(&summary, level)["operators"]["overhead_per_profiled_step"].as_f64()
                {
                    in_run.push(per_step * 100.0);
                }
            }
            let ratio = (wall[1] / wall[0] - 1.0) * 100.0;
            println!(
                "  {level} round {}: {:.1} ms a step without, {:.1} with: {ratio:+.2}%",
                round + 1,
                wall[0],
                wall[1]
            );
            added.push(ratio);
        }
        let (low, high) = spread(&added);
        let m = median(&mut added);
        let verdict = if m <= 2.0 { "meets" } else { "MISSES" };
        met &= m <= 2.0;
        let (in_low, in_high) = spread(&in_run);
        println!(
            "{level}: looking adds {m:+.2}% a step (median of {runs} rounds, spread {low:+.2} to {high:+.2}; {verdict} \
             target ≤ 2%); a profiled step's compute {:+.1}% over an unprofiled one's (median, {in_low:+.1} to {in_high:+.1})",
            median(&mut in_run)
        );
    }
    met
}

fn top_operators(dir: &Path, steps: u32) {
    let levels = ["libtorch", "pytorch", "torchscript", "aten"];
    for level in levels {
        let summary = session(dir, level, 16, steps, true);
        let w = worker(&summary, level);
        println!(
            "{level}: the operators explain {:.1}% of the profiled compute ({} steps profiled)",
            w["operators"]["explained"].as_f64().unwrap_or(0.0) * 100.0,
            w["operators"]["profiled_steps"]
        );
        for op in w["top_operators"]
            .as_array()
            .expect("top operators")
            .iter()
            .take(5)
        {
            println!(
                "  {:<40} self {:>8.2} ms  total {:>8.2} ms  calls {:>6.1}",
                op["name"].as_str().unwrap_or("?"),
                op["self_ms_per_step"].as_f64().unwrap_or(0.0),
                op["total_ms_per_step"].as_f64().unwrap_or(0.0),
                op["calls_per_step"].as_f64().unwrap_or(0.0)
            );
        }
    }
}

/// Each operator's self ms per profiled step, and the compute time per profiled step.
fn per_step(w: &serde_json::Value) -> (std::collections::BTreeMap<String, f64>, f64) {
    let ops = w["top_operators"]
        .as_array()
        .expect("top operators")
        .iter()
        .map(|o| {
            let name = o["name"].as_str().unwrap_or("?").to_string();
            (name, o["self_ms_per_step"].as_f64().unwrap_or(0.0))
        })
        .collect();
    (ops, w["compute_ms"]["p50"].as_f64().unwrap_or(0.0))
}

fn gap_at_batch_4(dir: &Path, steps: u32) {
    let summary = session(dir, "pytorch,libtorch", 4, steps, true);
    let (py, py_compute) = per_step(worker(&summary, "pytorch"));
    let (lt, lt_compute) = per_step(worker(&summary, "libtorch"));
    let explained = |w: &serde_json::Value| w["operators"]["explained"].as_f64().unwrap_or(0.0);
    let (py_explained, lt_explained) = (
        explained(worker(&summary, "pytorch")),
        explained(worker(&summary, "libtorch")),
    );
    println!(
        "batch 4: compute p50 pytorch {py_compute:.1} ms, libtorch {lt_compute:.1} ms; between operators \
         (compute less their self times) pytorch {:.1} ms, libtorch {:.1} ms",
        py_compute * (1.0 - py_explained),
        lt_compute * (1.0 - lt_explained)
    );
    let mut names: Vec<&String> = py.keys().chain(lt.keys()).collect();
    names.sort();
    names.dedup();
    let mut differences: Vec<(f64, &String)> = names
        .into_iter()
        .map(|n| {
            (
                py.get(n).copied().unwrap_or(0.0) - lt.get(n).copied().unwrap_or(0.0),
                n,
            )
        })
        .collect();
    differences.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()));
    for (difference, name) in differences.iter().take(5) {
        println!(
            "  {name:<40} pytorch {:>7.2} ms  libtorch {:>7.2} ms  ({difference:+.2})",
            py.get(*name).copied().unwrap_or(0.0),
            lt.get(*name).copied().unwrap_or(0.0)
        );
    }
}

fn main() {
    let runs = env_or("GOLOW_BENCH_RUNS", 5);
    let steps = env_or("GOLOW_BENCH_STEPS", 60);
    let dir = tempfile::tempdir().expect("a temporary directory");
    println!(
        "what looking costs, ResNet-50 train, 32 px, batch 16, 2 threads, {steps} steps, {runs} rounds:"
    );
    let met = cost_of_looking(dir.path(), runs, steps);
    println!(
        "the top five operators per level, ResNet-50 train, 32 px, batch 16 (per profiled step):"
    );
    top_operators(dir.path(), steps);
    gap_at_batch_4(dir.path(), steps);
    if !met {
        std::process::exit(1);
    }
}
