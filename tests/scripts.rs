//! Ordinary training scripts under `--cmd`, as a new user points golow at them: launched by torchrun, with their own
//! PYTHONPATH, evaluation loops, GANs, compiled models, scripts that print. Each asserts the figure golow reports
//! against what the script measured itself.

mod common;

use std::path::Path;
use std::process::Output;

use common::frameworks::{HUGGING_FACE, LIGHTNING};
use common::{
    PYTHON, golow, headless, headless_succeeds, summary, summary_of, text, with_venv_path, worker,
};

fn write(dir: &Path, name: &str, source: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, source).unwrap();
}

/// `golow run --headless` over `commands`, in `dir`, with `extra` arguments; it must succeed.
fn run(dir: &Path, commands: &[&str], extra: &[&str]) -> (Output, serde_json::Value) {
    let mut args = Vec::new();
    for command in commands {
        args.extend(["--cmd", command]);
    }
    args.extend(extra);
    (headless_succeeds(dir, &args), summary_of(dir))
}

fn f64_of(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The number the script printed after `label`.
fn printed(out: &Output, label: &str) -> f64 {
    // What the script prints reaches golow's stderr, after its worker's name.
    let stderr = text(&out.stderr);
    let line = stderr
        .lines()
        .find_map(|l| l.split_once(label).map(|(_, rest)| rest.trim().to_string()))
        .unwrap_or_else(|| panic!("no '{label}' in {stderr}"));
    line.parse()
        .unwrap_or_else(|_| panic!("'{line}' is not a number"))
}

const DDP: &str = "\
import os, time, torch, torch.distributed as dist
dist.init_process_group('gloo')
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(25):
    opt.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    time.sleep(0.01)
dist.destroy_process_group()
";

#[test]
fn a_torchrun_job_reports_each_rank_apart() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "ddp.py", DDP);
    let (_, s) = run(
        tmp.path(),
        &["ddp=torchrun --standalone --nproc-per-node 2 ddp.py"],
        &["--threads", "1", "--record", "ddp.golow"],
    );
    let w = worker(&s, "ddp");
    assert_eq!(w["steps"], 25, "the worker's steps are rank 0's: {w}");
    let processes = w["script"]["processes"].as_array().unwrap();
    let mut ranks: Vec<(u64, u64)> = processes
        .iter()
        .map(|p| (p["rank"].as_u64().unwrap(), p["steps"].as_u64().unwrap()))
        .collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        [(0, 25), (1, 25)],
        "torchrun itself never reports: {w}"
    );
    assert!(processes.iter().all(|p| p["world_size"] == 2));
    // Each rank's own process, read from /proc apart from torchrun and the other rank: each imported torch.
    let peaks: Vec<u64> = w["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["peak_host_rss_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(peaks.len(), 2, "{w}");
    let tree = w["peak_host_rss_bytes"].as_u64().unwrap();
    for peak in &peaks {
        assert!(
            *peak > 50 << 20 && *peak < tree,
            "rank {peak} of tree {tree}: {w}"
        );
    }
    // Each rank's steps split into phases of its own, adding up to its steps.
    for rank in w["ranks"].as_array().unwrap() {
        let phases = &rank["phases"];
        let shares: f64 = ["data", "forward", "backward", "optimizer", "other"]
            .iter()
            .map(|p| f64_of(&phases[p]["share"]))
            .sum();
        assert!((shares - 1.0).abs() < 1e-6, "{rank}");
        assert!(f64_of(&phases["backward"]["p50_ms"]) > 0.0, "{rank}");
    }

    // The recording replays the ranks as they were, and exports each rank's readings on its own process.
    let replayed = golow(
        tmp.path(),
        &[
            "replay",
            "ddp.golow",
            "--headless",
            "--summary-json",
            "replay.json",
        ],
    );
    assert_eq!(
        replayed.status.code(),
        Some(0),
        "{}",
        text(&replayed.stderr)
    );
    let replay = summary(&tmp.path().join("replay.json"));
    assert_eq!(worker(&replay, "ddp")["ranks"], w["ranks"]);
    let exported = golow(
        tmp.path(),
        &[
            "export",
            "ddp.golow",
            "--format",
            "chrome-trace",
            "-o",
            "ddp.json",
        ],
    );
    assert_eq!(
        exported.status.code(),
        Some(0),
        "{}",
        text(&exported.stderr)
    );
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("ddp.json")).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    for process in processes {
        let pid = &process["pid"];
        let named = events
            .iter()
            .find(|e| e["name"] == "process_name" && e["pid"] == *pid)
            .unwrap_or_else(|| panic!("no process {pid}"));
        assert_eq!(
            named["args"]["name"],
            format!("ddp rank {}", process["rank"])
        );
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "C" && e["pid"] == *pid && e["name"] == "host RSS MiB"),
            "rank {} has no memory track",
            process["rank"]
        );
        // Rank 0 looks at its steps' operators, and the other ranks leave it to rank 0: on its own process.
        let operators = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == *pid && e["tid"] == 1000)
            .count();
        assert_eq!(operators > 0, process["rank"] == 0, "{process}");
    }
    assert!(
        w["operators"]["profiled_steps"].as_u64().unwrap() >= 1,
        "{w}"
    );
}

