//! The machine a session runs on: its facts, read once when the session starts, which a recording's header states.

use serde::{Deserialize, Serialize};

use crate::telemetry::gpu::{GpuSource, NvmlSource};

/// The machine a session runs on, as a recording's header states it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Machine {
    pub host: String,
    pub cpu: String,
    pub cores: usize,
    /// The GPUs NVML reported when the session started; empty without one.
    pub gpus: Vec<MachineGpu>,
    /// Why there are no GPUs, as NVML said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_unavailable: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MachineGpu {
    pub index: u32,
    pub name: String,
    pub driver: String,
    pub memory_total_bytes: u64,
}

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
