//! An interactive replay of a day-long session: how soon its first screen's state is ready after opening, and what
//! a seek costs anywhere in it, forward and backward.
//!
//! The 24-hour recording is written by golow's recorder from a real session's records
//! (`recordings/20261126-h200-levels-train-b32.golow`: four workers training on an H200, with /proc, NVML and
//! CUPTI readings): its start once, its steady part (from the last worker's hello to the first epoch's end) again
//! and again, times, CUPTI windows' clocks and step numbers shifted, until a day is covered, then its end.
//!
//! Measured as `golow replay` drives its player: the first screen is the state at 0 after opening; the first pass
//! through the file (here a jump from there to the end) reads and folds each record once, keeping checkpoints; then
//! seeks to random times, each from where the last one left the player. `GOLOW_BENCH_RUNS` (default 5) openings,
//! `GOLOW_BENCH_SEEKS` (default 100) seeks; medians and ranges.

mod common;

use common::{env_or, median, spread};

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use golow::recording::{Player, Recorder};
use golow_protocol::event::{Body, Record};

const DAY_MS: f64 = 24.0 * 3_600_000.0;
const SOURCE: &str = "recordings/20261126-h200-levels-train-b32.golow";

/// `record` moved `by_ms` later: its time, and the clocks a CUPTI window is placed by on the session's time line.
fn shifted(record: &Record, by_ms: f64) -> Record {
    let mut record = record.clone();
    record.t_ms += by_ms;
    if let Body::Kernels(window) = &mut record.body {
        let by_ns = (by_ms * 1e6) as u64;
        window.window_start_ns += by_ns;
        window.window_end_ns += by_ns;
        for clock in [&mut window.monotonic_start_ns, &mut window.monotonic_end_ns] {
            *clock = clock.map(|ns| ns + by_ns);
        }
    }
    record
}

/// Writes a day of `real`'s session to `out`; returns how many records it holds.
fn day_from(real: &Path, out: &Path) -> u64 {
    let mut player = Player::open(real).expect("the real recording opens");
    let header = player.recording().header.clone();
    let records: Vec<Record> = player.records().collect();
    let steady_from = records
        .iter()
        .rposition(|r| matches!(r.body, Body::Hello(_)))
        .expect("the workers said hello");
    let steady_to = records
        .iter()
        .position(|r| matches!(r.body, Body::Epoch(_)))
        .expect("an epoch ended");
    let (start, steady, end) = (
        &records[..steady_from],
        &records[steady_from..steady_to],
        &records[steady_to..],
    );
    // From the steady part's first record to the one after it: repeated back to back, no two times coincide.
    let span = end[0].t_ms - steady[0].t_ms;
    let mut steps: HashMap<String, u64> = HashMap::new();
    for record in steady {
        if let (Body::Step(_), Some(worker)) = (&record.body, &record.worker) {
            *steps.entry(worker.to_string()).or_default() += 1;
        }
    }
    let (recorder, mut sink) = Recorder::create(out, &header).expect("create");
    start.iter().for_each(|r| sink.write(r));
    let repeats = ((DAY_MS - start[start.len() - 1].t_ms) / span).ceil() as u64;
    for repeat in 0..repeats {
        for record in steady {
            let mut record = shifted(record, repeat as f64 * span);
            if let (Body::Step(step), Some(worker)) = (&mut record.body, &record.worker) {
                step.step += repeat * steps[&worker.to_string()];
                step.warmup &= repeat == 0;
            }
            sink.write(&record);
        }
    }
    for record in end {
        sink.write(&shifted(record, repeats as f64 * span));
    }
    drop(sink);
    recorder.finish().expect("finish").events
}

/// This process's resident memory (the kernel's VmRSS), in MB.
fn resident_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in kB");
    kb / 1e3
}

/// The median and range of `values`, as the output says them, with `decimals` digits.
fn figures(values: &mut [f64], decimals: usize) -> String {
    let (low, high) = spread(values);
    let median = median(values);
    format!("median {median:.decimals$} ({low:.decimals$}–{high:.decimals$})")
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let day = dir.path().join("day.golow");
    let events = day_from(&Path::new(env!("CARGO_MANIFEST_DIR")).join(SOURCE), &day);
    let recording = Player::open(&day).expect("opens");
    let duration_ms = recording.recording().duration_ms();
    println!(
        "a day of {SOURCE}'s session: {events} records in {} frames, {:.1} h, {:.0} MB",
        recording.recording().frames.len(),
        duration_ms / 3.6e6,
        std::fs::metadata(&day).expect("written").len() as f64 / 1e6,
    );

    let runs = env_or("GOLOW_BENCH_RUNS", 5);
    let mut first_screens: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let mut player = Player::open(&day).expect("opens");
            drop(player.seek(0.0));
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let first_screen = median(&mut first_screens);
    println!(
        "first screen (opening, the state at 0): {} ms over {runs} openings (target ≤ 1000)",
        figures(&mut first_screens, 1)
    );

    let resident_before = resident_mb();
    let mut player = Player::open(&day).expect("opens");
    drop(player.seek(0.0));
    let start = Instant::now();
    drop(player.seek(duration_ms));
    let pass_s = start.elapsed().as_secs_f64();
    assert_eq!(player.records_applied(), events, "each record folded once");
    println!(
        "the first pass, a jump from the first screen to the end: {pass_s:.1} s, {:.0} k records/s, each record folded \
         once; the player then holds {:.0} MB more (the state and its checkpoints)",
        events as f64 / pass_s / 1e3,
        resident_mb() - resident_before,
    );

    let (mut forward, mut backward, mut folded) = (Vec::new(), Vec::new(), Vec::new());
    // A fixed linear congruential sequence: the same times every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..env_or("GOLOW_BENCH_SEEKS", 100) {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let t = (x >> 11) as f64 / (1u64 << 53) as f64 * duration_ms;
        let (from, before) = (player.state().t_ms, player.records_applied());
        let start = Instant::now();
        drop(player.seek(t));
        let took = start.elapsed().as_secs_f64() * 1e3;
        let direction = if t >= from {
            &mut forward
        } else {
            &mut backward
        };
        direction.push(took);
        folded.push((player.records_applied() - before) as f64);
    }
    let worst = spread(&forward).1.max(spread(&backward).1);
    println!(
        "seeks to random times, each from where the last left the player: forward {} ms ({} seeks), backward {} ms \
         ({} seeks); records folded a seek {} (target ≤ 25 ms)",
        figures(&mut forward, 1),
        forward.len(),
        figures(&mut backward, 1),
        backward.len(),
        figures(&mut folded, 0),
    );
    if first_screen > 1000.0 || worst > 25.0 {
        std::process::exit(1);
    }
}