/// Rank 0 stalls 60 ms before each forward pass of the first 15 steps, rank 1 from then on: each in turn arrives
/// last at the all-reduce.
const STRAGGLER: &str = "\
import time, torch, torch.distributed as dist
dist.init_process_group('gloo')
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(45):
    if rank == (0 if i < 15 else 1):
        time.sleep(0.06)
    opt.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
dist.destroy_process_group()
";

#[test]
fn a_rank_that_arrives_late_is_named_the_straggler() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "ddp.py", STRAGGLER);
    let (_, s) = run(
        tmp.path(),
        &["ddp=torchrun --standalone --nproc-per-node 2 ddp.py"],
        &["--threads", "1", "--no-record"],
    );
    let w = worker(&s, "ddp");
    let ranks = w["ranks"].as_array().unwrap();
    let steps: Vec<(u64, u64)> = ranks
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["steps"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, [(0, 45), (1, 45)], "both ranks, every step: {w}");
    // The all-reduce evens out the ends of steps: both ranks' steps take the stall.
    for r in ranks {
        assert!(f64_of(&r["step_time_ms"]["p50"]) >= 55.0, "{r}");
    }
    let stragglers = &w["stragglers"];
    assert_eq!(stragglers["steps"], 45, "{stragglers}");
    let verdict = &stragglers["verdict"];
    assert_eq!(verdict["rank"], 1, "{stragglers}");
    assert!(f64_of(&verdict["late_ms"]) >= 50.0, "{stragglers}");
    // Rank 0 was the straggler until rank 1 took over, on its 10th late step (half of the verdict's 20 steps).
    let since = verdict["since_step"].as_u64().unwrap();
    assert!(
        (20..=30).contains(&since),
        "named from step {since}: {stragglers}"
    );
    let last: Vec<u64> = ranks
        .iter()
        .map(|r| r["straggler_steps"].as_u64().unwrap())
        .collect();
    assert!(last[0] >= 12 && last[1] >= 25, "{w}");
}

