//! Chrome-trace export's cost per worker as the number of workers a recording names grows: 1,000, 10,000 and
//! 100,000 workers, each with a start, a step and an exit. Linear export keeps the time per worker flat (it was
//! quadratic: 10^5 workers took over 20 s). The sizes are run in turn, `GOLOW_BENCH_RUNS` rounds (default 5), so a
//! noisy machine slows each alike; medians and spreads of µs per worker.

mod common;

use common::{env_or, median, spread};

use std::time::Instant;

use golow::export::{Format, export};
use golow_protocol::config::Mode;
use golow_protocol::event::{Body, Record, Step};

fn records(workers: usize) -> Vec<Record> {
    let mut records = Vec::with_capacity(workers * 3);
    for w in 0..workers {
        let name = Some(format!("w{w}").into());
        let t = w as f64;
        records.push(Record::new(
            t,
            name.clone(),
            Body::WorkerStarted {
                pid: w as u32,
                command: vec![],
            },
        ));
        records.push(Record::new(
            t + 0.5,
            name.clone(),
            Body::Step(Step {
                step: 0,
                epoch: 0,
                phase: Mode::Train,
                batch_size: 1,
                data_ms: 0.1,
                h2d_ms: None,
                h2d_bytes: None,
                compute_ms: 0.2,
                loss: 1.0,
                correct: 0,
                warmup: false,
                profiled: false,
                start_ns: None,
                end_ns: None,
            }),
        ));
        records.push(Record::new(
            t + 0.9,
            name,
            Body::WorkerExited {
                exit_code: Some(0),
                signal: None,
                stop_requested: false,
            },
        ));
    }
    records
}

fn main() {
    let runs: usize = env_or("GOLOW_BENCH_RUNS", 5);
    let sizes = [1_000usize, 10_000, 100_000];
    let inputs: Vec<Vec<Record>> = sizes.iter().map(|&n| records(n)).collect();
    let header = serde_json::json!({"format": "golow-recording", "version": 1});
    let mut per_worker_us: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    for _ in 0..runs {
        for (i, input) in inputs.iter().enumerate() {
            let mut out = Vec::new();
            let start = Instant::now();
            export(
                &header,
                input.iter().cloned(),
                Format::ChromeTrace,
                &mut out,
            )
            .expect("export");
            per_worker_us[i].push(start.elapsed().as_secs_f64() * 1e6 / sizes[i] as f64);
        }
    }
    println!("chrome-trace export, µs per worker (median [min, max] of {runs} rounds)");
    let mut medians = Vec::new();
    for (n, times) in sizes.iter().zip(&mut per_worker_us) {
        let (min, max) = spread(times);
        let m = median(times);
        medians.push(m);
        println!("{n:>7} workers: {m:8.2} [{min:.2}, {max:.2}]");
    }
    let growth = medians[2] / medians[0];
    println!(
        "per-worker cost at 100,000 over 1,000 workers: {growth:.2}× (linear: about 1; quadratic: about 100)"
    );
}
