//! What loading a file into a running CPython costs the process (`golow::inject::schedule_file`, which `golow attach`
//! loads its step hook with): how long the process is stopped (gdb's attach to its detach) and gdb's whole run, on a
//! plain python and on one that imported torch (its libraries mapped too, which gdb's attach walks), both in an
//! idle loop (sleeping 1 ms). Each round schedules one file into each, in rotating order, and waits until it ran;
//! the file notes when, which gives when the process ran it, against when `schedule_file` returned (negative:
//! before, while gdb was still ending).
//!
//! `GOLOW_BENCH_RUNS` (default 10) sets the rounds.

mod common;

use common::{env_or, median, spread};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use golow::inject;

/// The target: writes `BOX/ready` once it has imported what it was asked to, then sleeps 1 ms at a time.
const TARGET: &str = r#"
import importlib, os, sys, time
for name in sys.argv[2:]:
    importlib.import_module(name)
open(os.path.join(sys.argv[1], "ready"), "w").close()
while True:
    time.sleep(0.001)
"#;

/// The file scheduled in round N: notes CLOCK_MONOTONIC when it ran.
fn snippet(round: usize) -> String {
    format!(
        "import os, time\nbox = os.path.dirname(__file__)\n\
         with open(os.path.join(box, 'ran-{round}.part'), 'w') as f:\n    f.write(str(time.monotonic_ns()))\n\
         os.replace(os.path.join(box, 'ran-{round}.part'), os.path.join(box, 'ran-{round}'))\n"
    )
}

struct Target {
    name: &'static str,
    child: Child,
    dir: tempfile::TempDir,
    stopped: Vec<f64>,
    gdb: Vec<f64>,
    ran_after: Vec<f64>,
}

impl Target {
    fn start(name: &'static str, imports: &[&str]) -> Target {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("target.py"), TARGET).unwrap();
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
        let child = Command::new(python)
            .arg(dir.path().join("target.py"))
            .arg(dir.path())
            .args(imports)
            .stdin(Stdio::null())
            .spawn()
            .expect("the venv's python");
        let ready = dir.path().join("ready");
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        while !ready.exists() {
            assert!(std::time::Instant::now() < deadline, "{name} never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        Target {
            name,
            child,
            dir,
            stopped: Vec::new(),
            gdb: Vec::new(),
            ran_after: Vec::new(),
        }
    }

    /// Schedules round `round`'s file and waits until it ran; returns its line.
    fn round(&mut self, round: usize) -> String {
        let file = self.dir.path().join(format!("round-{round}.py"));
        std::fs::write(&file, snippet(round)).unwrap();
        let scheduled = inject::schedule_file(self.child.id(), &file, Duration::from_secs(60))
            .unwrap_or_else(|refusal| panic!("{}: {refusal}", self.name));
        let gdb_ended = monotonic_ns();
        let ran = self.dir.path().join(format!("ran-{round}"));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !ran.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{}: the file never ran",
                self.name
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let ran_at: i128 = std::fs::read_to_string(&ran).unwrap().parse().unwrap();
        let ran_after = (ran_at - gdb_ended) as f64 / 1e6;
        let stopped = scheduled.stopped.as_secs_f64() * 1e3;
        let gdb = scheduled.gdb.as_secs_f64() * 1e3;
        self.stopped.push(stopped);
        self.gdb.push(gdb);
        self.ran_after.push(ran_after);
        format!(
            "{}: stopped {stopped:.1} ms, gdb {gdb:.0} ms, ran {ran_after:+.1} ms after schedule_file returned",
            self.name
        )
    }

    fn summary(&mut self) -> String {
        let line = |values: &mut Vec<f64>, digits: usize| {
            let (low, high) = spread(values);
            format!(
                "{:.digits$} ms ({low:.digits$}–{high:.digits$})",
                median(values)
            )
        };
        let (early, late) = spread(&self.ran_after);
        format!(
            "{}: stopped {}, gdb {}, ran {:+.1} ms ({early:+.1} to {late:+.1}) after schedule_file returned \
             (medians, their range)",
            self.name,
            line(&mut self.stopped, 1),
            line(&mut self.gdb, 0),
            median(&mut self.ran_after),
        )
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn monotonic_ns() -> i128 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}

fn gdb_version() -> String {
    Command::new("gdb")
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "gdb missing".into())
}

fn main() {
    let rounds: usize = env_or("GOLOW_BENCH_RUNS", 10);
    let mut targets = [
        Target::start("plain python", &[]),
        Target::start("python with torch imported", &["torch"]),
    ];
    let libraries = |t: &Target| {
        let maps =
            std::fs::read_to_string(format!("/proc/{}/maps", t.child.id())).unwrap_or_default();
        let mut files: Vec<&str> = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .collect();
        files.sort_unstable();
        files.dedup();
        files.len()
    };
    println!(
        "schedule_file into an idle CPython {} (the venv's), {} rounds alternating in rotating order; {}; {} cores",
        inject::python_in(targets[0].child.id()).map_or("?".into(), |v| v.to_string()),
        rounds,
        gdb_version(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    for target in &targets {
        println!("{}: {} files mapped", target.name, libraries(target));
    }
    for round in 0..rounds {
        let order: Vec<usize> = (0..targets.len())
            .map(|i| (i + round) % targets.len())
            .collect();
        let lines: Vec<String> = order.iter().map(|&i| targets[i].round(round)).collect();
        println!("  round {}: {}", round + 1, lines.join("; "));
    }
    for target in &mut targets {
        println!("{}", target.summary());
    }
}
