//! Helpers shared by the integration tests: run the real `golow` binary and read what it left.

#![allow(dead_code)]

pub mod frameworks;
pub mod tmux;
pub mod trace;
pub mod ui_session;

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The venv's python (torch 2.11), as `make build` creates it.
pub const PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");

/// The venv's bin directory first on PATH, so that commands say `python` and `torchrun` as users type them.
pub fn with_venv_path(command: &mut Command) -> &mut Command {
    let venv_bin = Path::new(PYTHON).parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv_bin];
    paths.extend(std::env::split_paths(&path));
    command.env("PATH", std::env::join_paths(paths).unwrap())
}

pub fn golow_command(tmp: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_golow"));
    // Session directories go here, so a test can see that nothing was left behind; so do recordings
    // (`recordings/` under the working directory).
    cmd.env("TMPDIR", tmp).current_dir(tmp);
    cmd.env_remove("GOLOW_PYTHON");
    cmd
}

/// `golow run --headless ARGS --summary-json TMP/summary.json`, its output captured.
pub fn headless(tmp: &Path, args: &[&str]) -> Command {
    let mut cmd = golow_command(tmp);
    cmd.args(["run", "--headless"])
        .args(args)
        .arg("--summary-json")
        .arg(tmp.join("summary.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A `headless` run with the venv's bin directory first on PATH, which must succeed: its output.
pub fn headless_succeeds(tmp: &Path, args: &[&str]) -> Output {
    let out = with_venv_path(&mut headless(tmp, args)).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// The arguments of the smallest real session: `implementations` training ResNet-18 at 32 px, batch 4, for `steps`
/// steps (a run to interrupt gives many).
pub fn small_run<'a>(implementations: &'a str, steps: &'a str) -> Vec<&'a str> {
    vec![
        "--impl",
        implementations,
        "--model",
        "resnet18",
        "--resolution",
        "32",
        "--batch-size",
        "4",
        "--steps",
        steps,
    ]
}

/// Pids of the processes whose command line (arguments joined by spaces) satisfies `wanted`.
pub fn processes_where(wanted: impl Fn(&str) -> bool) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<i32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            wanted(&text(&cmdline).replace('\0', " ")).then_some(pid)
        })
        .collect()
}

/// The summary a `headless` run wrote.
pub fn summary_of(tmp: &Path) -> serde_json::Value {
    summary(&tmp.join("summary.json"))
}

/// The session directories left in `tmp` (golow's TMPDIR in these tests): none once a session ended.
pub fn session_dirs(tmp: &Path) -> Vec<String> {
    left_in(tmp)
        .into_iter()
        .filter(|name| name.starts_with("golow-session"))
        .collect()
}

/// Everything in `tmp` (golow's TMPDIR in these tests), sorted by name.
pub fn left_in(tmp: &Path) -> Vec<String> {
    let mut left: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    left
}

/// Process `pid`'s resident-set high-water mark (VmHWM), in KiB; `None` once it is gone.
pub fn high_water_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
}

/// Waits for `child` to end, reading its high-water mark while it runs: its peak, in KiB.
pub fn peak_kib_until_exit(child: &mut std::process::Child) -> u64 {
    let mut peak_kib = 0u64;
    while child.try_wait().unwrap().is_none() {
        peak_kib = peak_kib.max(high_water_kib(child.id()).unwrap_or(0));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    peak_kib
}

pub fn golow(tmp: &Path, args: &[&str]) -> Output {
    golow_command(tmp).args(args).output().expect("golow runs")
}

/// An HTTP/1.0 GET of `path` from `addr` (no chunked answers): the status line and the body.
pub fn get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// A sample's value in a scrape of golow's /metrics, e.g. `golow_steps_total{worker="libtorch"}`.
pub fn metric(scrape: &str, sample: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Reads a summary JSON that golow wrote.
pub fn summary(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no summary at {}: {e}", path.display()));
    serde_json::from_str(&text).expect("summary is JSON")
}

pub fn worker<'a>(summary: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    summary["workers"]
        .as_array()
        .expect("workers array")
        .iter()
        .find(|w| w["impl"] == name)
        .unwrap_or_else(|| panic!("no worker {name} in {summary}"))
}

/// An IDX file (MNIST's format): big-endian magic and dimensions, then the payload.
pub fn idx_file(magic: u32, dims: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut bytes = magic.to_be_bytes().to_vec();
    for d in dims {
        bytes.extend_from_slice(&d.to_be_bytes());
    }
    bytes.extend_from_slice(payload);
    bytes
}

/// README.md, ARCHITECTURE.md and every page of the guide (docs/*.md), by path from the repository's root.
pub fn documentation_pages() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut guide: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    pages.extend(guide);
    pages
}
