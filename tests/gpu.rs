//! Tests that need an NVIDIA GPU: `#[ignore]`d everywhere, run by `make gpu-test` on a GPU machine.
//! A machine without Rust runs the built test binary with `--ignored`, with `GOLOW_BIN` naming the `golow`
//! executable (the collector library and `golow-worker` beside it) and `GOLOW_PYTHON` a python with torch 2.11.

use std::path::{Path, PathBuf};
use std::process::Command;

fn golow() -> PathBuf {
    std::env::var_os("GOLOW_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_golow")))
}

/// A headless ResNet-50 session on the GPU, recorded; returns its summary.
fn session(tmp: &Path, impls: &str, mode: &str, extra: &[&str]) -> serde_json::Value {
    let summary = tmp.join("summary.json");
    let out = Command::new(golow())
        .current_dir(tmp)
        .args(["run", "--headless", "--impl", impls, "--mode", mode])
        .args([
            "--model",
            "resnet50",
            "--dataset",
            "synthetic",
            "--resolution",
            "224",
        ])
        .args([
            "--batch-size",
            "32",
            "--steps",
            "40",
            "--warmup",
            "5",
            "--device",
            "cuda",
        ])
        .args(extra)
        .arg("--record")
        .arg(tmp.join("session.golow"))
        .arg("--summary-json")
        .arg(&summary)
        .output()
        .expect("golow runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap()
}

fn workers(summary: &serde_json::Value) -> &Vec<serde_json::Value> {
    summary["workers"].as_array().unwrap()
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_worker_is_measured_by_the_collector() {
    let tmp = tempfile::tempdir().unwrap();
    let s = session(tmp.path(), "pytorch,torchscript,libtorch", "train", &[]);
    for w in workers(&s) {
        let name = &w["impl"];
        assert_eq!(w["status"], "ok", "{name}: {w}");
        let b = &w["gpu_breakdown"];
        let shares = ["busy", "copy", "idle"].map(|k| b[k].as_f64().unwrap());
        assert!(shares[0] > 0.0, "{name}: no kernel time: {b}");
        assert!(
            (shares.iter().sum::<f64>() - 1.0).abs() < 1e-6,
            "{name}: {b}"
        );
        let launches = w["kernel_launches_per_step"].as_f64().unwrap();
        assert!(
            launches > 100.0,
            "{name}: ResNet-50 training launches hundreds of kernels a step, saw {launches}"
        );
        // CUPTI's count of host-to-device bytes agrees with what the worker says it copied.
        let own = w["h2d_bytes_per_step"].as_f64().unwrap();
        let cupti = w["cupti_h2d_bytes_per_step"].as_f64().unwrap();
        assert!(
            (cupti / own - 1.0).abs() < 0.1,
            "{name}: CUPTI {cupti} vs worker {own}"
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn pinned_batches_are_copied_from_pinned_memory() {
    let tmp = tempfile::tempdir().unwrap();
    session(tmp.path(), "libtorch", "eval", &["--pinned"]);
    let mut pinned_bytes = 0;
    for record in exported_records(tmp.path(), "kernels") {
        for copy in record["copies"].as_array().unwrap() {
            if copy["kind"] == "host_to_device" && copy["src"] == "pinned" {
                pinned_bytes += copy["bytes"].as_u64().unwrap();
            }
        }
    }
    // 40 batches of 32 × 3 × 224 × 224 floats.
    assert!(
        pinned_bytes >= 40 * 32 * 3 * 224 * 224 * 4,
        "{pinned_bytes}"
    );
}

/// The `json` export's records of one type.
fn exported_records(tmp: &Path, kind: &str) -> Vec<serde_json::Value> {
    let json = tmp.join("session.json");
    let out = Command::new(golow())
        .args(["export", "session.golow", "--format", "json", "-o"])
        .arg(&json)
        .current_dir(tmp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    exported["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == kind)
        .cloned()
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn alternating_workers_each_show_the_gpu_share_of_their_own_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let s = session(tmp.path(), "pytorch,libtorch", "train", &[]);
    // Counted over the whole schedule, each of two alternating workers would show at most half.
    for w in workers(&s) {
        let busy = w["gpu_breakdown"]["busy"].as_f64().unwrap();
        assert!(busy > 0.5, "{}: busy {busy}", w["impl"]);
    }
    let windows = exported_records(tmp.path(), "kernels");
    assert!(!windows.is_empty());
    for w in &windows {
        assert!(w["monotonic_start_ns"].is_u64(), "{w}");
        assert_eq!(w["invalid_records"], 0, "{w}");
        assert_eq!(w["dropped_windows"], 0, "{w}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_worker_stopped_by_golow_still_sends_its_last_window() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(golow())
        .current_dir(tmp.path())
        .args(["run", "--headless", "--impl", "libtorch", "--mode", "train"])
        .args(["--model", "resnet50", "--dataset", "synthetic"])
        .args([
            "--resolution",
            "224",
            "--batch-size",
            "32",
            "--steps",
            "100000",
        ])
        .args(["--device", "cuda", "--record", "session.golow"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(15));
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait().unwrap();
    let last = |kind: &str| {
        exported_records(tmp.path(), kind)
            .iter()
            .filter_map(|r| r["t_ms"].as_f64())
            .fold(f64::NAN, f64::max)
    };
    // Windows are sent a window late, so only the collector's last flush at SIGTERM covers the final steps.
    let (step, window) = (last("step"), last("kernels"));
    assert!(
        window > step,
        "last window at {window} ms, last step at {step} ms"
    );
}

/// Each worker's per-step losses and per-epoch evaluation accuracies in the recording `session.golow`.
fn losses_and_accuracies(tmp: &Path) -> std::collections::BTreeMap<String, (Vec<f64>, Vec<f64>)> {
    let mut by_worker: std::collections::BTreeMap<String, (Vec<f64>, Vec<f64>)> =
        Default::default();
    for kind in ["step", "epoch"] {
        for r in exported_records(tmp, kind) {
            let entry = by_worker
                .entry(r["worker"].as_str().unwrap().to_string())
                .or_default();
            match kind {
                "step" => entry.0.push(r["loss"].as_f64().unwrap()),
                _ => entry.1.extend(r["eval_accuracy"].as_f64()),
            }
        }
    }
    by_worker
}

/// A headless session of `cudnn` beside `libtorch` with TF32 off in cuDNN and cuBLAS for both (fused and
/// tensor-core arithmetic would otherwise make the comparison one of precisions, not of implementations).
fn cudnn_beside_libtorch(tmp: &Path, args: &[&str]) {
    let out = Command::new(golow())
        .current_dir(tmp)
        .env("NVIDIA_TF32_OVERRIDE", "0")
        .args([
            "run",
            "--headless",
            "--impl",
            "libtorch,cudnn",
            "--device",
            "cuda",
        ])
        .args([
            "--model",
            "resnet50",
            "--dataset",
            "synthetic",
            "--warmup",
            "0",
        ])
        .args(args)
        .arg("--record")
        .arg(tmp.join("session.golow"))
        .output()
        .expect("golow runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cudnn_follows_libtorch_for_twenty_steps() {
    let tmp = tempfile::tempdir().unwrap();
    cudnn_beside_libtorch(
        tmp.path(),
        &[
            "--mode",
            "train",
            "--resolution",
            "64",
            "--batch-size",
            "32",
            "--steps",
            "20",
        ],
    );
    let by_worker = losses_and_accuracies(tmp.path());
    let (cudnn, libtorch) = (&by_worker["cudnn"].0, &by_worker["libtorch"].0);
    assert_eq!(cudnn.len(), 20);
    assert_eq!(libtorch.len(), 20);
    for (step, (c, l)) in cudnn.iter().zip(libtorch).enumerate() {
        let limit = if step == 0 { 1e-3 } else { 1e-2 };
        assert!(
            ((c - l) / l).abs() <= limit,
            "step {step}: cudnn's loss {c}, libtorch's {l} (limit {limit} relative)"
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cudnn_evaluates_like_libtorch_after_three_epochs() {
    let tmp = tempfile::tempdir().unwrap();
    cudnn_beside_libtorch(
        tmp.path(),
        &[
            "--mode",
            "train",
            "--resolution",
            "32",
            "--batch-size",
            "64",
            "--epochs",
            "3",
        ],
    );
    let by_worker = losses_and_accuracies(tmp.path());
    let (cudnn, libtorch) = (&by_worker["cudnn"].1, &by_worker["libtorch"].1);
    assert_eq!(cudnn.len(), 3, "an evaluation per epoch");
    let (c, l) = (cudnn[2], libtorch[2]);
    assert!(
        (c - l).abs() <= 0.01,
        "accuracy after 3 epochs: cudnn {c}, libtorch {l}"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cudnn_on_the_cpu_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(golow())
        .current_dir(tmp.path())
        .args([
            "run",
            "--headless",
            "--impl",
            "cudnn",
            "--device",
            "cpu",
            "--no-record",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--impl cudnn runs only on an NVIDIA GPU"),
        "{stderr}"
    );
}
