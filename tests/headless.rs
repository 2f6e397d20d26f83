//! Real headless sessions on the CPU: real worker processes, real torch, real files.

mod common;

use std::time::{Duration, Instant};

use common::{golow, headless, idx_file, session_dirs, summary_of, text, worker};

const IMPLS: [&str; 4] = ["libtorch", "pytorch", "torchscript", "aten"];

fn stats_present(w: &serde_json::Value, key: &str) {
    for p in ["p50", "p90", "p99", "max", "mean"] {
        let v = w[key][p]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}.{p} missing in {w}"));
        assert!(v > 0.0, "{key}.{p} = {v}");
    }
    assert!(w[key]["p50"].as_f64() <= w[key]["max"].as_f64());
}

#[test]
fn every_implementation_trains_and_agrees_on_the_first_step() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            "libtorch,pytorch,torchscript,aten",
            "--model",
            "resnet50",
            "--resolution",
            "32",
            "--batch-size",
            "8",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--seed",
            "11",
            "--threads",
            "2",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    assert_eq!(s["golow_summary"], 1);
    // --threads sets nothing for --cmd workers where there are none, and says nothing of them.
    assert!(s["config"].get("command_env").is_none(), "{}", s["config"]);
    let (stderr, stdout) = (text(&out.stderr), text(&out.stdout));
    assert!(!stderr.contains("--cmd"), "{stderr}");
    assert!(
        !stdout.lines().next().unwrap().contains("--cmd"),
        "{stdout}"
    );
    assert_eq!(s["config"]["model"], "resnet50");
    assert_eq!(s["config"]["device"], "cpu");
    assert_eq!(s["config"]["schedule"], "alternate");
    let mut first_losses = Vec::new();
    for name in IMPLS {
        let w = worker(&s, name);
        assert_eq!(w["status"], "ok", "{w}");
        assert_eq!(w["exit_code"], 0);
        let torch = if name == "pytorch" {
            "torch"
        } else {
            "libtorch"
        };
        assert!(
            w["versions"][torch].as_str().unwrap().starts_with("2.11."),
            "{w}"
        );
        assert_eq!(w["steps"], 3);
        assert_eq!(w["warmup_steps"], 1);
        // Step 1, the first past the warm-up, had its operators recorded: it is kept out of the timing figures.
        assert_eq!(w["operators"]["profiled_steps"], 1, "{w}");
        assert_eq!(w["samples"], 8);
        stats_present(w, "compute_ms");
        stats_present(w, "sample_time_ms");
        assert!(
            w["h2d_ms"].is_null() && w["h2d_bytes_per_step"].is_null(),
            "no copy on the CPU: {w}"
        );
        assert!(w["throughput_samples_per_s"].as_f64().unwrap() > 0.0);
        assert!(
            w["peak_host_rss_bytes"].as_u64().unwrap() > 100 << 20,
            "{w}"
        );
        assert!(w["peak_gpu_mem_bytes"].is_null());
        let accuracy = w["accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&accuracy));
        first_losses.push(w["loss"]["first"].as_f64().unwrap());
    }
    // Same weights file, same data order, same batch: the first forward pass is the same computation.
    let reference = first_losses[0];
    assert!(reference.is_finite() && reference > 0.0);
    for (name, loss) in IMPLS.iter().zip(&first_losses) {
        let relative = (loss - reference).abs() / reference;
        assert!(
            relative <= 1e-4,
            "{name}: first loss {loss} vs libtorch {reference} (relative {relative:e})"
        );
    }
    // The session directory (cache, weights, scripted model) is gone.
    let sessions = common::session_dirs(tmp.path());
    assert!(sessions.is_empty(), "{sessions:?}");
}

#[test]
fn evaluation_by_epochs_reports_accuracy_for_every_implementation() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            "torchscript,pytorch,libtorch,aten",
            "--model",
            "resnet18",
            "--mode",
            "eval",
            "--batch-size",
            "128",
            "--epochs",
            "1",
            "--warmup",
            "1",
            "--schedule",
            "sequential",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    assert_eq!(s["config"]["mode"], "eval");
    let mut accuracies = Vec::new();
    for name in IMPLS {
        let w = worker(&s, name);
        assert_eq!(w["status"], "ok");
        // The synthetic test split has 512 samples: 4 whole batches of 128.
        assert_eq!(w["steps"], 4);
        accuracies.push(w["accuracy"].as_f64().unwrap());
    }
    // Untrained weights, same inputs, eval-mode batch norm: every implementation classifies identically.
    assert!(
        accuracies.iter().all(|a| (a - accuracies[0]).abs() < 1e-9),
        "{accuracies:?}"
    );
    let table = text(&out.stdout);
    assert!(
        table.contains("resnet18 eval on synthetic") && table.contains("torchscript"),
        "{table}"
    );
}

