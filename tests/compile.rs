//! The `compile` level (torch.compile with Inductor) in real sessions on the CPU: real torch, a real C++ compiler,
//! real worker processes. ResNet-18 at 32 px keeps each cold compilation to about a minute on two cores.

mod common;

use std::path::Path;

use common::{golow, headless, summary_of, text, worker};

/// `golow export --format FORMAT` of a recording, read back.
fn exported(tmp: &Path, recording: &Path, format: &str, name: &str) -> serde_json::Value {
    let path = tmp.join(name);
    let out = golow(
        tmp,
        &[
            "export",
            "--format",
            format,
            "-o",
            &path.display().to_string(),
            &recording.display().to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// Each step's loss per worker, from a recording.
fn losses(tmp: &Path, recording: &Path, name: &str) -> Vec<f64> {
    exported(tmp, recording, "json", &format!("{name}.json"))["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "step" && r["worker"] == name)
        .map(|r| r["loss"].as_f64().unwrap())
        .collect()
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The compiled level computes what eager PyTorch computes (fused kernels round differently, so to 1e-4 on the first
/// step and 1e-3 over the first five), trains as it does, and its compile time is counted apart from its steps.
///
/// Twenty steps do not agree to 1e-3: ResNet training at these batch sizes is chaotic. Eager PyTorch against itself
/// with its initial weights changed by one part in 10^7 differs by about 1% after 20 steps (README, "torch.compile"),
/// so a test of that would test the weather; what a wrong compiled backward or update would change is the first
/// steps, and whether it learns.
#[test]
fn compile_agrees_with_eager_trains_and_counts_its_compile_time_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let recording = tmp.path().join("compile.golow");
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            "pytorch,compile",
            "--model",
            "resnet18",
            "--resolution",
            "32",
            "--batch-size",
            "32",
            "--lr",
            "0.001",
            "--steps",
            "20",
            "--warmup",
            "1",
            "--seed",
            "3",
            "--record",
            &recording.display().to_string(),
        ],
    )
    .env_remove("TORCHINDUCTOR_CACHE_DIR")
    .output()
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    let (eager, compiled) = (worker(&s, "pytorch"), worker(&s, "compile"));
    assert_eq!(compiled["status"], "ok", "{compiled}");
    assert_eq!(compiled["steps"], 20);
    assert!(eager["compile_ms"].is_null() && eager["compile"].is_null());

    let first = relative(
        compiled["loss"]["first"].as_f64().unwrap(),
        eager["loss"]["first"].as_f64().unwrap(),
    );
    assert!(first <= 1e-4, "first loss differs by {first:e}");
    let (eager_losses, compiled_losses) = (
        losses(tmp.path(), &recording, "pytorch"),
        losses(tmp.path(), &recording, "compile"),
    );
    assert_eq!((eager_losses.len(), compiled_losses.len()), (20, 20));
    for (step, (c, e)) in compiled_losses
        .iter()
        .zip(&eager_losses)
        .take(5)
        .enumerate()
    {
        assert!(relative(*c, *e) <= 1e-3, "step {step}: {c} vs eager {e}");
    }
    // Both learn: the last five steps' mean loss is well below the first five's.
    for losses in [&eager_losses, &compiled_losses] {
        assert!(
            mean(&losses[15..]) < 0.75 * mean(&losses[..5]),
            "{losses:?}"
        );
    }

    // The compilation: forward and backward graphs, built from cold in the session's own cache.
    let detail = &compiled["compile"];
    let total = compiled["compile_ms"].as_f64().unwrap();
    let first_ms = detail["first_ms"].as_f64().unwrap();
    assert!(first_ms > 1_000.0, "{detail}");
    assert_eq!(total, first_ms + detail["recompile_ms"].as_f64().unwrap());
    assert_eq!(detail["recompiles"], 0, "{detail}");
    assert_eq!(detail["cache"], "cold", "{detail}");
    // It fell in step 0, a warm-up step, so no measured step was left out, and no step holds it.
    assert_eq!(detail["excluded_steps"], 0);
    let compute_max = compiled["compute_ms"]["max"].as_f64().unwrap();
    assert!(compute_max < first_ms, "{compute_max} ms");
    // The break-even follows from the two median step times.
    let (e, c) = (
        eager["step_time_ms"]["p50"].as_f64().unwrap(),
        compiled["step_time_ms"]["p50"].as_f64().unwrap(),
    );
    match compiled["break_even_steps"].as_u64() {
        Some(n) => assert_eq!(n, (total / (e - c)).ceil() as u64, "{e} vs {c}"),
        None => assert!(c >= e, "{e} vs {c}"),
    }
    assert!(
        stdout.contains("compile: compiled in ") && stdout.contains("Inductor's cache cold"),
        "{stdout}"
    );

    // The trace shows the compilations beside the steps.
    let trace = exported(tmp.path(), &recording, "chrome-trace", "trace.json");
    let slices: f64 = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with("compile ("))
        .map(|e| e["dur"].as_f64().unwrap() / 1e3)
        .sum();
    assert!((slices - first_ms).abs() < 1.0, "{slices} vs {first_ms}");

    // The session's directory, Inductor's cache with it, is gone.
    let left = common::session_dirs(tmp.path());
    assert!(left.is_empty(), "{left:?}");
}

/// A cache the user points Inductor at outlives the session: the second session finds everything in it, says its
/// cache was warm, and compiles faster.
#[test]
fn a_cache_the_user_points_at_is_warm_the_second_time() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("inductor");
    let run = || {
        let out = headless(
            tmp.path(),
            &[
                "--impl",
                "compile",
                "--model",
                "resnet18",
                "--mode",
                "eval",
                "--batch-size",
                "16",
                "--steps",
                "3",
                "--warmup",
                "1",
                "--no-record",
            ],
        )
        .env("TORCHINDUCTOR_CACHE_DIR", &cache)
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let s = summary_of(tmp.path());
        let compiled = worker(&s, "compile").clone();
        // No eager worker ran to pay the compile time back against.
        assert!(compiled["break_even_steps"].is_null(), "{compiled}");
        compiled["compile"].clone()
    };
    let cold = run();
    let warm = run();
    assert_eq!(cold["cache"], "cold", "{cold}");
    assert_eq!(warm["cache"], "warm", "{warm}");
    let (cold_ms, warm_ms) = (
        cold["first_ms"].as_f64().unwrap(),
        warm["first_ms"].as_f64().unwrap(),
    );
    assert!(warm_ms < cold_ms, "warm {warm_ms} ms, cold {cold_ms} ms");
    assert!(std::fs::read_dir(&cache).unwrap().next().is_some());
}
