//! The operator breakdown, measured (docs/operators.md):
//!
//! 1. **What looking costs**, side by side in each run: a headless session (ResNet-50, 32 px, batch 16, train, 2
//!    threads) at `--ops-every` 2, the default and 50, for `libtorch` (libtorch's operator callbacks) and `pytorch`
//!    (torch.profiler, within its budget); from the recording, each step's wall time from the step record before it
//!    (a profiled step's recording and the taking of its operators fall in it), and the profiled steps' extra time
//!    (their median over the others', times their count) over the run's. `GOLOW_BENCH_RUNS` runs (default 5),
//!    medians. Target: ≤ 2%. (Whole runs with and without `--no-ops` differed by ±30% on this machine from
//!    one run to the next, far more than the effect.)
//! 2. **The top five operators per level**, ResNet-50 train at 32 px, batch 16: self and total ms and calls per
//!    profiled step, and the share of compute the operators explain.
//! 3. **What explains the gap between `pytorch` and `libtorch` at batch 4**: the operators whose self time per step
//!    differs most, and the time between operators (compute less the operators' self times).
//!
//! `GOLOW_BENCH_STEPS` (default 60) sets the steps per run; `GOLOW_BENCH_ONLY=cost` runs the first part alone.

mod common;

use common::{env_or, median, spread};

use std::path::Path;

use golow_protocol::config::DEFAULT_OPS_EVERY;
use std::process::Command;

/// One headless session of `levels` in `dir`, recorded there; its summary.
fn session(dir: &Path, levels: &str, batch: u32, steps: u32, every: u32) -> serde_json::Value {
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
    command.args(["--ops-every", &every.to_string()]);
    let _ = std::fs::remove_file(dir.join("run.golow"));
    assert!(
        command.status().expect("golow runs").success(),
        "golow run failed"
    );
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("a summary");
    serde_json::from_str(&text).expect("the summary is JSON")
}

/// The wall time of each measured step of `level` in the recording `dir/run.golow`, from the record before it to its
/// own (a profiled step's recording, its start, stop and the taking of its operators all fall in it), and whether it
/// was profiled.
fn step_walls(dir: &Path, level: &str) -> Vec<(f64, bool)> {
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
    let steps: Vec<&serde_json::Value> = json["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["type"] == "step" && r["worker"] == level)
        .collect();
    steps
        .windows(2)
        .filter(|w| w[1]["warmup"] == false)
        .map(|w| {
            let wall = w[1]["t_ms"].as_f64().expect("t_ms") - w[0]["t_ms"].as_f64().expect("t_ms");
            (wall, w[1]["profiled"] == true)
        })
        .collect()
}

fn worker<'a>(summary: &'a serde_json::Value, level: &str) -> &'a serde_json::Value {
    summary["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .find(|w| w["impl"] == level)
        .expect("the level's worker")
}

/// The samplings the cost is measured at: one step in 2, the default, one in 50.
const SAMPLINGS: [u32; 3] = [2, DEFAULT_OPS_EVERY, 50];

/// Side by side in each run, at each of `SAMPLINGS`: the profiled steps' wall time against the others' (medians),
/// and what that costs the run: the profiled steps' extra time over the run's whole time. The target is the
/// default's.
fn cost_of_looking(dir: &Path, runs: usize, steps: u32) -> bool {
    let mut met = true;
    for level in ["libtorch", "pytorch"] {
        for every in SAMPLINGS {
            met &= cost_at(dir, runs, steps, level, every) <= 2.0 || every != DEFAULT_OPS_EVERY;
        }
    }
    met
}

/// What looking at one step in `every` costs `level`: the median over `runs` runs, printed with its spread.
fn cost_at(dir: &Path, runs: usize, steps: u32, level: &str, every: u32) -> f64 {
    let mut costs = Vec::new();
    for run in 0..runs {
        session(dir, level, 16, steps, every);
        let walls = step_walls(dir, level);
        let of = |profiled: bool| -> Vec<f64> {
            walls
                .iter()
                .filter(|(_, p)| *p == profiled)
                .map(|(w, _)| *w)
                .collect()
        };
        let (mut looked, mut plain) = (of(true), of(false));
        let count = looked.len();
        let (looked, plain) = (median(&mut looked), median(&mut plain));
        let total: f64 = walls.iter().map(|(w, _)| w).sum();
        let cost = count as f64 * (looked - plain) / total * 100.0;
        println!(
            "  {level} run {}: {count} of {} steps profiled, {looked:.1} ms against {plain:.1} ms: {cost:+.2}% of the run",
            run + 1,
            walls.len()
        );
        costs.push(cost);
    }
    let (low, high) = spread(&costs);
    let m = median(&mut costs);
    let verdict = match (every == DEFAULT_OPS_EVERY, m <= 2.0) {
        (false, _) => "",
        (true, true) => "; the default meets the target ≤ 2%",
        (true, false) => "; the default MISSES the target ≤ 2%",
    };
    println!(
        "{level}: looking at 1 step in {every} costs {m:+.2}% of a run (median of {runs} runs, {low:+.2} to \
         {high:+.2}{verdict})"
    );
    m
}

fn top_operators(dir: &Path, steps: u32) {
    let levels = ["libtorch", "pytorch", "torchscript", "aten"];
    for level in levels {
        let summary = session(dir, level, 16, steps, 10);
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
    let summary = session(dir, "pytorch,libtorch", 4, steps, 10);
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
    if std::env::var("GOLOW_BENCH_ONLY").is_ok_and(|only| only == "cost") {
        std::process::exit(if met { 0 } else { 1 });
    }
    println!(
        "the top five operators per level, ResNet-50 train, 32 px, batch 16 (per profiled step):"
    );
    top_operators(dir.path(), steps);
    gap_at_batch_4(dir.path(), steps);
    if !met {
        std::process::exit(1);
    }
}