/// Pids of this test's Rust workers: their config lives in the test's own TMPDIR.
fn worker_pids(tmp: &std::path::Path, implementation: &str) -> Vec<i32> {
    let tmp = tmp.display().to_string();
    common::processes_where(|cmdline| {
        cmdline.contains(&format!("run --impl {implementation} --config "))
            && cmdline.contains(&tmp)
    })
}

fn wait_for_pid(tmp: &std::path::Path, implementation: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(&pid) = worker_pids(tmp, implementation).first() {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{implementation} worker never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_worker_killed_mid_run_is_reported_and_the_others_carry_on() {
    let tmp = tempfile::tempdir().unwrap();
    let child = headless(
        tmp.path(),
        &[
            "--impl",
            "libtorch,pytorch",
            "--model",
            "resnet18",
            "--batch-size",
            "4",
            "--steps",
            "120",
            "--warmup",
            "1",
        ],
    )
    .spawn()
    .unwrap();
    let victim = wait_for_pid(tmp.path(), "libtorch");
    // Let it load and take a few turns before it dies.
    std::thread::sleep(Duration::from_secs(4));
    unsafe { libc::kill(victim, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    let dead = worker(&s, "libtorch");
    assert_eq!(dead["status"], "failed");
    assert_eq!(dead["signal"], 9);
    assert!(
        dead["error"].as_str().unwrap().contains("SIGKILL"),
        "{dead}"
    );
    let survivor = worker(&s, "pytorch");
    assert_eq!(survivor["status"], "ok", "{survivor}");
    assert_eq!(survivor["steps"], 120);
    let report = text(&out.stdout);
    assert!(
        report.contains("libtorch failed: killed by signal 9 (SIGKILL)"),
        "{report}"
    );
}

#[test]
fn an_interrupt_stops_the_workers_and_still_writes_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let child = headless(
        tmp.path(),
        &[
            "--impl",
            "libtorch",
            "--model",
            "resnet18",
            "--batch-size",
            "4",
            "--steps",
            "100000",
        ],
    )
    .spawn()
    .unwrap();
    let worker_pid = wait_for_pid(tmp.path(), "libtorch");
    std::thread::sleep(Duration::from_secs(3));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    let w = worker(&s, "libtorch");
    assert_eq!(w["status"], "stopped");
    assert!(w["steps"].as_u64().unwrap() < 100000);
    assert!(
        !std::path::Path::new(&format!("/proc/{worker_pid}")).exists(),
        "worker outlived the session"
    );
}

#[test]
fn rust_and_python_draw_the_same_data_order() {
    let python = common::PYTHON;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/workers/pytorch");
    for (seed, epoch, n) in [(0u64, 0u64, 10usize), (123, 4, 5000), (u64::MAX, 7, 777)] {
        let code = format!(
            "import sys; sys.path.insert(0, {script:?}); from golow_common import epoch_order; print(epoch_order({seed}, {epoch}, {n}))"
        );
        let out = std::process::Command::new(python)
            .args(["-c", &code])
            .output()
            .expect("venv python runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        let from_python: Vec<usize> = serde_json::from_str(text(&out.stdout).trim()).unwrap();
        assert_eq!(
            from_python,
            golow_data::epoch_order(seed, epoch, n),
            "seed {seed} epoch {epoch}"
        );
    }
}

#[test]
fn doctor_reports_torch_libtorch_and_the_missing_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    let out = golow(tmp.path(), &["doctor"]);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
    assert!(report.contains("(torch 2.11.0"), "{report}");
    assert!(report.contains("libtorch 2.11.0"), "{report}");
    // Everything a GPU run depends on is named, found or missing, with the verdict last.
    for need in [
        "NVIDIA driver (libcuda)",
        "NVML (libnvidia-ml)",
        "torch with CUDA (python)",
        "libcupti",
        "libtorch with CUDA (golow-worker)",
        "cuDNN",
        "CUPTI collector",
    ] {
        assert!(
            report.contains(&format!("  ok       {need}: "))
                || report.contains(&format!("  missing  {need}: ")),
            "{need}: {report}"
        );
    }
    assert!(
        report.contains("  ok       CUPTI collector: /") && report.contains("libgolow_cupti.so"),
        "{report}"
    );
    assert!(
        report.contains("exec interposer: /") && report.contains("libgolow_exec.so (keeps"),
        "{report}"
    );
    assert!(
        report.lines().count() <= 24,
        "more than one screen: {report}"
    );
    if !std::path::Path::new("/dev/nvidiactl").exists() {
        assert!(
            report.contains("  missing  NVML (libnvidia-ml): no NVIDIA GPU — NVML:"),
            "{report}"
        );
        assert!(
            report.contains("GPU runs: not possible here; missing NVIDIA driver (libcuda), NVML"),
            "{report}"
        );
    } else {
        // A GPU machine: its driver's NVML is found, not skipped over.
        assert!(
            report.contains("  ok       NVML (libnvidia-ml): "),
            "{report}"
        );
    }
}

#[test]
fn the_synthetic_dataset_is_learnable_within_a_few_hundred_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &["--impl", "libtorch", "--model", "resnet18", "--epochs", "2"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    let w = worker(&s, "libtorch");
    // 2 epochs of 2048 samples at batch 16; chance is 10% on ten classes.
    assert_eq!(w["steps"], 256);
    let accuracy = w["accuracy"].as_f64().unwrap();
    assert!(accuracy > 0.5, "eval accuracy {accuracy} after 256 steps");
    assert!(
        w["loss"]["last"].as_f64() < w["loss"]["first"].as_f64(),
        "{w}"
    );
}

#[test]
fn the_parallel_schedule_runs_workers_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--impl",
        "pytorch,libtorch",
        "--model",
        "resnet18",
        "--batch-size",
        "4",
        "--steps",
        "4",
        "--warmup",
        "1",
    ];
    let out = headless(
        tmp.path(),
        &[&args[..], &["--schedule", "parallel"]].concat(),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    assert_eq!(s["config"]["schedule"], "parallel");
    for name in ["pytorch", "libtorch"] {
        let w = worker(&s, name);
        assert_eq!(
            (w["status"].as_str(), w["steps"].as_u64()),
            (Some("ok"), Some(4)),
            "{w}"
        );
    }
}

/// An MNIST directory in IDX format: `count` images of 28×28 with a class-dependent bright square.
fn write_mnist(dir: &std::path::Path, prefix: &str, count: u32) {
    let mut images = Vec::new();
    let mut labels = Vec::new();
    for i in 0..count {
        let label = (i % 10) as u8;
        labels.push(label);
        for y in 0..28u8 {
            for x in 0..28u8 {
                let lit = (y / 7) * 4 + x / 7 == label;
                images.push(if lit { 255 } else { (x ^ y).wrapping_mul(3) });
            }
        }
    }
    let images = idx_file(0x0000_0803, &[count, 28, 28], &images);
    let labels = idx_file(0x0000_0801, &[count], &labels);
    std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), images).unwrap();
    std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), labels).unwrap();
}

