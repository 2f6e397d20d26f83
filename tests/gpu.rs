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

/// Every built-in level but compile and aoti, whose compiling takes minutes of a GPU's short lease (the kit's
/// `--plan more` measures them).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_worker_is_measured_by_the_collector() {
    let tmp = tempfile::tempdir().unwrap();
    let levels = "pytorch,torchscript,libtorch,aten,cudnn";
    let s = session(tmp.path(), levels, "train", &[]);
    assert_eq!(workers(&s).len(), levels.split(',').count(), "{s}");
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

/// The recording `session.golow` exported as JSON to `name`, or what `golow export` said.
fn export(tmp: &Path, name: &str) -> Result<serde_json::Value, String> {
    let json = tmp.join(name);
    let out = Command::new(golow())
        .args([
            "export",
            "session.golow",
            "--format",
            "json",
            "--force",
            "-o",
        ])
        .arg(&json)
        .current_dir(tmp)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = std::fs::read_to_string(json).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// How many steps the recording `session.golow`, still being written, holds so far (0 while it cannot be read).
fn steps_recorded(tmp: &Path) -> usize {
    export(tmp, "so-far.json").map_or(0, |so_far| {
        so_far["records"].as_array().map_or(0, |records| {
            records.iter().filter(|r| r["type"] == "step").count()
        })
    })
}

/// The `json` export's records of one type.
fn exported_records(tmp: &Path, kind: &str) -> Vec<serde_json::Value> {
    let exported = export(tmp, "session.json").unwrap_or_else(|e| panic!("{e}"));
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
    // Stopped mid-run once it is well into its steps: how long that takes depends on the GPU and the policy
    // (benchmarking every convolution took the first 15 s on an H200).
    let began = std::time::Instant::now();
    while steps_recorded(tmp.path()) < 20 {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(120),
            "no 20 steps in 2 minutes"
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
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

/// A headless session of `libtorch`, `aten` and `cudnn` from the same weights and batches, with TF32 off in every
/// level (`--tf32 off`: tensor-core rounding would otherwise make the comparison one of precisions, not of
/// implementations).
fn three_levels(tmp: &Path, args: &[&str]) {
    let out = Command::new(golow())
        .current_dir(tmp)
        .args([
            "run",
            "--headless",
            "--impl",
            "libtorch,aten,cudnn",
            "--device",
            "cuda",
            "--tf32",
            "off",
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

/// How far `of` is from `from`, relative to `from`, on average over paired values.
fn mean_relative_gap(of: &[f64], from: &[f64]) -> f64 {
    of.iter()
        .zip(from)
        .map(|(a, b)| ((a - b) / b).abs())
        .sum::<f64>()
        / from.len() as f64
}

/// On a GPU no two implementations round alike: each picks its own convolution algorithms, and training amplifies
/// the differences step by step (a first run on an H200, at 0.01, then the default learning rate, saw `aten` — the
/// same program on libtorch's own kernels — drift from `libtorch` as far as `cudnn` did, 10% by the third step). So the
/// cudnn level is held to libtorch at a learning rate that does not amplify them, with `aten`'s drift as the
/// yardstick for what rounding alone does: a wrong gradient or update drifts far beyond it.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cudnn_follows_libtorch_for_twenty_steps() {
    let tmp = tempfile::tempdir().unwrap();
    three_levels(
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
            "--lr",
            "0.001",
        ],
    );
    let by_worker = losses_and_accuracies(tmp.path());
    let (cudnn, aten, libtorch) = (
        &by_worker["cudnn"].0,
        &by_worker["aten"].0,
        &by_worker["libtorch"].0,
    );
    let curves = format!("cudnn {cudnn:?}\naten {aten:?}\nlibtorch {libtorch:?}");
    assert_eq!(cudnn.len(), 20, "{curves}");
    assert_eq!(libtorch.len(), 20, "{curves}");
    assert!(
        ((cudnn[0] - libtorch[0]) / libtorch[0]).abs() <= 1e-3,
        "the first step, before any update: {curves}"
    );
    let (gap, yardstick) = (
        mean_relative_gap(cudnn, libtorch),
        mean_relative_gap(aten, libtorch),
    );
    assert!(
        gap <= (3.0 * yardstick).max(1e-2),
        "cudnn is {gap:.2e} from libtorch on average, aten {yardstick:.2e}:\n{curves}"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cudnn_evaluates_like_libtorch_after_three_epochs() {
    let tmp = tempfile::tempdir().unwrap();
    three_levels(
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
    let (cudnn, aten, libtorch) = (
        &by_worker["cudnn"],
        &by_worker["aten"],
        &by_worker["libtorch"],
    );
    assert_eq!(cudnn.1.len(), 3, "an evaluation per epoch");
    // Three epochs of runs rounded apart drift (see above): each epoch's mean loss and the last accuracy stay as
    // close to libtorch's as aten's do, or within 5% and 0.03 (a few samples of a small test split).
    assert_eq!(cudnn.0.len(), libtorch.0.len(), "as many steps");
    let per_epoch = cudnn.0.len() / 3;
    let mean = |losses: &[f64]| losses.iter().sum::<f64>() / losses.len() as f64;
    for epoch in 0..3 {
        let range = epoch * per_epoch..(epoch + 1) * per_epoch;
        let (c, a, l) = (
            mean(&cudnn.0[range.clone()]),
            mean(&aten.0[range.clone()]),
            mean(&libtorch.0[range]),
        );
        let limit = (3.0 * ((a - l) / l).abs()).max(0.05);
        assert!(
            ((c - l) / l).abs() <= limit,
            "epoch {epoch}'s mean loss: cudnn {c}, aten {a}, libtorch {l}"
        );
    }
    let (c, a, l) = (cudnn.1[2], aten.1[2], libtorch.1[2]);
    assert!(
        (c - l).abs() <= (3.0 * (a - l).abs()).max(0.03),
        "accuracy after 3 epochs: cudnn {c}, aten {a}, libtorch {l}"
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

/// A plain script training on the GPU, its loss left on the device: golow takes each step's loss from `backward()`
/// without waiting for the device (a non-blocking copy read at a later step), and says the same numbers the script
/// reads itself after its loop.
const DEVICE_LOSS_SCRIPT: &str = "\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(16 * 30 * 30, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 3, 32, 32, device='cuda'), torch.randint(0, 10, (64,), device='cuda')
losses = []
for step in range(30):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.detach())
print('OWN', losses[0].item(), losses[-1].item(), flush=True)
";

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_scripts_loss_on_the_gpu_is_taken_without_a_sync_and_is_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("train.py"), DEVICE_LOSS_SCRIPT).unwrap();
    let python = std::env::var("GOLOW_PYTHON").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(".venv/bin/python")
            .display()
            .to_string()
    });
    let summary = tmp.path().join("summary.json");
    let out = Command::new(golow())
        .current_dir(tmp.path())
        .args(["run", "--headless", "--warmup", "2", "--cmd"])
        .arg(format!("train={python} train.py"))
        .arg("--summary-json")
        .arg(&summary)
        .output()
        .expect("golow runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let own: Vec<f64> = stderr
        .lines()
        .find_map(|line| line.split_once("OWN "))
        .unwrap_or_else(|| panic!("the script said nothing: {stderr}"))
        .1
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    let w = &workers(&s)[0];
    assert_eq!(w["steps"], 30, "{w}");
    let said = [&w["loss"]["first"], &w["loss"]["last"]].map(|v| v.as_f64().unwrap_or(f64::NAN));
    for (golows, theirs) in said.iter().zip(&own) {
        assert!(
            (golows - theirs).abs() <= 1e-6 * theirs.abs().max(1.0),
            "golow {said:?}, the script {own:?}"
        );
    }
}