/// A python reached every way a Makefile, a CI job or a launcher reaches one, with a PYTHONPATH (or a whole
/// environment) of its own, is measured: golow's exec interposer puts the hook back wherever a program starts. A python
/// that no environment reaches (`-I`) is named, once.
#[test]
fn a_python_reached_by_path_env_bash_make_or_a_clean_environment_is_still_measured() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "src/mylib/__init__.py", "STEPS = 7\n");
    write(
        tmp.path(),
        "train.py",
        "import mylib, torch\n\
         m = torch.nn.Linear(4, 1)\n\
         o = torch.optim.SGD(m.parameters(), lr=0.1)\n\
         for _ in range(mylib.STEPS):\n\
         \x20   o.zero_grad(); m(torch.randn(2, 4)).sum().backward(); o.step()\n",
    );
    write(
        tmp.path(),
        "Makefile",
        &format!("train:\n\tPYTHONPATH=src {PYTHON} train.py\n"),
    );
    write(
        tmp.path(),
        "launch.py",
        "import subprocess, sys\n\
         subprocess.run([sys.executable, 'train.py'], env={'PYTHONPATH': 'src'}, check=True)\n",
    );
    write(
        tmp.path(),
        "isolated.py",
        "import subprocess, sys\n\
         for _ in range(2):\n\
         \x20   subprocess.run([sys.executable, '-I', '-c', 'import torch'], check=True)\n",
    );
    let commands = [
        "own=PYTHONPATH=src python train.py".to_string(),
        "exported=export PYTHONPATH=src; python3 train.py".into(),
        format!("by_path=PYTHONPATH=src {PYTHON} train.py"),
        format!("env=env PYTHONPATH=src {PYTHON} train.py"),
        format!("bash=bash -c 'PYTHONPATH=src {PYTHON} train.py'"),
        "make=make -s train".into(),
        "clean=PYTHONPATH=src python launch.py".into(),
        "isolated=python isolated.py".into(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    // One at a time: eight pythons importing torch at once would starve the tests that run beside this one and time
    // what their scripts do.
    let (out, s) = run(tmp.path(), &commands, &["--schedule", "sequential"]);
    for name in ["own", "exported", "by_path", "env", "bash", "make", "clean"] {
        assert_eq!(worker(&s, name)["steps"], 7, "{name}: {}", worker(&s, name));
    }
    let stderr = text(&out.stderr);
    let told = format!(
        "isolated | golow: {PYTHON} is not measured: -I (isolated mode) ignores PYTHONPATH"
    );
    assert_eq!(
        stderr.matches(&told).count(),
        2,
        "each isolated python once: {stderr}"
    );
    assert!(!stderr.contains("by_path | golow:"), "{stderr}");
}

const EVAL: &str = "\
import math, time, torch
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
starts = []
with torch.no_grad():
    for i in range(25):
        batch = torch.randn(32, 64)
        starts.append(time.perf_counter())
        model(batch)
        time.sleep(0.02)
# The intervals golow keeps, past its two warm-up passes, and its median: the smallest that half of them reach.
intervals = sorted(b - a for a, b in zip(starts[1:], starts[2:]))
print('median interval ms', intervals[math.ceil(len(intervals) / 2) - 1] * 1e3, flush=True)
";

#[test]
fn an_evaluation_loop_is_measured_by_its_forward_passes() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "eval.py", EVAL);
    let (out, s) = run(tmp.path(), &["eval=python eval.py"], &["--warmup", "2"]);
    let w = worker(&s, "eval");
    assert_eq!(w["script"]["forward_passes"], 25, "{w}");
    assert!(w.get("notice").is_none(), "{w}");
    let golow_ms = f64_of(&w["script"]["forward_interval_ms"]["p50"]);
    let own_ms = printed(&out, "median interval ms");
    assert!(
        (golow_ms - own_ms).abs() < 0.1 * own_ms,
        "golow {golow_ms} ms, the script's own clock {own_ms} ms"
    );
    assert!(
        text(&out.stdout).contains("eval: 25 forward passes"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_script_that_shows_no_step_is_told_why_while_it_runs_and_in_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "idle.py", "import time, torch\ntime.sleep(4)\n");
    let (out, s) = run(
        tmp.path(),
        &["idle=python idle.py"],
        &["--stall-after", "2"],
    );
    let idle = worker(&s, "idle");
    let notice = idle["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("optimiser steps") && notice.contains("forward passes"),
        "{idle}"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("golow: idle: no step in 2 s (no step seen: golow counts"),
        "a notice while it ran: {stderr}"
    );
    assert!(
        text(&out.stdout).contains("idle: no step seen"),
        "{}",
        text(&out.stdout)
    );
}