#[test]
fn a_one_channel_dataset_runs_through_every_implementation() {
    let tmp = tempfile::tempdir().unwrap();
    let mnist = tmp.path().join("mnist");
    std::fs::create_dir_all(&mnist).unwrap();
    write_mnist(&mnist, "train", 64);
    write_mnist(&mnist, "t10k", 16);
    let spec = format!("mnist:{}", mnist.display());
    let args = [
        "--impl",
        "pytorch,torchscript,libtorch,aten",
        "--model",
        "resnet18",
        "--dataset",
        &spec,
    ];
    let out = headless(
        tmp.path(),
        &[
            &args[..],
            &["--batch-size", "8", "--steps", "3", "--warmup", "1"],
        ]
        .concat(),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    assert_eq!(s["config"]["resolution"], 28);
    let losses: Vec<f64> = IMPLS
        .iter()
        .map(|name| {
            let w = worker(&s, name);
            assert_eq!(w["status"], "ok", "{w}");
            w["loss"]["first"].as_f64().unwrap()
        })
        .collect();
    assert!(
        losses
            .iter()
            .all(|l| (l - losses[0]).abs() / losses[0] <= 1e-4),
        "{losses:?}"
    );
}

/// A worker's loss at every step, and each epoch's evaluation (loss, accuracy).
#[derive(Default)]
struct Losses {
    steps: Vec<f64>,
    evaluations: Vec<(f64, f64)>,
}

/// A recording's records, as `golow export --format json` gives them.
fn exported_records(dir: &std::path::Path, recording: &str) -> Vec<serde_json::Value> {
    let out = golow(
        dir,
        &["export", recording, "--format", "json", "-o", "all.json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut all: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("all.json")).unwrap()).unwrap();
    std::fs::remove_file(dir.join("all.json")).unwrap();
    match all["records"].take() {
        serde_json::Value::Array(records) => records,
        other => panic!("records: {other}"),
    }
}

/// Each worker's losses in a recording.
fn losses_by_worker(
    dir: &std::path::Path,
    recording: &str,
) -> std::collections::BTreeMap<String, Losses> {
    let mut by_worker: std::collections::BTreeMap<String, Losses> = Default::default();
    for r in &exported_records(dir, recording) {
        let Some(name) = r["worker"].as_str() else {
            continue;
        };
        let entry = by_worker.entry(name.to_string()).or_default();
        match r["type"].as_str() {
            Some("step") => entry.steps.push(r["loss"].as_f64().unwrap()),
            Some("epoch") => {
                let (loss, accuracy) = (&r["eval_loss"], &r["eval_accuracy"]);
                if let (Some(l), Some(a)) = (loss.as_f64(), accuracy.as_f64()) {
                    entry.evaluations.push((l, a));
                }
            }
            _ => {}
        }
    }
    by_worker
}

/// `aten` runs the program golow's `cudnn` level runs, on libtorch's kernels: it must follow `libtorch` (autograd)
/// step by step, through epochs whose batch size does not divide the split, and evaluate alike.
#[test]
fn aten_follows_libtorch_step_by_step_and_evaluates_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let mnist = tmp.path().join("mnist");
    std::fs::create_dir_all(&mnist).unwrap();
    write_mnist(&mnist, "train", 64);
    write_mnist(&mnist, "t10k", 20);
    let spec = format!("mnist:{}", mnist.display());
    // 64 and 20 samples in batches of 6: 10 training steps an epoch (4 samples left out), and an evaluation whose
    // last batch holds 2.
    for (mode, recording) in [("train", "train.golow"), ("eval", "eval.golow")] {
        let out = headless(
            tmp.path(),
            &[
                "--impl",
                "aten,libtorch",
                "--model",
                "resnet18",
                "--dataset",
                &spec,
                "--mode",
                mode,
                "--batch-size",
                "6",
                "--epochs",
                "2",
                "--warmup",
                "1",
                "--record",
                recording,
            ],
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let by_worker = losses_by_worker(tmp.path(), recording);
        let (aten, libtorch) = (&by_worker["aten"], &by_worker["libtorch"]);
        let steps = if mode == "train" { 20 } else { 6 };
        assert_eq!(libtorch.steps.len(), steps, "{mode}");
        assert_eq!(aten.steps.len(), steps, "{mode}");
        for (step, (a, l)) in aten.steps.iter().zip(&libtorch.steps).enumerate() {
            assert!(
                ((a - l) / l).abs() <= 1e-5,
                "{mode} step {step}: aten's loss {a}, libtorch's {l}"
            );
        }
        assert_eq!(aten.evaluations.len(), 2, "{mode}: an evaluation per epoch");
        for ((al, aa), (ll, la)) in aten.evaluations.iter().zip(&libtorch.evaluations) {
            assert!(
                ((al - ll) / ll).abs() <= 1e-5,
                "{mode}: evaluation loss {al} vs {ll}"
            );
            assert_eq!(aa, la, "{mode}: evaluation accuracy");
        }
    }
}

/// What a newcomer sees first: at the default learning rate the loss falls, where at 0.01 (golow's default before)
/// ResNet-50 went from 3 to past 12 in 60 steps and spiked past 50. Batch 8, the noisiest the issue names, on two levels
/// that update their weights through different code (libtorch's SGD from Rust, torch.optim from Python).
#[test]
fn the_default_learning_rate_makes_the_loss_fall() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            "libtorch,pytorch",
            "--batch-size",
            "8",
            "--steps",
            "100",
            "--threads",
            "1",
            "--no-ops",
            "--record",
            "learns.golow",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let header = golow(
        tmp.path(),
        &[
            "export",
            "learns.golow",
            "--format",
            "json",
            "-o",
            "all.json",
        ],
    );
    assert_eq!(header.status.code(), Some(0), "{}", text(&header.stderr));
    let all: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("all.json")).unwrap()).unwrap();
    let optimiser = &all["header"]["config"]["optimiser"];
    assert_eq!(optimiser["lr"], 3e-4, "{optimiser}");
    std::fs::remove_file(tmp.path().join("all.json")).unwrap();
    let mean = |losses: &[f64]| losses.iter().sum::<f64>() / losses.len() as f64;
    let by_worker = losses_by_worker(tmp.path(), "learns.golow");
    assert_eq!(
        by_worker.keys().collect::<Vec<_>>(),
        ["libtorch", "pytorch"]
    );
    for (name, losses) in by_worker {
        let steps = &losses.steps;
        assert_eq!(steps.len(), 100, "{name}");
        let (first, last) = (mean(&steps[..20]), mean(&steps[80..]));
        assert!(
            last < 0.85 * first,
            "{name}: the last 20 steps' mean loss {last:.3} is not well below the first 20's {first:.3}: {steps:?}"
        );
        let worst = steps.iter().copied().fold(f64::MIN, f64::max);
        assert!(
            worst < 2.0 * steps[0],
            "{name}: a step's loss {worst:.3} is over twice the first step's {:.3}: {steps:?}",
            steps[0]
        );
    }
}

