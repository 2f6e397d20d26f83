//! Scripts with the shapes of pytorch/examples' training scripts (`tests/examples/`: a CNN, a sequence-first RNN
//! trained by hand-written SGD, a VAE, an LBFGS closure, a tiny regression, a batch-first RNN, a GAN with two
//! optimisers, Hogwild processes), each run under `--cmd` as a user would, and golow's figures of each checked
//! against what the script measured itself, on its own clock (`tests/examples/own.py`): its steps, samples per step,
//! losses, step times and phases.

mod common;

use std::path::Path;

use common::{headless_succeeds, summary_of, text, worker};
use serde_json::Value;

/// What a script printed of itself: each step's end (s), loss, samples, its waits on data, forward and backward
/// passes (s), and whether a profiler recorded during it.
struct Own {
    pid: u64,
    ends: Vec<f64>,
    losses: Vec<f64>,
    samples: Vec<u64>,
    data: Vec<f64>,
    forward: Vec<f64>,
    backward: Vec<f64>,
    profiled: Vec<bool>,
}

impl Own {
    fn of(line: &Value) -> Own {
        let list = |key: &str| -> Vec<f64> {
            line[key]
                .as_array()
                .unwrap_or_else(|| panic!("{key} in {line}"))
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        };
        Own {
            pid: line["pid"].as_u64().unwrap(),
            ends: list("ends"),
            losses: list("losses"),
            samples: list("samples").into_iter().map(|n| n as u64).collect(),
            data: list("data"),
            forward: list("forward"),
            backward: list("backward"),
            profiled: line["profiled"]
                .as_array()
                .unwrap_or_else(|| panic!("profiled in {line}"))
                .iter()
                .map(|v| v.as_bool().unwrap())
                .collect(),
        }
    }

    /// The median of each step's `values` (seconds) over the steps golow measures (past the warm-up, none a
    /// profiler recorded in), in milliseconds.
    fn median_ms(&self, values: &[f64], warmup: usize) -> f64 {
        let mut measured: Vec<f64> = values
            .iter()
            .zip(&self.profiled)
            .skip(warmup)
            .filter(|(_, profiled)| !**profiled)
            .map(|(s, _)| s * 1e3)
            .collect();
        measured.sort_by(f64::total_cmp);
        measured[(measured.len() - 1) / 2]
    }

    /// Its median step interval over the steps golow measures: each step's from the end of the one before (the
    /// first step has none).
    fn step_ms(&self, warmup: usize) -> f64 {
        let intervals: Vec<f64> = std::iter::once(f64::NAN)
            .chain(self.ends.windows(2).map(|w| w[1] - w[0]))
            .collect();
        self.median_ms(&intervals, warmup.max(1))
    }
}

/// Every `OWN {…}` line the scripts printed (golow passes their output through on stderr).
fn owns(stderr: &str) -> Vec<(String, Own)> {
    stderr
        .lines()
        .filter_map(|line| line.split_once("OWN "))
        .map(|(_, json)| {
            let line: Value = serde_json::from_str(json).unwrap();
            (line["name"].as_str().unwrap().to_string(), Own::of(&line))
        })
        .collect()
}

fn f64_at(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {v}"))
}

/// Within `relative` of `expected`, or `absolute` of it where that is more.
fn near(got: f64, expected: f64, relative: f64, absolute: f64) -> bool {
    (got - expected).abs() <= (relative * expected.abs()).max(absolute)
}

const WARMUP: usize = 1;

/// The scripts, each with the arguments that keep it short, and whether it waits on a DataLoader (its data phase is
/// then golow's too; a script that makes its batches itself spends that in golow's "other").
const SCRIPTS: [(&str, &str, bool); 8] = [
    ("cnn", "cnn.py 40", true),
    ("seq_rnn", "seq_rnn.py 40", false),
    ("vae", "vae.py 40", true),
    ("lbfgs", "lbfgs.py 5 100", false),
    ("regression", "regression.py 100", false),
    ("batch_rnn", "batch_rnn.py 40", true),
    ("gan", "gan.py 40", true),
    ("hogwild", "hogwild.py 40", true),
];

