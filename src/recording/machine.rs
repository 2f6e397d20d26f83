//! What a recording's header says about the machine and the run, and where recordings go by default.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::format::{FORMAT_NAME, FORMAT_VERSION, Header, HeaderGpu};
use crate::telemetry::gpu::{GpuSource, NvmlSource};
use golow_protocol::config::SessionConfig;
use golow_protocol::event::SCHEMA_VERSION;

/// `recordings/<UTC timestamp>-<workers>.golow`, with a counter when that name is taken.
pub fn default_path(dir: &Path, workers: &[String], now: SystemTime) -> PathBuf {
    let stamp = utc(now).replace(['-', ':'], "");
    let names: String = workers.join("-").chars().take(80).collect();
    let mut path = dir.join(format!("{stamp}-{names}.golow"));
    for n in 2.. {
        if !path.exists() {
            break;
        }
        path = dir.join(format!("{stamp}-{names}-{n}.golow"));
    }
    path
}

pub fn header_for(config: &SessionConfig, command_line: Vec<String>) -> Header {
    let (gpus, gpu_unavailable) = match NvmlSource::open() {
        Ok(source) => (
            source
                .devices()
                .into_iter()
                .map(|d| HeaderGpu {
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
    Header {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        golow_version: env!("CARGO_PKG_VERSION").into(),
        schema_version: SCHEMA_VERSION,
        created_utc: utc(SystemTime::now()),
        host: host_name(),
        cpu: cpu_model(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        gpus,
        gpu_unavailable,
        command_line,
        config: config.clone(),
    }
}

fn host_name() -> String {
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

/// ISO 8601 UTC to the second, e.g. `2026-11-21T09:30:00Z` (days to civil date: Howard Hinnant's
/// algorithm, so no calendar crate is needed).
pub fn utc(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn utc_dates() {
        let at = |s: u64| utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_250_096), "2026-11-21T08:34:56Z");
    }

    #[test]
    fn default_names_never_overwrite() {
        let dir = tempfile::tempdir().expect("temp dir");
        let workers = vec!["libtorch".to_string(), "pytorch".to_string()];
        let now = UNIX_EPOCH + Duration::from_secs(1_795_250_096);
        let first = default_path(dir.path(), &workers, now);
        assert_eq!(
            first.file_name().and_then(|n| n.to_str()),
            Some("20261121T083456Z-libtorch-pytorch.golow")
        );
        std::fs::write(&first, b"taken").expect("write");
        assert_ne!(default_path(dir.path(), &workers, now), first);
    }
}