/// Pids of processes whose command line contains `marker`, golow's own (which names it in `--cmd`) left out.
fn processes_with(marker: &str) -> Vec<i32> {
    common::processes_where(|cmdline| cmdline.contains(marker) && !cmdline.contains("--cmd"))
}

/// A `--cmd` worker that ignores SIGTERM (as do the children it starts), interrupted `interrupts` times half a
/// second apart; returns how long golow took to end after the first, and the summary.
fn interrupt_a_stubborn_worker(marker: &str, interrupts: usize) -> (Duration, serde_json::Value) {
    let tmp = tempfile::tempdir().unwrap();
    let command = format!("stubborn=: {marker}; trap '' TERM; while :; do sleep 0.1; done");
    let mut child = headless(tmp.path(), &["--cmd", &command]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while processes_with(marker).is_empty() {
        assert!(Instant::now() < deadline, "the worker never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = Instant::now();
    for i in 0..interrupts {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(500));
        }
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    }
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if interrupted.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("golow did not end a minute after the interrupt");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = interrupted.elapsed();
    assert_eq!(status.code(), Some(130));
    assert!(
        processes_with(marker).is_empty(),
        "the stubborn worker outlived golow"
    );
    (took, summary_of(tmp.path()))
}

#[test]
fn a_worker_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let (took, summary) = interrupt_a_stubborn_worker("golow-test-stubborn-once", 1);
    assert!(
        (Duration::from_secs(5)..Duration::from_secs(20)).contains(&took),
        "{took:?}"
    );
    assert_eq!(worker(&summary, "stubborn")["status"], "stopped");
}