#[test]
fn scripts_shaped_like_pytorch_examples_are_measured_as_they_measure_themselves() {
    let tmp = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/examples");
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py") {
            std::fs::copy(&path, tmp.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let commands: Vec<String> = SCRIPTS
        .iter()
        .map(|(name, script, _)| format!("{name}=python {script}"))
        .collect();
    let mut args: Vec<&str> = commands
        .iter()
        .flat_map(|c| ["--cmd", c.as_str()])
        .collect();
    let warmup = WARMUP.to_string();
    // One at a time and one thread each: the scripts' clocks and golow's read the same quiet steps; one step in two
    // may be profiled (within 2% of the time), which the LBFGS script's steps take too long for.
    args.extend([
        "--schedule",
        "sequential",
        "--threads",
        "1",
        "--warmup",
        &warmup,
        "--ops-every",
        "2",
        "--record",
        "examples.golow",
    ]);
    let out = headless_succeeds(tmp.path(), &args);
    let stderr = text(&out.stderr);
    let summary = summary_of(tmp.path());
    let owns = owns(&stderr);

    for (name, _, loader) in SCRIPTS {
        let w = worker(&summary, name);
        let theirs: Vec<&Own> = owns
            .iter()
            .filter(|(n, _)| n.split('-').next() == Some(name))
            .map(|(_, own)| own)
            .collect();
        assert!(
            !theirs.is_empty(),
            "{name} printed nothing of itself: {stderr}"
        );
        // Hogwild's processes each train: the worker's figures are one of theirs, the one golow chose.
        let first = f64_at(w, "/loss/first");
        let own = theirs
            .iter()
            .find(|own| near(first, own.losses[0], 1e-5, 1e-7))
            .unwrap_or_else(|| {
                panic!("{name}: no process of the script had golow's first loss: {w}")
            });
        let context = format!("{name}: {w}");

        assert_eq!(
            w["steps"].as_u64(),
            Some(own.ends.len() as u64),
            "{context}"
        );
        let processes = w["script"]["processes"].as_array().unwrap();
        assert_eq!(
            processes.len(),
            theirs.len(),
            "each process that trained: {context}"
        );
        assert!(
            processes.iter().any(|p| p["pid"].as_u64() == Some(own.pid)),
            "{context}"
        );

        let samples = f64_at(w, "/step_time_ms/p50") / f64_at(w, "/sample_time_ms/p50");
        assert!(
            own.samples.iter().all(|&n| n == own.samples[0]),
            "{name}: {:?}",
            own.samples
        );
        assert!(
            near(samples, own.samples[0] as f64, 0.01, 0.0),
            "{name}: {samples} samples a step, the script's {}: {context}",
            own.samples[0]
        );

        // A step's loss: the script's own, each as the script understands it (a GAN's discriminator's two halves
        // summed, LBFGS's first evaluation). The script summed in float32 where golow sums the values read.
        let last = f64_at(w, "/loss/last");
        assert!(
            near(last, *own.losses.last().unwrap(), 1e-5, 1e-7),
            "{context}"
        );

        let step_ms = own.step_ms(WARMUP);
        assert!(
            near(f64_at(w, "/step_time_ms/p50"), step_ms, 0.15, 0.5),
            "{name}: the script's median step {step_ms} ms: {context}"
        );
        let phases = &w["script"]["phases"];
        let mut timed = vec![("forward", &own.forward), ("backward", &own.backward)];
        if loader {
            timed.push(("data", &own.data));
        }
        for (phase, values) in timed {
            let theirs = own.median_ms(values, WARMUP);
            let golows = f64_at(phases, &format!("/{phase}/p50_ms"));
            assert!(
                near(golows, theirs, 0.25, 0.3),
                "{name} {phase}: golow {golows} ms, the script {theirs} ms: {phases}"
            );
        }
        let shares: f64 = ["data", "forward", "backward", "optimizer", "other"]
            .iter()
            .map(|p| f64_at(phases, &format!("/{p}/share")))
            .sum();
        assert!((shares - 1.0).abs() < 1e-9, "{phases}");
    }

    // LBFGS runs its closure twenty times a step, each a long unrolled sequence: profiling such a step would grow the
    // process by gigabytes, so the profile is given up, said once, and its step kept out of the figures.
    let lbfgs = worker(&summary, "lbfgs");
    let off = lbfgs["operators"]["off"].as_str().unwrap_or_default();
    assert!(off.starts_with("a profiled step "), "{lbfgs}");
    assert!(
        stderr.contains(&format!("lbfgs: no more steps profiled: {off}"))
            || text(&out.stdout).contains(&format!("no more steps profiled: {off}")),
        "said in the run's lines: {stderr}"
    );
}