const GAN: &str = "\
import time, torch
G, D = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)
og = torch.optim.Adam(G.parameters(), lr=2e-4)
od = torch.optim.SGD(D.parameters(), lr=0.1)
starts = []
for i in range(30):
    starts.append(time.perf_counter())
    z = torch.randn(16, 8)
    od.zero_grad(); D(G(z).detach()).mean().backward(); od.step()
    time.sleep(0.005)
    og.zero_grad(); (-D(G(z))).mean().backward(); og.step()
    time.sleep(0.015)
intervals = sorted(b - a for a, b in zip(starts[2:], starts[3:]))
print('median iteration ms', intervals[len(intervals) // 2] * 1e3, flush=True)
";

#[test]
fn two_optimisers_count_iterations_once_and_each_optimiser_apart() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "gan.py", GAN);
    let (out, s) = run(tmp.path(), &["gan=python gan.py"], &[]);
    let w = worker(&s, "gan");
    assert_eq!(w["steps"], 30, "iterations, not optimiser steps: {w}");
    let optimizers = w["script"]["optimizers"].as_array().unwrap();
    let seen: Vec<(&str, f64, u64)> = optimizers
        .iter()
        .map(|o| {
            (
                o["class"].as_str().unwrap(),
                f64_of(&o["lr"]),
                o["steps"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [("SGD", 0.1, 30), ("Adam", 2e-4, 30)]);
    let golow_ms = f64_of(&w["step_time_ms"]["p50"]);
    let own_ms = printed(&out, "median iteration ms");
    assert!(
        (golow_ms - own_ms).abs() < 0.1 * own_ms,
        "golow {golow_ms} ms, the script's own clock {own_ms} ms"
    );
}

const COMPILED: &str = "\
import time, torch
launched = time.time()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
compiled = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(8):
    start = time.perf_counter()
    opt.zero_grad()
    compiled(torch.randn(16, 32)).sum().backward()
    opt.step()
    if i == 0:
        print('first iteration ms', (time.perf_counter() - start) * 1e3, flush=True)
";

#[test]
fn a_compiled_loops_first_step_and_time_to_it_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "compiled.py", COMPILED);
    let (out, s) = run(tmp.path(), &["compiled=python compiled.py"], &[]);
    let w = worker(&s, "compiled");
    assert_eq!(w["steps"], 8);
    let first_ms = f64_of(&w["script"]["first_step_ms"]);
    let own_ms = printed(&out, "first iteration ms");
    assert!(
        own_ms > 200.0 && (first_ms - own_ms).abs() < 0.05 * own_ms,
        "compilation shows in the first step: golow {first_ms} ms, the script {own_ms} ms"
    );
    let to_first = f64_of(&w["script"]["time_to_first_step_s"]);
    assert!(to_first * 1e3 > first_ms, "{to_first} s to the first step");
}

const THREADS: &str = "\
import os, torch
print('torch threads', torch.get_num_threads(), flush=True)
m = torch.nn.Linear(4, 1)
o = torch.optim.AdamW(m.parameters(), lr=3e-4)
o.zero_grad(); m(torch.randn(2, 4)).sum().backward(); o.step()
";

#[test]
fn threads_apply_to_scripts_and_a_script_only_summary_reports_what_applies() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "threads.py", THREADS);
    let (out, s) = run(tmp.path(), &["t=python threads.py"], &["--threads", "1"]);
    assert_eq!(printed(&out, "torch threads"), 1.0);
    let w = worker(&s, "t");
    assert_eq!(w["script"]["threads"], 1);
    assert_eq!(s["config"]["command_env"]["OMP_NUM_THREADS"], "1");
    assert!(
        text(&out.stderr)
            .contains("the --cmd workers run with MKL_NUM_THREADS=1 OMP_NUM_THREADS=1")
    );
    for absent in [
        "model",
        "dataset",
        "batch_size",
        "resolution",
        "device",
        "mode",
    ] {
        assert!(
            s["config"].get(absent).is_none(),
            "{absent} does not apply: {}",
            s["config"]
        );
    }
    assert_eq!(w["script"]["optimizers"][0]["class"], "AdamW");
    assert_eq!(f64_of(&w["script"]["optimizers"][0]["lr"]), 3e-4);
    assert!(
        w["versions"]["torch"].as_str().unwrap().starts_with("2."),
        "{w}"
    );

    // The user's own setting wins.
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "threads.py", THREADS);
    let mut command = headless(
        tmp.path(),
        &["--cmd", "t=python threads.py", "--threads", "1"],
    );
    let out = with_venv_path(&mut command)
        .env("OMP_NUM_THREADS", "2")
        .env("MKL_NUM_THREADS", "2")
        .output()
        .unwrap();
    assert_eq!(printed(&out, "torch threads"), 2.0);
    assert!(
        summary_of(tmp.path())["config"]
            .get("command_env")
            .is_none()
    );
}