#[test]
fn a_second_interrupt_does_not_wait_for_the_grace_period() {
    let (took, summary) = interrupt_a_stubborn_worker("golow-test-stubborn-twice", 2);
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(worker(&summary, "stubborn")["status"], "stopped");
}

/// Runs `command` as a `--cmd` worker to its end and checks that no process named by `left` outlived golow.
fn nothing_outlives(command: &str, left: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(tmp.path(), &["--cmd", command]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for marker in left {
        assert!(processes_with(marker).is_empty(), "{marker} outlived golow");
    }
}

#[test]
fn what_a_cmd_worker_leaves_in_its_process_group_ends_with_it() {
    nothing_outlives(
        "bg=sleep 3017 & sleep 3018 & echo started",
        &["sleep 3017", "sleep 3018"],
    );
}

#[test]
fn a_descendant_that_leaves_the_process_group_ends_with_the_session() {
    nothing_outlives("escapee=setsid sleep 3019 & echo started", &["sleep 3019"]);
}

#[test]
fn nothing_a_session_started_outlives_a_kill_9_of_golow() {
    let tmp = tempfile::tempdir().unwrap();
    let command = "k9=: golow-test-k9; setsid sleep 3031 & sleep 3032 & sleep 600";
    let mut child = headless(tmp.path(), &["--cmd", command]).spawn().unwrap();
    let started = ["golow-test-k9", "sleep 3031", "sleep 3032"];
    let deadline = Instant::now() + Duration::from_secs(60);
    while started.iter().any(|m| processes_with(m).is_empty()) {
        assert!(
            Instant::now() < deadline,
            "the worker never started its children"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let session_dirs = || {
        std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("golow-session"))
            .count()
    };
    let keepers = || {
        common::processes_where(|c| {
            c.contains(" __keep ") && c.contains(&tmp.path().display().to_string())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<&str> = started
            .into_iter()
            .filter(|m| !processes_with(m).is_empty())
            .collect();
        if left.is_empty() && session_dirs() == 0 && keepers().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "10 s after golow was killed: {left:?} still run, {} session directories, keepers {:?}",
            session_dirs(),
            keepers()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn repeat_runs_and_records_each_session() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            "libtorch",
            "--model",
            "resnet18",
            "--batch-size",
            "2",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--repeat",
            "2",
            "--record",
            "x.golow",
        ],
    )
    .output()
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("session 1 of 2") && stdout.contains("session 2 of 2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("golow compare x-1.golow x-2.golow --vs"),
        "{stdout}"
    );
    for k in 1..=2 {
        assert!(tmp.path().join(format!("x-{k}.golow")).is_file());
        let s = common::summary(&tmp.path().join(format!("summary-{k}.json")));
        assert_eq!(worker(&s, "libtorch")["steps"], 3, "{s}");
    }
    assert!(!tmp.path().join("x.golow").exists() && !tmp.path().join("summary.json").exists());
    let compared = golow(tmp.path(), &["compare", "x-1.golow", "--vs", "x-2.golow"]);
    assert!(
        text(&compared.stdout).contains("median time per sample"),
        "{}",
        text(&compared.stdout)
    );
}

/// A script that says hello on its worker's event socket, then sends optimiser steps as fast as it can, until
/// killed.
fn flood_script(dir: &std::path::Path) -> String {
    let path = dir.join("flood.py");
    std::fs::write(
        &path,
        "import os, socket\n\
         s = socket.socket(socket.AF_UNIX)\n\
         s.connect(os.environ['GOLOW_EVENT_SOCKET'])\n\
         s.sendall(b'{\"type\":\"script_process\",\"pid\":%d,\"rank\":null,\"local_rank\":null,\
         \"world_size\":null,\"python\":\"3\",\"torch\":null,\"threads\":1}\\n' % os.getpid())\n\
         line = b'{\"type\":\"optimizer_step\",\"step\":%d,\"interval_ms\":0.5}\\n'\n\
         step = 0\n\
         while True:\n\
         \x20   s.sendall(b''.join(line % i for i in range(step, step + 10000)))\n\
         \x20   step += 10000\n",
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn a_flood_of_events_while_recording_stays_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let flood = format!("flood=timeout 4 python3 {}", flood_script(tmp.path()));
    let mut child = headless(tmp.path(), &["--cmd", &flood, "--record", "flood.golow"])
        .spawn()
        .unwrap();
    let peak_kib = common::peak_kib_until_exit(&mut child);
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    // Millions of events arrived (the unbounded queues grew by about 400 MB a second of this).
    let events: u64 = stderr
        .split("recorded ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(events > 100_000, "{stderr}");
    assert!(
        peak_kib < 200 * 1024,
        "peak {peak_kib} KiB for {events} events"
    );
}

/// A 64 KiB tmpfs, unmounted when dropped: a disk that fills within a second of recording.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: std::path::PathBuf) -> SmallDisk {
        std::fs::create_dir(&at).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&at)
            .output()
            .expect("mount runs");
        assert!(out.status.success(), "mount: {}", text(&out.stderr));
        SmallDisk(at)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_stops_the_recording_not_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(tmp.path().join("small"));
    let recording = disk.0.join("s.golow");
    let flood = format!(
        "flood=timeout 3 python3 {}; exit 0",
        flood_script(tmp.path())
    );
    let out = headless(
        tmp.path(),
        &["--cmd", &flood, "--record", recording.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // Said when it happened, while the worker still ran, and again at the end.
    assert!(
        stderr.contains("golow: the recording failed (No space left on device"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .contains("the recording failed"),
        "{stderr}"
    );
    // The session ran to its end and its summary, on another disk, was written.
    let summary = summary_of(tmp.path());
    let w = worker(&summary, "flood");
    assert_eq!(w["status"], "ok", "{summary}");
    assert!(w["steps"].as_u64().unwrap() > 1000, "{summary}");
}

/// A run that diverges (here a learning rate of a million) keeps every step and its timings: its loss is carried as
/// the schema's word for what it became ("nan", "inf"), in the recording, the summary and the table, and no worker
/// line is refused. Both a Rust and a Python worker write it.
#[test]
fn a_diverging_run_keeps_its_steps_and_says_its_loss_is_not_finite() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            "libtorch,pytorch",
            "--model",
            "resnet18",
            "--resolution",
            "32",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "--steps",
            "12",
            "--lr",
            "1e6",
            "--record",
            "diverged.golow",
        ],
    )
    .output()
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary = summary_of(tmp.path());
    for w in summary["workers"].as_array().unwrap() {
        let name = &w["impl"];
        assert_eq!(w["status"], "ok", "{name}: {w}");
        assert_eq!(w["steps"], 12, "{name}: {w}");
        assert!(w["sample_time_ms"]["p50"].as_f64().is_some(), "{name}: {w}");
        assert!(w.get("protocol_errors").is_none(), "{name}: {w}");
        let last = w["loss"]["last"].as_str();
        assert!(
            matches!(last, Some("nan" | "inf" | "-inf")),
            "{name}: a loss of a million's learning rate is not finite by step 12: {w}"
        );
    }
    assert!(!stdout.contains("refused"), "{stdout}");
    let records = exported_records(tmp.path(), "diverged.golow");
    let words = records
        .iter()
        .filter(|r| r["type"] == "step" && r["loss"].is_string())
        .count();
    assert!(words > 0, "no step carries a non-finite loss");
    assert!(
        records.iter().all(|r| r["type"] != "protocol_error"),
        "a line was refused"
    );
}

/// A worker line that is not the schema is refused, counted, and its first reason said in the summary and under the
/// table, where before it vanished.
#[test]
fn refused_worker_lines_are_counted_and_the_first_reason_said() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("noisy.py");
    std::fs::write(
        &script,
        "import os, socket\n\
         s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         s.connect(os.environ['GOLOW_EVENT_SOCKET'])\n\
         s.sendall(b'not json\\n{\"type\":\"step\"}\\n')\n\
         s.close()\n",
    )
    .unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--cmd",
            &format!("noisy=python3 {}", script.display()),
            "--no-record",
        ],
    )
    .output()
    .unwrap();
    let stdout = text(&out.stdout);
    let summary = summary_of(tmp.path());
    let noisy = &summary["workers"][0];
    assert_eq!(noisy["protocol_errors"]["count"], 2, "{noisy}");
    assert!(
        noisy["protocol_errors"]["first"]
            .as_str()
            .is_some_and(|f| !f.is_empty()),
        "{noisy}"
    );
    assert!(
        stdout.contains("noisy: 2 lines refused, the first: "),
        "{stdout}"
    );
}

