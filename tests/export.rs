//! Exports of a real `--cmd` session: a GAN's two optimisers, with its operators profiled one step in two. The
//! Chrome trace draws each event when it happened and each operator window on the step it profiled; the CSV's
//! documented filter keeps exactly the steps the summary measured.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use common::trace::{Slice, assert_no_thread_goes_back, assert_within, slices_by_thread};

/// dcgan's loop in small: the discriminator (the model golow times: the first it calls) on real and on generated
/// samples, its SGD step, then the generator's Adam step.
const GAN: &str = "\
import time, torch
torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
D = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
od = torch.optim.SGD(D.parameters(), lr=0.1)
og = torch.optim.Adam(G.parameters(), lr=2e-4)
for i in range(120):
    real, z = torch.randn(32, 16), torch.randn(32, 8)
    od.zero_grad()
    D(real).mean().backward()
    (-D(G(z).detach())).mean().backward()
    od.step()
    og.zero_grad()
    D(G(z)).mean().backward()
    og.step()
    time.sleep(0.02)
";

/// The session, recorded, and its exports, shared by the tests of this file.
struct Exported {
    dir: tempfile::TempDir,
    summary: Value,
}

fn exported() -> &'static Exported {
    static EXPORTED: OnceLock<Exported> = OnceLock::new();
    EXPORTED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gan.py"), GAN).unwrap();
        let args = [
            "--cmd",
            "gan=python gan.py",
            "--ops-every",
            "2",
            "--warmup",
            "3",
        ];
        common::headless_succeeds(dir.path(), &args);
        let recording = recording_in(dir.path());
        for (format, out) in [
            ("chrome-trace", "trace.json"),
            ("csv", "steps.csv"),
            ("json", "all.json"),
        ] {
            let out = dir.path().join(out);
            let args = [
                "export",
                recording.to_str().unwrap(),
                "--format",
                format,
                "-o",
                out.to_str().unwrap(),
            ];
            let done = common::golow(dir.path(), &args);
            assert!(done.status.success(), "{}", common::text(&done.stderr));
        }
        Exported {
            summary: common::summary_of(dir.path()),
            dir,
        }
    })
}

fn recording_in(dir: &Path) -> PathBuf {
    let recordings: Vec<PathBuf> = std::fs::read_dir(dir.join("recordings"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(recordings.len(), 1, "{recordings:?}");
    recordings[0].clone()
}

fn read_json(dir: &Path, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
}

/// The slices of the process named `process`, by thread, in the order written.
fn threads_of(trace: &Value, process: &str) -> HashMap<u64, Vec<Slice>> {
    let pid = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "process_name" && e["args"]["name"] == process)
        .unwrap_or_else(|| panic!("no process {process}"))["pid"]
        .as_u64()
        .unwrap();
    slices_by_thread(trace)
        .into_iter()
        .filter(|((p, _), _)| *p == pid)
        .map(|((_, tid), slices)| (tid, slices))
        .collect()
}

fn named<'s>(slices: &'s [Slice], name: &str) -> &'s Slice {
    slices
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no slice {name}"))
}

#[test]
fn the_trace_of_a_real_script_draws_each_event_when_it_happened() {
    let e = exported();
    let trace = read_json(e.dir.path(), "trace.json");
    assert_no_thread_goes_back(&trace);
    let threads = threads_of(&trace, "gan process 0");
    // The discriminator's two forward passes before its first step lie in that step, which began with the first
    // (give or take rounding: the hook's durations to the microsecond, the trace's to an eighth of one).
    let first = named(&threads[&1], "step 0");
    let forward = &threads[&0];
    assert_eq!(forward.len(), 2, "{forward:?}");
    for pass in forward {
        assert_within(pass, first, 2.0);
    }
    assert!(
        named(&threads[&999], "backward pass 1").end <= first.end,
        "the passes said as steps before the optimiser's first are drawn apart"
    );
    // Each operator window on the step it profiled: the last profiled step before it in the recording.
    let records = read_json(e.dir.path(), "all.json")["records"].clone();
    let mut last_profiled = None;
    let mut described = Vec::new();
    for r in records.as_array().unwrap() {
        match r["type"].as_str() {
            Some("optimizer_step") if r["optimizer"] == 0 && r["profiled"] == true => {
                last_profiled = r["step"].as_u64();
            }
            Some("operators") => described.push(last_profiled.take().expect("a window of no step")),
            _ => {}
        }
    }
    let windows: Vec<&Slice> = threads[&1000]
        .iter()
        .filter(|s| s.name.starts_with("operators: "))
        .collect();
    assert!(!windows.is_empty());
    assert_eq!(windows.len(), described.len());
    for (window, step) in windows.into_iter().zip(described) {
        assert_within(window, named(&threads[&1], &format!("step {step}")), 0.0);
    }
}

#[test]
fn the_csvs_filter_keeps_the_steps_the_summary_measured() {
    let e = exported();
    let text = std::fs::read_to_string(e.dir.path().join("steps.csv")).unwrap();
    let mut lines = text.lines();
    let columns: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let cell = |row: &[&str], column: &str| {
        row[columns.iter().position(|c| *c == column).unwrap()].to_string()
    };
    let steps: Vec<&Vec<&str>> = rows
        .iter()
        .filter(|r| ["optimizer_step", "backward_pass"].contains(&cell(r, "type").as_str()))
        .collect();
    for row in &steps {
        for flag in ["warmup", "profiled", "skipped"] {
            assert!(
                ["true", "false"].contains(&cell(row, flag).as_str()),
                "{flag}: {row:?}"
            );
        }
    }
    let mut optimizers: Vec<(String, String)> = steps
        .iter()
        .filter(|r| cell(r, "type") == "optimizer_step")
        .map(|r| (cell(r, "optimizer_index"), cell(r, "optimizer")))
        .collect();
    optimizers.dedup();
    assert!(
        optimizers.len() > 100,
        "the two optimisers interleave: {optimizers:?}"
    );
    optimizers.sort();
    optimizers.dedup();
    assert_eq!(
        optimizers,
        [("0".into(), "SGD".into()), ("1".into(), "Adam".into())]
    );
    // The documented filter, on the worker's steps (its first optimiser's).
    let mut measured: Vec<f64> = steps
        .iter()
        .filter(|r| cell(r, "type") == "optimizer_step" && cell(r, "optimizer_index") == "0")
        .filter(|r| {
            ["warmup", "profiled", "skipped"]
                .iter()
                .all(|f| cell(r, f) == "false")
        })
        .map(|r| cell(r, "interval_ms").parse().unwrap())
        .collect();
    let w = common::worker(&e.summary, "gan");
    let count = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {w}"));
    let profiled = count(&w["operators"]["profiled_steps"]);
    assert!(profiled > 0, "{w}");
    // A step a GradScaler skipped is none of the summary's `steps`.
    let expected = count(&w["steps"]) - count(&w["warmup_steps"]) - profiled;
    assert_eq!(measured.len() as u64, expected, "{w}");
    measured.sort_by(f64::total_cmp);
    let from_csv = measured[(measured.len() - 1) / 2];
    let p50 = w["step_time_ms"]["p50"].as_f64().unwrap();
    assert!(
        (p50 / from_csv - 1.0).abs() < 2e-3,
        "golow {p50} ms, the CSV's {from_csv} ms"
    );
}
