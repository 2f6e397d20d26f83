//! A recording's header (what ran, where, and how), and where recordings go by default.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use golow_protocol::config::SessionConfig;
use golow_protocol::event::SCHEMA_VERSION;

use super::format::{FORMAT_NAME, FORMAT_VERSION, Header};
use crate::telemetry::machine::Machine;

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

impl Header {
    /// The header of a session recorded now on `machine`, started by `command_line`.
    pub fn new(config: &SessionConfig, command_line: Vec<String>, machine: Machine) -> Header {
        Header {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            golow_version: env!("CARGO_PKG_VERSION").into(),
            golow_commit: Some(env!("GOLOW_COMMIT").into()),
            schema_version: SCHEMA_VERSION,
            created_utc: utc(SystemTime::now()),
            machine,
            command_line,
            config: config.clone(),
        }
    }
}

/// ISO 8601 UTC to the second, e.g. `2026-11-21T09:30:00Z`.
pub fn utc(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

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
