//! What golow's exec interposer (`libgolow_exec.so`, preloaded into every process of a `--cmd` worker) weighs and
//! costs: its size as the wheel ships it (stripped of what linking does not need), what the loader maps of it, the
//! libraries it brings along, and the CPU a shell loop of short processes spends with it preloaded, set beside the
//! same loop without it. Each run alternates, in rotating order, the loop with no interposer, with it preloaded
//! outside golow (it loads and changes nothing), with it preloaded in the environment golow gives a `--cmd` worker (it
//! completes every program's environment), and with only the unwinder it needs (`libgcc_s`, which Rust's standard
//! library links) preloaded, to show that part apart; CPU is the loop's user + system time, its processes included.
//!
//! `GOLOW_BENCH_RUNS` (default 9) and `GOLOW_BENCH_PROCESSES` (default 500) scale it.

mod common;

use common::{env_or, median, spread};
use golow_protocol::script;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The library as built beside this bench (target/release/deps/.. is target/release).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench's own path");
    let release = exe
        .parent()
        .and_then(Path::parent)
        .expect("the bench lies in target/release/deps");
    let library = release.join("libgolow_exec.so");
    assert!(
        library.is_file(),
        "{} is missing: run `cargo build --release` first",
        library.display()
    );
    library
}

/// The output of a binutils command on `file`, which must succeed.
fn binutils(tool: &str, args: &[&str], file: &Path) -> String {
    let out = Command::new(tool)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{tool} cannot run ({e}); install binutils"));
    assert!(out.status.success(), "{tool} failed on {}", file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stripped library's size, what its loadable segments map (bytes), and the libraries it needs.
fn weight(library: &Path, dir: &Path) -> (u64, u64, Vec<String>) {
    let stripped = dir.join("libgolow_exec.so");
    let out = Command::new("strip")
        .args(["--strip-unneeded", "-o"])
        .arg(&stripped)
        .arg(library)
        .status()
        .expect("strip cannot run; install binutils");
    assert!(out.success(), "strip failed");
    let size = std::fs::metadata(&stripped)
        .expect("stripped library")
        .len();
    let mapped = binutils("readelf", &["-lW"], &stripped)
        .lines()
        .filter(|line| line.trim_start().starts_with("LOAD"))
        .map(|line| {
            let memsz = line
                .split_whitespace()
                .nth(5)
                .expect("a LOAD line's MemSiz");
            u64::from_str_radix(memsz.trim_start_matches("0x"), 16).expect("hex MemSiz")
        })
        .sum();
    let needed = binutils("readelf", &["-dW"], &stripped)
        .lines()
        .filter(|line| line.contains("(NEEDED)"))
        .filter_map(|line| Some(line.split('[').nth(1)?.trim_end_matches(']').to_string()))
        .collect();
    (size, mapped, needed)
}

/// How the loop runs: which variables the shell starts with.
#[derive(Clone, Copy)]
enum Case {
    Without,
    OutsideGolow,
    UnderGolow,
    UnwinderAlone,
}

impl Case {
    const ALL: [Case; 4] = [
        Case::Without,
        Case::OutsideGolow,
        Case::UnderGolow,
        Case::UnwinderAlone,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::Without => "without it",
            Case::OutsideGolow => "preloaded outside golow",
            Case::UnderGolow => "preloaded as golow runs --cmd",
            Case::UnwinderAlone => "libgcc_s alone preloaded",
        }
    }
}

/// CPU seconds (user + system, every process of the loop) of `sh` starting `processes` short programs.
fn loop_cpu(case: Case, processes: u32, libraries: &Libraries, hook_dir: &Path) -> f64 {
    let library = &libraries.interposer;
    let script = format!("i=0; while [ $i -lt {processes} ]; do /bin/true; i=$((i+1)); done");
    let mut command = Command::new("/bin/sh");
    command.args(["-c", &script]).env_remove("LD_PRELOAD");
    let hook = hook_dir.display().to_string();
    match case {
        Case::Without => {}
        Case::UnwinderAlone => {
            command.env("LD_PRELOAD", &libraries.unwinder);
        }
        Case::OutsideGolow => {
            command.env("LD_PRELOAD", library);
        }
        // What golow sets for a `--cmd` worker (src/session/prepare.rs), so that every program's environment is
        // completed as it would be in a user's job.
        Case::UnderGolow => {
            command
                .env("LD_PRELOAD", library)
                .env("PYTHONPATH", &hook)
                .env(script::HOOK_DIR_ENV, &hook)
                .env(script::OPS_EVERY_ENV, "0")
                .env(script::OPS_WARMUP_ENV, "1")
                .env(script::SOCKET_ENV, hook_dir.join("events.sock"));
            let kept = [
                script::HOOK_DIR_ENV,
                script::OPS_EVERY_ENV,
                script::OPS_WARMUP_ENV,
                script::SOCKET_ENV,
                script::EXEC_KEEP_ENV,
            ];
            command.env(script::EXEC_KEEP_ENV, kept.join(":"));
        }
    }
    let before = children_cpu();
    let status = command.status().expect("/bin/sh runs");
    assert!(status.success(), "the loop failed ({})", case.name());
    children_cpu() - before
}

/// User + system seconds of every child reaped so far, and of theirs.
fn children_cpu() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage for getrusage to fill.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

struct Libraries {
    interposer: PathBuf,
    unwinder: PathBuf,
}

/// The `libgcc_s` this process loaded (Rust's standard library links it, as it does the interposer's), from its
/// own memory map.
fn unwinder() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("libgcc_s.so"))
        })
        .map(PathBuf::from)
        .expect("this process maps libgcc_s")
}

