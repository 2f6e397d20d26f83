//! Memory at parity: the peak resident memory of the `aten` worker (the framework-free program on libtorch's
//! kernels) against `libtorch`'s, ResNet-50 at 32 px on the CPU, batch 32 and 128, training and evaluation. Each
//! session runs the two workers alternating step by step (golow's `alternate` schedule), each its own process, and
//! reads each one's peak (the summary's `peak_host_rss_bytes`: VmHWM, the most it ever held, loading included);
//! sessions are repeated, swapping which goes first, and the medians and spreads reported.
//!
//! Target: `aten`'s median peak ≤ `libtorch`'s in every case. `GOLOW_BENCH_RUNS` (default 5) and
//! `GOLOW_BENCH_STEPS` (default 6, of which 1 warm-up) scale it; `GOLOW_BENCH_CASES` (e.g. `train:128,eval:32`)
//! keeps those cases. `GOLOW_BENCH_BASELINE=PATH` names another build's
//! `golow` (its `golow-worker` beside it): each run then measures that build's session at the same time as this
//! one's (a peak of resident memory does not depend on how fast the steps go), for before-and-after figures from
//! one run. The process exits non-zero when this build misses the target.

mod common;
#[path = "common/headless.rs"]
mod headless;

use common::{env_or, median, spread};

use std::path::{Path, PathBuf};

const MIB: f64 = (1 << 20) as f64;

/// Peak RSS of each worker of one session, in MiB: (aten, libtorch).
fn session(golow: &Path, mode: &str, batch: u32, first_aten: bool, steps: u32) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("bench dir");
    let impls = if first_aten {
        "aten,libtorch"
    } else {
        "libtorch,aten"
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let args = [
        "--model",
        "resnet50",
        "--resolution",
        "32",
        "--batch-size",
        &batch.to_string(),
        "--mode",
        mode,
        "--impl",
        impls,
        "--schedule",
        "alternate",
        "--steps",
        &steps.to_string(),
        "--warmup",
        "1",
        "--threads",
        &threads.to_string(),
        "--no-ops",
    ]
    .map(String::from);
    let json = headless::summary(golow, dir.path(), &args);
    let peak = |name: &str| {
        headless::worker(&json, name)["peak_host_rss_bytes"]
            .as_f64()
            .unwrap_or_else(|| panic!("no peak RSS for {name}: {json}"))
            / MIB
    };
    (peak("aten"), peak("libtorch"))
}

/// What one build measured over the runs of one case.
#[derive(Default)]
struct Peaks {
    aten: Vec<f64>,
    libtorch: Vec<f64>,
}

impl Peaks {
    /// The medians of aten's and libtorch's peaks and of their ratio, with the ranges, in one line; and whether
    /// aten's median is at or under libtorch's.
    fn report(&mut self) -> (String, bool) {
        let mut ratios: Vec<f64> = self
            .aten
            .iter()
            .zip(&self.libtorch)
            .map(|(a, l)| a / l)
            .collect();
        let range = |values: &[f64]| {
            let (low, high) = spread(values);
            format!("{low:.0}–{high:.0}")
        };
        let (aten_range, libtorch_range) = (range(&self.aten), range(&self.libtorch));
        let (low, high) = spread(&ratios);
        let (aten, libtorch) = (median(&mut self.aten), median(&mut self.libtorch));
        let line = format!(
            "aten {aten:.0} MiB ({aten_range}), libtorch {libtorch:.0} MiB ({libtorch_range}); ratio {:.3} ({low:.3}–{high:.3})",
            median(&mut ratios)
        );
        (line, aten <= libtorch)
    }
}

fn main() {
    let runs = env_or("GOLOW_BENCH_RUNS", 5);
    let steps = env_or("GOLOW_BENCH_STEPS", 6);
    let mut builds = vec![("this build", PathBuf::from(env!("CARGO_BIN_EXE_golow")))];
    if let Ok(baseline) = std::env::var("GOLOW_BENCH_BASELINE") {
        builds.push(("baseline", PathBuf::from(baseline)));
    }
    println!(
        "Peak RSS (VmHWM) of the aten and libtorch workers, ResNet-50, 32 px, CPU; {runs} runs of {steps} steps \
         (1 warm-up) each, the two workers alternating step by step; medians (ranges)"
    );
    let cases = std::env::var("GOLOW_BENCH_CASES").ok();
    let mut missed = false;
    for mode in ["train", "eval"] {
        for batch in [32, 128] {
            let case = format!("{mode}:{batch}");
            if cases
                .as_ref()
                .is_some_and(|c| !c.split(',').any(|kept| kept == case))
            {
                continue;
            }
            let mut peaks: Vec<Peaks> = builds.iter().map(|_| Peaks::default()).collect();
            for run in 0..runs {
                let first_aten = run % 2 == 0;
                let measured: Vec<(f64, f64)> = std::thread::scope(|scope| {
                    let sessions: Vec<_> = builds
                        .iter()
                        .map(|(_, golow)| {
                            scope.spawn(move || session(golow, mode, batch, first_aten, steps))
                        })
                        .collect();
                    sessions
                        .into_iter()
                        .map(|s| s.join().expect("a session's thread"))
                        .collect()
                });
                for (b, &(aten, libtorch)) in measured.iter().enumerate() {
                    println!(
                        "  {mode} batch {batch} run {} {}: aten {aten:.0} MiB, libtorch {libtorch:.0} MiB",
                        run + 1,
                        builds[b].0
                    );
                    peaks[b].aten.push(aten);
                    peaks[b].libtorch.push(libtorch);
                }
            }
            for (b, p) in peaks.iter_mut().enumerate() {
                let (line, met) = p.report();
                let verdict = match (b, met) {
                    (0, true) => " (meets aten ≤ libtorch)",
                    (0, false) => {
                        missed = true;
                        " (MISSES aten ≤ libtorch)"
                    }
                    _ => "",
                };
                println!("{mode} batch {batch}, {}: {line}{verdict}", builds[b].0);
            }
        }
    }
    if missed {
        std::process::exit(1);
    }
}
