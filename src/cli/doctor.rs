//! `golow doctor`: what golow finds on this machine, one line per component, each with the reason when
//! something is missing, then everything a run on a GPU depends on, found or missing, in one screen.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;

use super::{EXIT_OK, EXIT_WORKER_FAILED, Failure};
use crate::session::{programs, python};

#[derive(Args)]
pub struct DoctorArgs {
    /// Python to check [default: $GOLOW_PYTHON, else the python beside golow (the environment it is installed in),
    /// else the .venv of `make build`, else python3 on PATH].
    #[arg(long)]
    python: Option<PathBuf>,
}

/// One thing a run on a GPU depends on: what it found, or why it is missing.
struct Need {
    what: &'static str,
    found: Result<String, String>,
    /// Lines under it (the GPUs NVML lists).
    details: Vec<String>,
}

impl Need {
    fn new(what: &'static str, found: Result<String, String>) -> Need {
        Need {
            what,
            found,
            details: Vec::new(),
        }
    }
}

fn nvml_need() -> Need {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            let found = Err(format!("no NVIDIA GPU — NVML: {e}"));
            return Need::new("NVML (libnvidia-ml)", found);
        }
    };
    let driver = nvml
        .sys_driver_version()
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let count = nvml.device_count().unwrap_or(0);
    let gpus = (0..count)
        .map(|i| match nvml.device_by_index(i) {
            Ok(d) => {
                let name = d.name().unwrap_or_else(|e| format!("unknown ({e})"));
                let memory = d
                    .memory_info()
                    .map(|m| format!("{:.1} GiB", m.total as f64 / (1u64 << 30) as f64));
                format!(
                    "GPU {i}: {name}, {}",
                    memory.unwrap_or_else(|e| format!("memory unknown ({e})"))
                )
            }
            Err(e) => format!("GPU {i}: {e}"),
        })
        .collect();
    let found = Ok(format!("driver {driver}, {count} GPU(s)"));
    Need {
        details: gpus,
        ..Need::new("NVML (libnvidia-ml)", found)
    }
}

/// What the python's torch says of CUDA, and where the libcupti beside its CUDA libraries is.
const TORCH_CUDA_PROBE: &str = r#"
import glob, json, os, torch
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
try:
    import nvidia
    dirs += [d for root in nvidia.__path__ for d in sorted(glob.glob(os.path.join(root, "*", "lib")))]
except ImportError:
    pass
cupti = sorted(p for d in dirs for p in glob.glob(os.path.join(d, "libcupti.so*")))
print(json.dumps({"cuda": torch.version.cuda, "devices": torch.cuda.device_count(), "cupti": cupti[:1]}))
"#;

fn torch_needs(python: &Path) -> [Need; 2] {
    let probe = Command::new(python)
        .args(["-c", TORCH_CUDA_PROBE])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| serde_json::from_slice::<serde_json::Value>(&out.stdout).ok());
    let Some(probe) = probe else {
        let why = || {
            Err(format!(
                "python {} cannot say (see above)",
                python.display()
            ))
        };
        return [
            Need::new("torch with CUDA (python)", why()),
            Need::new("libcupti", why()),
        ];
    };
    let torch = match (
        probe["cuda"].as_str(),
        probe["devices"].as_u64().unwrap_or(0),
    ) {
        (None, _) => Err("this torch is built without CUDA".to_string()),
        (Some(cuda), 0) => Err(format!("CUDA {cuda} build, but it sees no device")),
        (Some(cuda), n) => Ok(format!("CUDA {cuda}, {n} device(s)")),
    };
    let cupti = match std::env::var_os(golow_protocol::collector::LIBRARY_ENV) {
        Some(path) if Path::new(&path).is_file() => Ok(format!(
            "{} (from {})",
            Path::new(&path).display(),
            golow_protocol::collector::LIBRARY_ENV
        )),
        Some(path) => Err(format!(
            "{} names {}, which is not a file",
            golow_protocol::collector::LIBRARY_ENV,
            Path::new(&path).display()
        )),
        None => probe["cupti"][0]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                format!(
                    "none beside torch's CUDA libraries (install nvidia-cuda-cupti, or set {})",
                    golow_protocol::collector::LIBRARY_ENV
                )
            }),
    };
    [
        Need::new("torch with CUDA (python)", torch),
        Need::new("libcupti", cupti),
    ]
}

fn worker_needs(probe: Option<&serde_json::Value>) -> [Need; 2] {
    let Some(probe) = probe else {
        let why = || Err("golow-worker does not start (see above)".to_string());
        return [
            Need::new("libtorch with CUDA (golow-worker)", why()),
            Need::new("cuDNN", why()),
        ];
    };
    let cuda = match (
        probe["cuda_available"].as_bool(),
        probe["cuda_devices"].as_i64(),
    ) {
        (Some(true), Some(n)) => Ok(format!("{n} device(s)")),
        _ => Err("libtorch sees no CUDA device".to_string()),
    };
    let cudnn = match &probe["cudnn_version"] {
        serde_json::Value::Null => Err("not available to libtorch".to_string()),
        version => Ok(format!("version {version}")),
    };
    [
        Need::new("libtorch with CUDA (golow-worker)", cuda),
        Need::new("cuDNN", cudnn),
    ]
}

