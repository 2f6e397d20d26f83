//! What recordings cost and how fast they read back:
//! 1. disk: a real two-worker session (libtorch and pytorch, 10 Hz telemetry) recorded for
//!    `GOLOW_BENCH_RECORD_SECONDS` (default 120) and stopped with Ctrl-C; bytes per minute, target
//!    ≤ 100 KB;
//! 2. ingest: headless replay (read, decompress, parse, fold) of a one-hour recording, events per
//!    second, target ≥ 2 million;
//! 3. seek: the state at 200 random times of that recording, once read to its end; target < 100 ms each.
//!
//! The one-hour recording is built from the real session of step 1: its records repeated, shifted in
//! time, until an hour is covered, and written by the real recorder. Medians of `GOLOW_BENCH_RUNS`
//! (default 5) ingest runs. With `GOLOW_BENCH_BASELINE=PATH` (another build's `golow`), `golow replay
//! --headless` of the hour is also timed for both builds in turn, who goes first swapped each round: the
//! speed-up as a median and the range of the rounds' ratios, from one run on one machine.

mod common;

use common::{env_or, median, spread};

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use golow::recording::{Player, Recorder};
use golow_protocol::event::{Body, Record};

const HOUR_MS: f64 = 3_600_000.0;

fn record_real_session(dir: &Path, seconds: u64) -> std::path::PathBuf {
    let path = dir.join("real.golow");
    let mut child = Command::new(env!("CARGO_BIN_EXE_golow"))
        .current_dir(dir)
        .args([
            "run",
            "--headless",
            "--impl",
            "libtorch,pytorch",
            "--steps",
            "1000000",
        ])
        .arg("--record")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("golow runs");
    std::thread::sleep(Duration::from_secs(seconds));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait().expect("golow exits");
    path
}

/// The real session's records, repeated back to back until `HOUR_MS` is covered.
fn hour_from(real: &Path, out: &Path) -> u64 {
    let mut player = Player::open(real).expect("the real recording opens");
    let header = player.recording().header.clone();
    let records: Vec<Record> = player.records().collect();
    let span = records.last().map_or(1.0, |r| r.t_ms).max(1.0);
    let (recorder, mut sink) = Recorder::create(out, &header).expect("create");
    let mut shift = 0.0;
    let mut first = true;
    while shift < HOUR_MS {
        for record in &records {
            let repeated_start = !first && matches!(record.body, Body::SessionStart(_));
            if repeated_start || matches!(record.body, Body::SessionEnd) {
                continue;
            }
            let mut record = record.clone();
            record.t_ms += shift;
            sink.write(&record);
        }
        first = false;
        shift += span;
    }
    sink.write(&Record::new(shift, None, Body::SessionEnd));
    drop(sink);
    recorder.finish().expect("finish").events
}

/// `golow replay --headless` of `hour` by this build and by `baseline`, alternately: medians and the speed-up.
fn replay_beside(baseline: &str, hour: &Path, rounds: usize) {
    let builds = [env!("CARGO_BIN_EXE_golow"), baseline];
    let mut seconds = [Vec::new(), Vec::new()];
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let mut took = [0.0; 2];
        for which in [round % 2, 1 - round % 2] {
            let start = Instant::now();
            let status = Command::new(builds[which])
                .args(["replay", "--headless"])
                .arg(hour)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .expect("golow runs");
            assert!(status.success(), "{} replay failed", builds[which]);
            took[which] = start.elapsed().as_secs_f64();
            seconds[which].push(took[which]);
        }
        ratios.push(took[1] / took[0]);
    }
    let (low, high) = spread(&ratios);
    println!(
        "golow replay --headless of the hour: this build {:.3} s, baseline {:.3} s (medians of {rounds}, alternating): \
         {:.2}× faster (rounds {low:.2}–{high:.2})",
        median(&mut seconds[0]),
        median(&mut seconds[1]),
        median(&mut ratios),
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let seconds = env_or("GOLOW_BENCH_RECORD_SECONDS", 120) as u64;
    let real = record_real_session(dir.path(), seconds);
    let bytes = std::fs::metadata(&real).expect("recorded").len();
    let duration_ms = Player::open(&real)
        .expect("opens")
        .recording()
        .duration_ms();
    let per_minute = bytes as f64 / (duration_ms / 60_000.0) / 1000.0;
    println!(
        "disk: two workers, 10 Hz telemetry, {:.0} s recorded: {bytes} bytes, {per_minute:.1} KB per minute (target ≤ 100)",
        duration_ms / 1e3
    );

    let hour = dir.path().join("hour.golow");
    let events = hour_from(&real, &hour);
    let hour_bytes = std::fs::metadata(&hour).expect("written").len();
    if let Ok(keep) = std::env::var("GOLOW_BENCH_KEEP") {
        std::fs::copy(&hour, keep).unwrap();
    }
    println!("one-hour recording: {events} events, {hour_bytes} bytes");

    let mut rates = Vec::new();
    for _ in 0..env_or("GOLOW_BENCH_RUNS", 5) {
        let start = Instant::now();
        let mut player = Player::open(&hour).expect("opens");
        player.run_to_end();
        let seconds = start.elapsed().as_secs_f64();
        assert!(player.state().ended);
        rates.push(events as f64 / seconds);
    }
    let ingest = median(&mut rates);
    println!(
        "ingest: headless replay of the hour, median {:.2} M events/s (target ≥ 2)",
        ingest / 1e6
    );

    if let Ok(baseline) = std::env::var("GOLOW_BENCH_BASELINE") {
        replay_beside(&baseline, &hour, env_or("GOLOW_BENCH_RUNS", 5));
    }

    let start = Instant::now();
    let mut player = Player::open(&hour).expect("opens");
    drop(player.seek(f64::INFINITY));
    println!(
        "open and read to the end (one pass, checkpoints): {:.0} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let mut seeks = Vec::new();
    // A fixed linear congruential sequence: the same times every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..200 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let t = (x >> 11) as f64 / (1u64 << 53) as f64 * HOUR_MS;
        let start = Instant::now();
        let state = player.seek(t);
        let took = start.elapsed().as_secs_f64() * 1e3;
        assert!(state.t_ms <= t);
        seeks.push(took);
    }
    let worst = seeks.iter().copied().fold(0.0, f64::max);
    let typical = median(&mut seeks);
    println!(
        "seek: median {typical:.1} ms, max {worst:.1} ms over 200 random times (target < 100)"
    );
    if per_minute > 100.0 || ingest < 2e6 || worst >= 100.0 {
        std::process::exit(1);
    }
}