const REPORTING: &str = "\
import torch
try:
    import golow
except ImportError:
    golow = None
m = torch.nn.Linear(4, 1)
o = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(12):
    x = torch.randn(32, 4)
    loss = m(x).pow(2).mean()
    o.zero_grad(); loss.backward(); o.step()
    if golow:
        golow.report(loss=loss.item(), samples=len(x))
print('final loss', loss.item(), flush=True)
print('step\\t12\\tdone', flush=True)
";

#[test]
fn a_script_that_reports_fills_loss_and_throughput_and_its_output_is_passed_through() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "reporting.py", REPORTING);
    // Without operators, so that no step is profiled (and kept out of the figures).
    let (out, s) = run(tmp.path(), &["rep=python reporting.py"], &["--no-ops"]);
    let w = worker(&s, "rep");
    let own_loss = printed(&out, "final loss");
    assert!((f64_of(&w["loss"]["last"]) - own_loss).abs() < 1e-6, "{w}");
    assert!(w["loss"]["first"].is_number());
    // A report counts toward the next optimiser step: each of the 10 measured steps (12, 2 of them warm-up) carries
    // the report made after the step before it.
    assert_eq!(w["samples"], 10 * 32, "{w}");
    assert!(f64_of(&w["throughput_samples_per_s"]) > 0.0);
    assert!(
        text(&out.stderr).contains("rep | final loss"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("rep | step    12      done"),
        "tabs as a terminal shows them: {}",
        text(&out.stderr)
    );

    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "reporting.py", REPORTING);
    let (out, _) = run(tmp.path(), &["rep=python reporting.py"], &["--hide-output"]);
    assert!(!text(&out.stderr).contains("final loss"));
}