/// A headless run of libtorch that would go on for ever, recording to `run.golow`, its worker's pid once it runs;
/// `ignore_hangups` starts it as `nohup` would, and otherwise SIGHUP is set to its default whatever the test itself
/// inherited (a suite run under `nohup` would leave it ignored, which golow rightly keeps).
fn endless_run(tmp: &std::path::Path, ignore_hangups: bool) -> (std::process::Child, i32) {
    let mut command = headless(
        tmp,
        &[
            common::small_run("libtorch", "100000"),
            vec!["--record", "run.golow"],
        ]
        .concat(),
    );
    let hangups = if ignore_hangups {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only signal(2) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                libc::signal(libc::SIGHUP, hangups);
                Ok(())
            });
        }
    }
    let child = command.spawn().unwrap();
    let worker = wait_for_pid(tmp, "libtorch");
    std::thread::sleep(Duration::from_secs(3));
    (child, worker)
}

/// SIGTERM (timeout, SLURM's cancellation, docker stop) and SIGHUP (a closed terminal) end a run as Ctrl-C does:
/// the workers stopped, the recording closed (its replay needs no scan), the summary written; golow exits with
/// 128 + the signal, as a shell would report it.
#[test]
fn a_terminating_signal_closes_the_session_as_an_interrupt_does() {
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGHUP, 129)] {
        let tmp = tempfile::tempdir().unwrap();
        let (child, worker_pid) = endless_run(tmp.path(), false);
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
        let s = summary_of(tmp.path());
        let w = worker(&s, "libtorch");
        assert_eq!(w["status"], "stopped", "signal {signal}: {w}");
        assert!(w["steps"].as_u64().unwrap() < 100000);
        assert!(
            !std::path::Path::new(&format!("/proc/{worker_pid}")).exists(),
            "signal {signal}: the worker outlived the session"
        );
        assert!(
            text(&out.stdout).contains("libtorch     stopped"),
            "{}",
            text(&out.stdout)
        );
        let replayed = golow(tmp.path(), &["replay", "--headless", "run.golow"]);
        assert_eq!(
            replayed.status.code(),
            Some(0),
            "{}",
            text(&replayed.stderr)
        );
        assert!(
            !text(&replayed.stderr).contains("not closed cleanly"),
            "signal {signal}: {}",
            text(&replayed.stderr)
        );
        assert_eq!(session_dirs(tmp.path()), Vec::<String>::new());
    }
}

