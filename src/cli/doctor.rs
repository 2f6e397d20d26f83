//! `golow doctor`: what golow finds on this machine, one line per component, each with the reason when
//! something is missing.

use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use super::{EXIT_OK, EXIT_WORKER_FAILED, Failure};
use crate::session::{programs, python};

#[derive(Args)]
pub struct DoctorArgs {
    /// Python to check [default: $GOLOW_PYTHON, else the .venv of `make build`].
    #[arg(long)]
    python: Option<PathBuf>,
}

fn nvml_report() -> Vec<String> {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => return vec![format!("NVML: no NVIDIA GPU — NVML: {e}")],
    };
    let driver = nvml
        .sys_driver_version()
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let count = nvml.device_count().unwrap_or(0);
    let mut lines = vec![format!("NVML: driver {driver}, {count} GPU(s)")];
    for i in 0..count {
        let line = match nvml.device_by_index(i) {
            Ok(d) => {
                let name = d.name().unwrap_or_else(|e| format!("unknown ({e})"));
                let memory = d
                    .memory_info()
                    .map(|m| format!("{:.1} GiB", m.total as f64 / (1u64 << 30) as f64));
                format!(
                    "  GPU {i}: {name}, {}",
                    memory.unwrap_or_else(|e| format!("memory unknown ({e})"))
                )
            }
            Err(e) => format!("  GPU {i}: {e}"),
        };
        lines.push(line);
    }
    lines
}

fn worker_report() -> (bool, String) {
    let program = match programs::worker() {
        Ok(p) => p,
        Err(e) => return (false, format!("golow-worker: {e}")),
    };
    match Command::new(&program).arg("probe").output() {
        Ok(out) if out.status.success() => {
            let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let field = |k: &str| {
                probe
                    .get(k)
                    .map(|v| v.to_string().trim_matches('"').to_string())
                    .unwrap_or_else(|| "?".into())
            };
            (
                true,
                format!(
                    "golow-worker: {} (libtorch {}, tch {}, CUDA available: {}, CUDA devices: {}, cuDNN: {}, threads: {})",
                    program.display(),
                    field("libtorch"),
                    field("tch"),
                    field("cuda_available"),
                    field("cuda_devices"),
                    field("cudnn_version"),
                    field("threads"),
                ),
            )
        }
        Ok(out) => {
            let last = crate::session::last_stderr_line(&out);
            (
                false,
                format!(
                    "golow-worker: {} fails to start ({}): {last}",
                    program.display(),
                    out.status
                ),
            )
        }
        Err(e) => (
            false,
            format!("golow-worker: cannot run {}: {e}", program.display()),
        ),
    }
}

pub fn doctor(args: DoctorArgs) -> Result<i32, Failure> {
    println!("golow {}", env!("CARGO_PKG_VERSION"));
    let python = python::resolve(args.python);
    let python_ok = match python::check(&python) {
        Ok(version) => {
            println!("python: {} (torch {version})", python.display());
            true
        }
        Err(e) => {
            println!("python: {e}");
            false
        }
    };
    let (worker_ok, worker) = worker_report();
    println!("{worker}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        println!(
            "CPU cores: {cores} (a worker's threads fill them by default, and golow's wake-ups then preempt them: \
             --threads {} --monitor-cpu {} gives golow a core of its own; README, \"The observer effect\")",
            cores - 1,
            cores - 1
        );
    } else {
        println!("CPU cores: 1");
    }
    match crate::telemetry::cuda::device_count() {
        Ok(n) => println!("CUDA driver: {n} device(s)"),
        Err(e) => println!("CUDA driver: {e}"),
    }
    for line in nvml_report() {
        println!("{line}");
    }
    // Which libcupti it loads is decided inside each worker, beside the CUDA that worker loaded.
    match programs::collector() {
        Ok(path) => println!(
            "CUPTI collector: {} (injected into workers that initialise CUDA; --no-cupti turns it off)",
            path.display()
        ),
        Err(e) => println!("CUPTI collector: {e}"),
    }
    Ok(if python_ok && worker_ok {
        EXIT_OK
    } else {
        EXIT_WORKER_FAILED
    })
}
