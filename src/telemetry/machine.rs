//! The machine a session runs on, read once when it starts: for the recording's header.

use crate::recording::format::{Machine, MachineGpu};
use crate::telemetry::gpu::{GpuSource, NvmlSource};

/// The host, its CPU and cores, and the GPUs NVML reports (or why it reports none).
pub fn describe() -> Machine {
    let (gpus, gpu_unavailable) = match NvmlSource::open() {
        Ok(source) => (
            source
                .devices()
                .into_iter()
                .map(|d| MachineGpu {
                    index: d.index,
                    name: d.name,
                    driver: d.driver,
                    memory_total_bytes: d.memory_total_bytes,
                })
                .collect(),
            None,
        ),
        Err(reason) => (Vec::new(), Some(reason)),
    };
    Machine {
        host: host_name(),
        cpu: cpu_model(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        gpus,
        gpu_unavailable,
    }
}

pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_default()
}