/// Under `nohup`, whose SIGHUP is ignored, golow leaves it ignored: a closed terminal does not end the run.
#[test]
fn a_hang_up_that_was_ignored_when_golow_started_stays_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, _) = endless_run(tmp.path(), true);
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP ended a nohup run"
    );
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
}

/// A worker's end is not held up by a process that outlived it and keeps its output open (a detached descendant):
/// its streams are drained within one 2 s budget in all, not 2 s each, and what the descendant writes after that is
/// not the worker's.
#[test]
fn a_detached_descendant_neither_delays_the_workers_end_nor_speaks_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("leaves.py");
    std::fs::write(
        &script,
        "import subprocess\n\
         subprocess.Popen(['sh', '-c', 'sleep 4; echo late from the descendant; sleep 30'], start_new_session=True)\n\
         print('bye', flush=True)\n",
    )
    .unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--cmd",
            &format!("leaves=python3 {}", script.display()),
            "--record",
            "leaves.golow",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let records = exported_records(tmp.path(), "leaves.golow");
    let at = |wanted: &dyn Fn(&serde_json::Value) -> bool| {
        records
            .iter()
            .find(|r| wanted(r))
            .and_then(|r| r["t_ms"].as_f64())
    };
    let bye = at(&|r| r["type"] == "output" && r["line"] == "bye").expect("the worker's own line");
    let ended = at(&|r| r["type"] == "worker_exited").expect("the worker's end");
    assert!(
        ended - bye < 3_000.0,
        "the end came {} ms after the worker's last line",
        ended - bye
    );
    assert!(
        records
            .iter()
            .all(|r| r["line"] != "late from the descendant"),
        "what the descendant wrote after the worker ended was charged to it"
    );
    assert!(
        records.iter().any(|r| r["line"]
            .as_str()
            .is_some_and(|l| l.starts_with("golow: a process that outlived the worker"))),
        "nothing said why the worker's output was cut"
    );
}