#[test]
fn steps_and_epochs_are_refused_for_scripts_alone() {
    let tmp = tempfile::tempdir().unwrap();
    for flag in ["--steps", "--epochs"] {
        let out = headless(tmp.path(), &["--cmd", "t=true", flag, "3"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("a --cmd script runs its own loop"),
            "{stderr}"
        );
    }
}

const MEMORY: &str = "\
import time, torch
held = torch.ones(300 << 20, dtype=torch.uint8)
t = time.process_time()
while time.process_time() - t < 1.5:
    pass
m = torch.nn.Linear(4, 1)
o = torch.optim.SGD(m.parameters(), lr=0.1)
o.zero_grad(); m(torch.randn(2, 4)).sum().backward(); o.step()
";

#[test]
fn a_scripts_memory_and_cpu_are_its_process_trees_from_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "memory.py", MEMORY);
    let (_, s) = run(
        tmp.path(),
        &["mem=python memory.py"],
        &["--record", "mem.golow"],
    );
    let peak = worker(&s, "mem")["peak_host_rss_bytes"].as_u64().unwrap();
    assert!(
        peak >= 300 << 20,
        "the script held 300 MiB; golow saw {peak} bytes"
    );
    let out = common::golow(
        tmp.path(),
        &["export", "mem.golow", "--format", "json", "-o", "mem.json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("mem.json")).unwrap())
            .unwrap();
    let cpu: Vec<f64> = export["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "process")
        .filter_map(|r| r["cpu_percent"].as_f64())
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let most = cpu.iter().copied().fold(0.0, f64::max);
    assert!(
        most <= cores * 100.0 * 1.1,
        "{most}% on {cores} cores: a process's whole CPU time landed in one interval"
    );
    assert!(most > 50.0, "the busy loop shows: {cpu:?}");
}

const LOADER: &str = "\
import statistics, time, torch
from torch.utils.data import DataLoader, TensorDataset

def slow(batch):
    time.sleep(0.03)
    return torch.utils.data.default_collate(batch)

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = DataLoader(TensorDataset(torch.randn(320, 32), torch.randn(320, 1)), batch_size=8, collate_fn=slow)
waits = []
it = iter(data)
while True:
    start = time.perf_counter()
    try:
        x, y = next(it)
    except StopIteration:
        break
    waits.append((time.perf_counter() - start) * 1e3)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
print('median wait ms', statistics.median(waits[5:]), flush=True)
";

const BY_HAND: &str = "\
import torch
model = torch.nn.Linear(16, 1)
for step in range(30):
    model.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-0.01)
";

/// Where the steps' time goes: a script waiting on a slow DataLoader is told input-bound with its data phase as the
/// script measured it, once while it runs and in the summary; one that updates its parameters by hand is counted by
/// its backward passes.
#[test]
fn each_scripts_steps_are_split_into_phases_and_an_input_bound_one_is_told_so() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "loader.py", LOADER);
    write(tmp.path(), "by_hand.py", BY_HAND);
    let (out, s) = run(
        tmp.path(),
        &["loader=python loader.py", "by_hand=python by_hand.py"],
        &["--warmup", "5"],
    );
    let loader = worker(&s, "loader");
    let script = &loader["script"];
    assert_eq!(script["steps_counted_by"], "optimizer", "{loader}");
    assert_eq!(script["input_bound"], true, "{loader}");
    assert_eq!(script["skipped_steps"], 0, "{loader}");
    assert_eq!(script["micro_batches_per_step"], 1, "{loader}");
    let phases = &script["phases"];
    let names = ["data", "forward", "backward", "optimizer", "other"];
    let shares: f64 = names.iter().map(|p| f64_of(&phases[p]["share"])).sum();
    assert!((shares - 1.0).abs() < 1e-6, "{phases}");
    let golow_ms = f64_of(&phases["data"]["p50_ms"]);
    let own_ms = printed(&out, "median wait ms");
    assert!(
        (golow_ms - own_ms).abs() < 0.1 * own_ms,
        "golow {golow_ms} ms, the script's own clock {own_ms} ms"
    );
    let notice = loader["notice"].as_str().unwrap();
    assert!(
        notice.starts_with("input-bound: waiting on data takes"),
        "{notice}"
    );
    // The remedy is the one its DataLoader (no workers, on a CPU) needs: nothing of pinned memory.
    assert!(
        notice.contains("its DataLoader loads each batch in the training process (num_workers=0)")
            && !notice.contains("pin_memory"),
        "{notice}"
    );
    let said = text(&out.stderr).matches("loader: input-bound").count()
        + text(&out.stdout).matches("loader: input-bound").count();
    assert_eq!(
        said, 2,
        "said once while it ran, and once in the report at its end"
    );

    let by_hand = worker(&s, "by_hand");
    assert_eq!(by_hand["steps"], 30, "{by_hand}");
    assert_eq!(
        by_hand["script"]["steps_counted_by"], "backward",
        "{by_hand}"
    );
    assert_eq!(by_hand["script"]["input_bound"], false, "{by_hand}");
    assert!(f64_of(&by_hand["script"]["phases"]["backward"]["share"]) > 0.0);
    assert_eq!(
        f64_of(&by_hand["script"]["phases"]["optimizer"]["p50_ms"]),
        0.0,
        "{by_hand}"
    );
}