fn main() {
    let runs: usize = env_or("GOLOW_BENCH_RUNS", 9);
    let processes: u32 = env_or("GOLOW_BENCH_PROCESSES", 500);
    let libraries = Libraries {
        interposer: library(),
        unwinder: unwinder(),
    };
    let dir = tempfile::tempdir().expect("bench dir");
    let (size, mapped, needed) = weight(&libraries.interposer, dir.path());
    println!(
        "libgolow_exec.so: {:.0} KB stripped as the wheel ships it, {:.0} KB mapped by the loader; needs {}",
        size as f64 / 1e3,
        mapped as f64 / 1e3,
        needed.join(", ")
    );
    println!(
        "a shell loop of {processes} /bin/true, CPU of the loop and its processes; {runs} runs, the cases \
         alternating in rotating order"
    );
    let mut cpu: [Vec<f64>; 4] = Default::default();
    for run in 0..runs {
        for k in 0..Case::ALL.len() {
            let at = (run + k) % Case::ALL.len();
            cpu[at].push(loop_cpu(Case::ALL[at], processes, &libraries, dir.path()));
        }
        println!(
            "  run {}: {}",
            run + 1,
            Case::ALL
                .iter()
                .zip(&cpu)
                .map(|(case, seconds)| format!("{} {:.0} ms", case.name(), seconds[run] * 1e3))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let without = median(&mut cpu[0].clone());
    for (case, seconds) in Case::ALL.iter().zip(&cpu).skip(1) {
        let extra: Vec<f64> = seconds
            .iter()
            .zip(&cpu[0])
            .map(|(with, without)| (with - without) / f64::from(processes) * 1e6)
            .collect();
        let share: Vec<f64> = seconds.iter().zip(&cpu[0]).map(|(w, o)| w / o).collect();
        let (low, high) = spread(&extra);
        let (share_low, share_high) = spread(&share);
        println!(
            "{}: {:.0} ms against {:.0} ms without it: {:.0} µs more a process ({:.0}–{:.0}), ×{:.3} ({:.3}–{:.3}) \
             (medians of runs, their range)",
            case.name(),
            median(&mut seconds.clone()) * 1e3,
            without * 1e3,
            median(&mut extra.clone()),
            low,
            high,
            median(&mut share.clone()),
            share_low,
            share_high
        );
    }
}
