//! The summary JSON: the contract scripts and later features rely on (README, "Summary JSON").

use serde::{Deserialize, Serialize};

use super::{Percentiles, ProcessEnd, State, WorkerState};
use golow_protocol::config::{Mode, Model, Schedule, SessionConfig};
use golow_protocol::event::ExitStatus;

pub const SUMMARY_VERSION: u32 = 1;

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WorkerStatus {
    Ok,
    Failed,
    Stopped,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SummaryConfig {
    pub model: Model,
    pub dataset: String,
    pub mode: Mode,
    pub batch_size: u32,
    pub resolution: u32,
    pub device: String,
    pub schedule: Schedule,
    /// `--cmd` workers: name → shell command.
    pub commands: std::collections::BTreeMap<String, String>,
}

impl From<&SessionConfig> for SummaryConfig {
    fn from(c: &SessionConfig) -> SummaryConfig {
        SummaryConfig {
            model: c.model,
            dataset: c.dataset.clone(),
            mode: c.mode,
            batch_size: c.batch_size,
            resolution: c.resolution,
            device: c.device.clone(),
            schedule: c.schedule,
            commands: c.commands.clone(),
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Loss {
    pub first: Option<f64>,
    pub last: Option<f64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WorkerSummary {
    #[serde(rename = "impl")]
    pub implementation: String,
    pub status: WorkerStatus,
    /// What the worker reported running on (its hello event): library → version.
    pub versions: std::collections::BTreeMap<String, String>,
    pub exit_code: Option<i32>,
    /// Set when a signal ended the worker.
    pub signal: Option<i32>,
    pub steps: u64,
    pub warmup_steps: u64,
    pub samples: u64,
    pub compute_ms: Option<Percentiles>,
    pub sample_time_ms: Option<Percentiles>,
    /// Per measured step: the timed regions (built-in), or the interval between optimiser steps (`--cmd`).
    pub step_time_ms: Option<Percentiles>,
    pub h2d_ms: Option<Percentiles>,
    pub h2d_bytes_per_step: Option<u64>,
    pub throughput_samples_per_s: Option<f64>,
    pub loss: Loss,
    pub accuracy: Option<f64>,
    pub peak_host_rss_bytes: u64,
    pub peak_gpu_mem_bytes: Option<u64>,
    /// Mean of NVML's per-process SM utilisation readings for the worker's process tree.
    pub gpu_sm_percent_mean: Option<f64>,
    /// Shares of GPU time (HTA's definitions) from the CUPTI collector's windows; `null` without them.
    pub gpu_breakdown: Option<golow_protocol::event::Breakdown>,
    /// Kernel launches per step, from the collector's windows after the first step.
    pub kernel_launches_per_step: Option<f64>,
    /// Host-to-device bytes per step as CUPTI measured them, to set beside the worker's own `h2d_bytes_per_step`.
    pub cupti_h2d_bytes_per_step: Option<f64>,
    /// Why the worker failed: its own message, else its last stderr lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Summary {
    pub golow_summary: u32,
    pub config: Option<SummaryConfig>,
    pub workers: Vec<WorkerSummary>,
    /// The machine's conditions while the session ran; `null` when it was recorded without them.
    #[serde(default)]
    pub machine: Option<super::conditions::Conditions>,
}

impl Summary {
    pub fn from_state(state: &State) -> Summary {
        Summary {
            golow_summary: SUMMARY_VERSION,
            config: state.session.as_ref().map(SummaryConfig::from),
            workers: state
                .workers
                .iter()
                .map(WorkerSummary::from_worker)
                .collect(),
            machine: state.machine.conditions(),
        }
    }
}

fn status(worker: &WorkerState) -> WorkerStatus {
    let end = worker.process_end;
    let own = worker.exit.as_ref().map(|e| e.status);
    if end.is_some_and(|e| e.stop_requested) || own == Some(ExitStatus::Stopped) {
        return WorkerStatus::Stopped;
    }
    // A `--cmd` worker sends no exit event: its exit code alone says how it ended.
    match (end, own) {
        (Some(e), Some(ExitStatus::Ok) | None) if e.exit_code == Some(0) => WorkerStatus::Ok,
        _ => WorkerStatus::Failed,
    }
}

impl WorkerSummary {
    pub fn from_worker(w: &WorkerState) -> WorkerSummary {
        let status = status(w);
        let error = (status == WorkerStatus::Failed).then(|| failure_reason(w));
        WorkerSummary {
            implementation: w.name.clone(),
            status,
            versions: w
                .hello
                .as_ref()
                .map(|h| h.versions.clone())
                .unwrap_or_default(),
            exit_code: w.process_end.and_then(|e| e.exit_code),
            signal: w.process_end.and_then(|e| e.signal),
            steps: w.steps,
            warmup_steps: w.warmup_steps,
            samples: w.samples,
            compute_ms: w.compute.percentiles(),
            sample_time_ms: w.sample_time.percentiles(),
            step_time_ms: w.step_time.percentiles(),
            h2d_ms: w.h2d.percentiles(),
            h2d_bytes_per_step: w.h2d_bytes_per_step(),
            throughput_samples_per_s: w.throughput(),
            loss: Loss {
                first: w.first_loss,
                last: w.last_step.as_ref().map(|s| s.loss),
            },
            accuracy: w
                .last_epoch
                .as_ref()
                .and_then(|e| e.eval_accuracy.or(e.train_accuracy)),
            peak_host_rss_bytes: w.peak_rss_bytes,
            peak_gpu_mem_bytes: w.peak_gpu_memory_bytes,
            gpu_sm_percent_mean: w.gpu_sm_percent_mean(),
            gpu_breakdown: w.gpu_activity.breakdown(),
            kernel_launches_per_step: w.gpu_activity.per_step.kernel_launches(),
            cupti_h2d_bytes_per_step: w.gpu_activity.per_step.h2d_bytes(),
            error,
        }
    }
}

fn failure_reason(w: &WorkerState) -> String {
    let end = match w.process_end {
        Some(ProcessEnd {
            signal: Some(sig), ..
        }) => format!("killed by signal {sig} ({})", signal_name(sig)),
        Some(ProcessEnd {
            exit_code: Some(code),
            ..
        }) => format!("exited with code {code}"),
        _ => "did not finish".to_string(),
    };
    let detail = w.exit.as_ref().and_then(|e| e.message.clone()).or_else(|| {
        (!w.stderr_tail.is_empty())
            .then(|| w.stderr_tail.iter().cloned().collect::<Vec<_>>().join("\n"))
    });
    match detail {
        Some(detail) => format!("{end}: {detail}"),
        None => end,
    }
}

/// The conventional name of a signal, for messages.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    }
}