/// The two frameworks people train with most, each stepping its optimiser its own way (Lightning inside a closure,
/// Hugging Face through accelerate's wrapper), with gradient accumulation: golow counts their optimiser steps, the
/// micro-batches in each, where each step's time goes, and the loss each framework computed.
#[test]
fn lightning_and_hugging_face_trainers_are_counted_split_into_phases_and_give_their_loss() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "lit.py", LIGHTNING);
    write(tmp.path(), "hf.py", HUGGING_FACE);
    let (out, s) = run(
        tmp.path(),
        &["lightning=python lit.py", "hf=python hf.py"],
        // One at a time, for the tests beside this one that time their scripts.
        &["--warmup", "2", "--schedule", "sequential"],
    );
    let stderr = text(&out.stderr);
    let names = ["data", "forward", "backward", "optimizer", "other"];
    for (name, printed_steps) in [
        ("lightning", "lightning | optimizer steps"),
        ("hf", "hf | optimizer steps"),
    ] {
        let w = worker(&s, name);
        let script = &w["script"];
        assert_eq!(f64_of(&w["steps"]), printed(&out, printed_steps), "{w}");
        assert_eq!(script["steps_counted_by"], "optimizer", "{w}");
        assert_eq!(script["micro_batches_per_step"], 2, "{w}");
        assert_eq!(script["skipped_steps"], 0, "{w}");
        let phases = &script["phases"];
        let shares: f64 = names.iter().map(|p| f64_of(&phases[p]["share"])).sum();
        assert!((shares - 1.0).abs() < 1e-6, "{phases}");
        for phase in ["data", "forward", "backward", "optimizer"] {
            assert!(
                f64_of(&phases[phase]["p50_ms"]) > 0.0,
                "{name} {phase}: {phases}"
            );
        }
        assert!(w["loss"]["first"].is_number(), "{w}");
        // Samples per step, inferred from the batch dimension: Lightning's model takes the batch's tensor, Hugging
        // Face's its keywords (the DataLoader's batch then): two micro-batches of 16 and of 8.
        assert_eq!(script["samples_from"], "batch dimension", "{w}");
        let per_step = if name == "lightning" { 32 } else { 16 };
        // Profiled steps are kept out of the figures, as warm-up steps are.
        let profiled = w["operators"]["profiled_steps"].as_u64().unwrap_or(0);
        let measured =
            w["steps"].as_u64().unwrap() - w["warmup_steps"].as_u64().unwrap() - profiled;
        assert_eq!(w["samples"].as_u64().unwrap(), per_step * measured, "{w}");
        assert!(f64_of(&w["throughput_samples_per_s"]) > 0.0, "{w}");
    }
    for name in ["lightning", "hf"] {
        let line = text(&out.stdout)
            .lines()
            .find(|l| l.starts_with(&format!("{name}: first step after")))
            .unwrap_or_else(|| panic!("{}", text(&out.stdout)))
            .to_string();
        assert!(line.contains("; phases of a typical step data "), "{line}");
        assert!(
            line.contains("samples per step: each distinct batch the model took once"),
            "{line}"
        );
        assert!(line.contains("; top operators "), "{line}");
    }
    let lightning = worker(&s, "lightning");
    let last = f64_of(&lightning["loss"]["last"]);
    let own = printed(&out, "lightning | last loss");
    assert!(
        (last - own).abs() < 1e-5,
        "golow {last}, the script's {own}"
    );
    let hf = worker(&s, "hf");
    let logged: Vec<f64> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("hf | logged loss "))
        .map(|v| v.trim().parse().unwrap())
        .collect();
    assert!(logged.len() >= 2, "{stderr}");
    assert_eq!(f64_of(&hf["loss"]["first"]), logged[0], "{hf}");
    assert_eq!(f64_of(&hf["loss"]["last"]), *logged.last().unwrap(), "{hf}");
}