#[test]
fn bidirectional_controls_from_a_worker_are_shown_not_obeyed() {
    let tmp = tempfile::tempdir().unwrap();
    // U+202E, the right-to-left override, then U+2066 (an isolate): on stdout, on stderr, and as the last line.
    let flip = r"flip=printf 'invoice\342\200\256fdp.exe\n'; printf 'x\342\201\246y\n' >&2; exit 3";
    let out = headless(tmp.path(), &["--cmd", flip]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    for printed in [&stdout, &stderr] {
        assert!(
            !printed.contains('\u{202e}') && !printed.contains('\u{2066}'),
            "{printed:?}"
        );
    }
    assert!(
        format!("{stdout}{stderr}").contains(r"invoice\u{202e}fdp.exe"),
        "{stdout}{stderr}"
    );
    assert!(
        format!("{stdout}{stderr}").contains(r"x\u{2066}y"),
        "{stdout}{stderr}"
    );
}

/// Too few file descriptors (`ulimit -n 12`) is bad input, said in one line before anything is written: no
/// header-only recording, no session directory, never a panic in the runtime's signal set-up.
#[test]
fn too_few_open_files_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    for limit in [8, 12, 40] {
        let record = format!("r{limit}.golow");
        let mut command = common::golow_command(tmp.path());
        command
            .args([
                "run",
                "--headless",
                "--cmd",
                "x=echo hi",
                "--record",
                &record,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe, the one call between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                let l = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let out = command.output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("this shell allows {limit} (ulimit -n)")),
            "{stderr}"
        );
        assert!(!tmp.path().join(&record).exists());
    }
    assert!(session_dirs(tmp.path()).is_empty());
    // A soft limit below the need is raised within the hard one: the session runs.
    let mut command = common::golow_command(tmp.path());
    command.args([
        "run",
        "--headless",
        "--cmd",
        "x=echo hi",
        "--record",
        "soft.golow",
    ]);
    // SAFETY: as above.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
            l.rlim_cur = 12;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
            Ok(())
        });
    }
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(tmp.path().join("soft.golow").exists());
}

/// Other processes taking the CPUs while a session runs are said while it happens, not only by `compare` afterwards.
#[test]
fn a_busy_machine_is_said_while_it_is_busy() {
    let tmp = tempfile::tempdir().unwrap();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut hogs: Vec<std::process::Child> = (0..cores)
        .map(|_| {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    let out = headless(tmp.path(), &["--cmd", "idle=sleep 8"]).output();
    for hog in &mut hogs {
        let _ = hog.kill();
        let _ = hog.wait();
    }
    let out = out.unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("golow: other processes are using "))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].ends_with("% of the CPUs: times measured now are not a quiet machine's"));
}

/// The session's directory (weights, configs, the event sockets) is its user's alone.
#[test]
fn the_session_directory_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--no-record",
            "--cmd",
            r#"x=stat -c 'mode %a' "$(dirname "$GOLOW_EVENT_SOCKET")""#,
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("x | mode 700"),
        "{}",
        text(&out.stderr)
    );
}