/// Whether the worker starts, its line, and what its probe said.
fn worker_report(torch: Option<&python::Torch>) -> (bool, String, Option<serde_json::Value>) {
    let mut worker = match programs::worker() {
        Ok(p) => p,
        Err(e) => return (false, format!("golow-worker: {e}"), None),
    };
    if !worker.finds_torch_itself {
        let Some(torch) = torch else {
            return (
                false,
                format!(
                    "golow-worker: not started, for want of torch {} to find its libraries in (see python above)",
                    python::TORCH_RELEASE
                ),
                None,
            );
        };
        if let Err(why) = worker.use_torch(torch) {
            return (false, format!("golow-worker: {why}"), None);
        }
    }
    let program = worker.path.clone();
    match worker.command(["probe"]).output() {
        Ok(out) if out.status.success() => {
            let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let field = |k: &str| {
                probe
                    .get(k)
                    .map(|v| v.to_string().trim_matches('"').to_string())
                    .unwrap_or_else(|| "?".into())
            };
            let line = format!(
                "golow-worker: {} (libtorch {}, tch {}, threads: {})",
                program.display(),
                field("libtorch"),
                field("tch"),
                field("threads"),
            );
            (true, line, Some(probe))
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
                None,
            )
        }
        Err(e) => (
            false,
            format!("golow-worker: cannot run {}: {e}", program.display()),
            None,
        ),
    }
}

pub fn doctor(args: DoctorArgs) -> Result<i32, Failure> {
    sayln!("golow {}", env!("CARGO_PKG_VERSION"));
    let python = python::resolve(args.python);
    let levels_torch = match python::torch(&python) {
        Ok(torch) => {
            sayln!("python: {} (torch {})", python.display(), torch.version);
            match python::supported(&python, torch) {
                Ok(torch) => {
                    sayln!(
                        "levels: every --impl runs with this torch (they need {}; --cmd runs with any torch)",
                        python::TORCH_RELEASE
                    );
                    Some(torch)
                }
                Err(why) => {
                    sayln!("levels: {why}");
                    None
                }
            }
        }
        Err(e) => {
            sayln!("python: {e}");
            None
        }
    };
    let python_ok = levels_torch.is_some();
    let (worker_ok, worker, probe) = worker_report(levels_torch.as_ref());
    sayln!("{worker}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        sayln!(
            "CPU cores: {cores} (a worker's threads fill them by default, and golow's wake-ups then preempt them: \
             --threads {} --monitor-cpu {} gives golow a core of its own; docs/methodology.md, \"The observer effect\")",
            cores - 1,
            cores - 1
        );
    } else {
        sayln!("CPU cores: 1");
    }
    match programs::interposer() {
        Ok(library) => sayln!(
            "exec interposer: {} (keeps the step hook on every python a --cmd command starts)",
            library.display()
        ),
        Err(why) => sayln!("exec interposer: missing, so --cmd cannot run: {why}"),
    }
    sayln!("{}", crate::inject::attach_permission_here());
    match programs::cpp_compiler() {
        Ok(cxx) => sayln!(
            "C++ compiler: {} (Inductor builds --impl aoti's package and --impl compile's CPU kernels with it)",
            cxx.display()
        ),
        Err(why) => {
            sayln!(
                "C++ compiler: missing, so --impl aoti cannot run, nor --impl compile on the CPU: {why}"
            )
        }
    }
    let driver = match crate::telemetry::cuda::device_count() {
        Ok(0) => Err("the driver sees no device".to_string()),
        Ok(n) => Ok(format!("{n} device(s)")),
        Err(e) => Err(e),
    };
    let nvml = nvml_need();
    // Which libcupti it loads is decided inside each worker, beside the CUDA that worker loaded.
    let collector = programs::collector()
        .map(|path| format!("{} (--no-cupti turns it off)", path.display()))
        .map_err(|e| e.to_string());
    let mut needs = vec![Need::new("NVIDIA driver (libcuda)", driver), nvml];
    needs.extend(torch_needs(&python));
    needs.extend(worker_needs(probe.as_ref()));
    needs.push(Need::new("CUPTI collector", collector));
    sayln!("A run on a GPU needs:");
    for need in &needs {
        match &need.found {
            Ok(found) => sayln!("  ok       {}: {found}", need.what),
            Err(why) => sayln!("  missing  {}: {why}", need.what),
        }
        for line in &need.details {
            sayln!("           {line}");
        }
    }
    let missing: Vec<&str> = needs
        .iter()
        .filter(|n| n.found.is_err())
        .map(|n| n.what)
        .collect();
    if missing.is_empty() {
        sayln!("GPU runs: ready (--device cuda)");
    } else {
        sayln!(
            "GPU runs: not possible here; missing {}",
            missing.join(", ")
        );
    }
    Ok(if python_ok && worker_ok {
        EXIT_OK
    } else {
        EXIT_WORKER_FAILED
    })
}
