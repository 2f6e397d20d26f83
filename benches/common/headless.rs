//! A headless golow session run for its summary, as the benches that compare workers side by side read it.

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `golow run --headless` with `args` in `dir` (its recordings go there, not to the repository's
/// recordings/), its output discarded, and returns the summary it writes.
pub fn summary(golow: &Path, dir: &Path, args: &[String]) -> serde_json::Value {
    let path = dir.join("summary.json");
    let status = Command::new(golow)
        .current_dir(dir)
        .args(["run", "--headless"])
        .args(args)
        .arg("--summary-json")
        .arg(&path)
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("golow runs");
    assert!(status.success(), "golow run failed: {status}");
    let text = std::fs::read_to_string(&path).expect("summary written");
    serde_json::from_str(&text).expect("summary is JSON")
}

/// The summary's worker of implementation `name`.
pub fn worker<'a>(summary: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    summary["workers"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["impl"] == name))
        .unwrap_or_else(|| panic!("no worker {name}: {summary}"))
}
