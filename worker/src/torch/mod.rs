//! The Rust workers (`golow-worker`): each run is one process that trains or evaluates one implementation
//! and reports on its event channel. Workers know nothing of the UI or of each other.

mod aoti;
mod aten;
#[cfg(test)]
mod aten_matches_libtorch;
mod autograd;
mod batches;
mod clock;
mod cudnn;
#[cfg(test)]
mod cudnn_matches_aten;
mod libtorch;
mod model;
mod operators;
mod runner;
mod torchscript;

use std::collections::BTreeMap;

use tch::Device;

use crate::channels::emit::Emitter;
use crate::channels::turns;
use autograd::Autograd;
use golow_protocol::config::{GpuPolicy, Impl, WorkerConfig};
use golow_protocol::event::{ExitStatus, Hello, WorkerEvent};
use runner::{Network, Runner};

pub use libtorch::write_initial_weights;

/// Parses torch's device names: `cpu`, `cuda`, `cuda:N`.
pub fn parse_device(name: &str) -> Result<Device, String> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        _ => name
            .strip_prefix("cuda:")
            .and_then(|i| i.parse().ok())
            .map(Device::Cuda)
            .ok_or_else(|| format!("unknown device '{name}' (expected cpu or cuda:N)")),
    }
}

fn versions(device: Device) -> BTreeMap<String, String> {
    let mut versions = BTreeMap::from([
        ("golow".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("tch".to_string(), "0.24.0".to_string()),
        (
            "libtorch".to_string(),
            env!("GOLOW_LIBTORCH_VERSION").to_string(),
        ),
    ]);
    if device.is_cuda() {
        versions.insert("cudnn".to_string(), tch::utils::version_cudnn().to_string());
        versions.insert(
            "cudart".to_string(),
            tch::utils::version_cudart().to_string(),
        );
    }
    versions
}

unsafe extern "C" {
    fn golow_set_gpu_policy(cudnn_benchmark: bool, tf32: bool) -> *mut std::ffi::c_char;
}

/// The session's policy for everything libtorch runs here (the cudnn level applies it to its own calls too).
pub(crate) fn apply_gpu_policy(policy: GpuPolicy) -> Result<(), String> {
    // SAFETY: sets two flags of libtorch's global context; the error, if any, is the shim's to free.
    crate::shim::result(unsafe { golow_set_gpu_policy(policy.cudnn_benchmark, policy.tf32) })
}

fn load_network(
    implementation: Impl,
    config: &WorkerConfig,
    device: Device,
) -> Result<Box<dyn Network>, String> {
    apply_gpu_policy(config.gpu_policy)?;
    Ok(match implementation {
        Impl::Libtorch => Box::new(Autograd::new(
            libtorch::LibtorchNet::load(config, device)?,
            config,
        )?),
        Impl::Torchscript => Box::new(Autograd::new(
            torchscript::TorchScriptNet::load(config, device)?,
            config,
        )?),
        Impl::Aoti => Box::new(aoti::AotiNet::load(config)?),
        Impl::Aten => Box::new(aten::load(config, device)?),
        Impl::Cudnn => Box::new(cudnn::load(config, device)?),
        Impl::Pytorch | Impl::Compile => {
            return Err(format!(
                "the {} implementation runs under Python, not golow-worker",
                implementation.name()
            ));
        }
    })
}

fn run_steps(
    implementation: Impl,
    config: &WorkerConfig,
    device: Device,
    emitter: &mut Emitter,
) -> Result<ExitStatus, String> {
    let data = batches::DataCache::open(&config.data_dir)?;
    let mut net = load_network(implementation, config, device)?;
    // The package was made before this process started: its making is this level's compile time.
    if let (Impl::Aoti, Some(package)) = (implementation, &config.aoti) {
        let compile = aoti::packaging(&package.packaging)?;
        emitter
            .emit(&WorkerEvent::Compile(compile))
            .map_err(|e| format!("event channel: {e}"))?;
    }
    let turns = turns::Turns::from_env()?;
    Runner {
        config,
        device,
        data: &data,
        emitter,
        turns,
    }
    .run(net.as_mut())
}

/// Runs one worker to the end; returns the process exit code.
pub fn run_worker(implementation: Impl, config: &WorkerConfig) -> i32 {
    let mut emitter = match Emitter::from_env() {
        Ok(e) => e,
        Err(message) => {
            eprintln!("golow-worker: {message}");
            return 2;
        }
    };
    let outcome = (|| {
        let device = parse_device(&config.device)?;
        if device.is_cuda() && !tch::Cuda::is_available() {
            return Err(format!(
                "{} requested but torch sees no CUDA device",
                config.device
            ));
        }
        tch::set_num_threads(config.threads as i32);
        let hello = Hello {
            implementation: implementation.name().to_string(),
            pid: std::process::id(),
            versions: versions(device),
            device: config.device.clone(),
            config: config.clone(),
        };
        emitter
            .emit(&WorkerEvent::Hello(Box::new(hello)))
            .map_err(|e| format!("event channel: {e}"))?;
        // A tch error surfaces as a panic; it ends this run, reported like any other error.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_steps(implementation, config, device, &mut emitter)
        }))
        .unwrap_or_else(|panic| Err(panic_message(&panic)))
    })();
    if let Err(message) = &outcome {
        eprintln!("golow-worker: {message}");
    }
    runner::emit_exit(&mut emitter, &outcome);
    match outcome {
        Ok(_) => 0,
        Err(_) => 1,
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "worker panicked".to_string());
    torch_error(&message).unwrap_or(message)
}

/// tch's panicking API wraps libtorch's error as `…unwrap()` on an `Err` value: Torch("<what> \nframe #0 …")`:
/// the first line of libtorch's own words is what explains the failure.
fn torch_error(panic: &str) -> Option<String> {
    let inner = panic.split_once("Torch(\"")?.1;
    let first = inner.split("\\n").next()?;
    Some(first.trim_end_matches("\")").trim().to_string())
}

/// What this build of libtorch sees, for `golow doctor`.
pub fn probe() -> serde_json::Value {
    let cuda = tch::Cuda::is_available();
    serde_json::json!({
        "libtorch": env!("GOLOW_LIBTORCH_VERSION"),
        "tch": "0.24.0",
        "cuda_available": cuda,
        "cuda_devices": tch::Cuda::device_count(),
        "cudnn_available": cuda && tch::Cuda::cudnn_is_available(),
        "cudnn_version": cuda.then(tch::utils::version_cudnn),
        "threads": tch::get_num_threads(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tch_panic_gives_libtorch_s_first_line() {
        let panic = r#"called `Result::unwrap()` on an `Err` value: Torch("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 301989888 bytes. Error code 12 (Cannot allocate memory)\nframe #0: c10::ThrowEnforceNotMet(char const*, int) + 0x6a")"#;
        assert_eq!(
            torch_error(panic).as_deref(),
            Some(
                "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 301989888 bytes. Error code 12 (Cannot allocate memory)"
            )
        );
        assert_eq!(
            torch_error(r#"x: Torch("short")"#).as_deref(),
            Some("short")
        );
        assert_eq!(torch_error("index out of bounds"), None);
    }
}
