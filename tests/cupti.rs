//! The CUPTI collector without a GPU: golow injects it into every worker, and where CUDA would call it, it
//! loads, tries CUPTI, and reports what it could do on its own socket; the report is recorded like any event.
//! The workers here play CUDA's part: they load `CUDA_INJECTION64_PATH` and call `InitializeInjection`.

mod common;

use std::path::{Path, PathBuf};

use common::{PYTHON, golow, golow_command, text};

/// What the CUDA driver does at `cuInit` in a process whose environment names an injection library.
const LIKE_CUDA: &str = "\
import ctypes, os, sys
path = os.environ.get('CUDA_INJECTION64_PATH')
if path is None:
    print('no injection', flush=True)
    sys.exit(0)
print('tracing one window in', os.environ.get('GOLOW_CUPTI_EVERY'), flush=True)
sys.exit(0 if ctypes.CDLL(path).InitializeInjection() == 1 else 1)
";

/// The libcupti of the venv's CUDA wheels (present with torch's CUDA build, as `make build` installs it).
fn venv_cupti() -> PathBuf {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    std::fs::read_dir(&lib)
        .unwrap()
        .filter_map(Result::ok)
        .map(|python| {
            python
                .path()
                .join("site-packages/nvidia/cu13/lib/libcupti.so.13")
        })
        .find(|p| p.is_file())
        .expect("the venv has CUDA 13's libcupti")
}

/// Runs the probe as a `--cmd` worker with `extra` arguments; returns the session's records.
fn records(tmp: &Path, cupti: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let probe = tmp.join("probe.py");
    std::fs::write(&probe, LIKE_CUDA).unwrap();
    let recording = tmp.join("session.golow");
    let out = golow_command(tmp)
        .env(golow_protocol::collector::LIBRARY_ENV, cupti)
        .args(["run", "--headless", "--cmd"])
        .arg(format!("probe={PYTHON} {}", probe.display()))
        .arg("--record")
        .arg(&recording)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json = tmp.join("session.json");
    let export = golow(
        tmp,
        &[
            "export",
            recording.to_str().unwrap(),
            "--format",
            "json",
            "-o",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(export.status.code(), Some(0), "{}", text(&export.stderr));
    let exported: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    exported["records"].as_array().unwrap().clone()
}

fn of_type<'a>(records: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

#[test]
fn the_collector_in_a_worker_tries_cupti_and_reports_what_it_could_do() {
    let tmp = tempfile::tempdir().unwrap();
    let records = records(tmp.path(), &venv_cupti(), &[]);
    let events = of_type(&records, "collector");
    assert_eq!(events.len(), 1, "{events:?}");
    let event = events[0];
    assert_eq!(event["worker"], "probe");
    let detail = event["detail"].as_str().unwrap();
    if event["active"] == false {
        // No driver here: CUPTI loads but refuses to trace, and the collector names the call that failed.
        assert!(detail.starts_with("cuptiActivity"), "{detail}");
    } else {
        assert!(detail.contains("libcupti.so.13"), "{detail}");
    }
}

#[test]
fn a_missing_cupti_is_named_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no/libcupti.so.13");
    let records = records(tmp.path(), &missing, &[]);
    let events = of_type(&records, "collector");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["active"], false);
    let detail = events[0]["detail"].as_str().unwrap();
    assert!(detail.contains(missing.to_str().unwrap()), "{detail}");
    assert!(!detail.contains('\n'), "{detail}");
}

#[test]
fn no_cupti_injects_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let records = records(tmp.path(), &venv_cupti(), &["--no-cupti"]);
    assert!(of_type(&records, "collector").is_empty());
    assert!(
        of_type(&records, "output")
            .iter()
            .any(|r| r["line"] == "no injection"),
        "{records:?}"
    );
}

#[test]
fn kernels_every_reaches_the_collector_which_says_it_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let records = records(tmp.path(), &venv_cupti(), &["--kernels-every", "4"]);
    assert!(
        of_type(&records, "output")
            .iter()
            .any(|r| r["line"] == "tracing one window in 4"),
        "{records:?}"
    );
    let events = of_type(&records, "collector");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["kernels_every"], 4, "{:?}", events[0]);
}

#[test]
fn by_default_every_window_is_traced() {
    let tmp = tempfile::tempdir().unwrap();
    let records = records(tmp.path(), &venv_cupti(), &[]);
    assert!(
        of_type(&records, "output")
            .iter()
            .any(|r| r["line"] == "tracing one window in 1"),
        "{records:?}"
    );
    let events = of_type(&records, "collector");
    assert!(events[0].get("kernels_every").is_none(), "{:?}", events[0]);
}

/// `golow run` of a `--cmd` that does nothing, with `extra` arguments.
fn run_with(tmp: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--headless", "--cmd", "probe=true"];
    args.extend(extra);
    golow(tmp, &args)
}

#[test]
fn a_bad_kernels_every_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    for value in ["0", "3601", "-2"] {
        let out = run_with(tmp.path(), &["--kernels-every", value]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let expected =
            format!("--kernels-every must be between 1 (every window) and 3600 (got {value})");
        assert!(
            stderr.contains(&expected) && stderr.trim_end().lines().count() == 1,
            "{stderr}"
        );
    }
    let out = run_with(tmp.path(), &["--kernels-every", "2", "--no-cupti"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot be used with"));
}
