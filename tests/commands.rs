//! `--cmd`: a user's own training command as a worker, with optimiser steps reported by golow's hook
//! and no change to the script.

mod common;

use common::{PYTHON, headless, summary_of, text, worker};

/// A plain PyTorch training script: it imports nothing of golow.
const TRAIN: &str = "\
import torch
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(12):
    x = torch.randn(64, 16)
    loss = torch.nn.functional.cross_entropy(model(x), x[:, :4].argmax(1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print('trained', flush=True)
";

fn script(dir: &std::path::Path) -> String {
    let path = dir.join("train.py");
    std::fs::write(&path, TRAIN).unwrap();
    format!("train={PYTHON} {}", path.display())
}

#[test]
fn a_user_script_alone_reports_its_optimiser_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(tmp.path(), &["--cmd", &script(tmp.path())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    assert_eq!(
        s["workers"].as_array().unwrap().len(),
        1,
        "no built-in implementation runs: {s}"
    );
    let w = worker(&s, "train");
    assert_eq!(w["status"], "ok");
    assert_eq!(w["steps"], 12);
    assert_eq!(w["warmup_steps"], 2);
    assert!(w["step_time_ms"]["p50"].as_f64().unwrap() > 0.0, "{w}");
    assert!(w["peak_host_rss_bytes"].as_u64().unwrap() > 0);
    assert!(w["compute_ms"].is_null(), "{w}");
    let first = w["loss"]["first"]
        .as_f64()
        .expect("the loss its backward passes took");
    assert!(first.is_finite() && first > 0.0, "{w}");
    assert_eq!(s["config"]["schedule"], "parallel");
}

#[test]
fn a_user_script_runs_beside_a_builtin_implementation() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--cmd",
        &script(tmp.path()),
        "--impl",
        "libtorch",
        "--model",
        "resnet18",
        "--steps",
        "3",
        "--warmup",
        "1",
    ];
    let out = headless(tmp.path(), &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    assert_eq!(worker(&s, "train")["steps"], 12);
    assert_eq!(worker(&s, "libtorch")["steps"], 3);
    assert_eq!(
        s["config"]["commands"]["train"].as_str().unwrap(),
        script(tmp.path()).trim_start_matches("train=")
    );
}

#[test]
fn a_failing_command_is_reported_with_its_exit_code_and_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &["--cmd", "broken=echo 'no such dataset' >&2; exit 3"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    let w = worker(&s, "broken");
    assert_eq!(
        (w["status"].as_str(), w["exit_code"].as_i64()),
        (Some("failed"), Some(3))
    );
    assert!(
        w["error"].as_str().unwrap().contains("no such dataset"),
        "{w}"
    );
}

#[test]
fn monitor_cpu_pins_golow_but_not_the_processes_it_starts() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        cpus >= 2,
        "this test needs two CPUs to tell pinned from not"
    );
    let tmp = tempfile::tempdir().unwrap();
    let seen = tmp.path().join("affinity");
    // The worker's shell is golow's child: $PPID is golow.
    let command = format!(
        "aff=grep -h Cpus_allowed_list /proc/self/status /proc/$PPID/status > {}",
        seen.display()
    );
    let last = (cpus - 1).to_string();
    let out = headless(tmp.path(), &["--cmd", &command, "--monitor-cpu", &last])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lists: Vec<String> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().last().unwrap_or_default().to_string())
        .collect();
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert_eq!(lists[1], last, "golow runs on the CPU it was given");
    assert_eq!(
        lists[0],
        format!("0-{last}"),
        "what golow starts runs on every CPU"
    );
}
