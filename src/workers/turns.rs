//! The worker's side of the alternating schedule: it runs the steps it is granted, reports the end of
//! its turn, and waits for the next grant on its control descriptor.

use std::fs::File;
use std::io::{BufRead, BufReader};

/// Environment variable naming the file descriptor grants are read from; unset means run freely.
pub const CONTROL_FD_ENV: &str = "GOLOW_CONTROL_FD";

/// What the monitor told the worker.
#[derive(Debug, PartialEq, Eq)]
pub enum Grant {
    Steps(u64),
    Stop,
}

/// Parses one control line: `go N` or `stop`.
pub fn parse_grant(line: &str) -> Result<Grant, String> {
    let line = line.trim();
    if line == "stop" {
        return Ok(Grant::Stop);
    }
    line.strip_prefix("go ")
        .and_then(|n| n.trim().parse().ok())
        .map(Grant::Steps)
        .ok_or_else(|| format!("invalid control line '{line}'"))
}

pub struct Turns {
    control: Option<BufReader<File>>,
    granted: u64,
}

impl Turns {
    pub fn from_env() -> Result<Turns, String> {
        let control = super::inherited_fd(CONTROL_FD_ENV)?.map(BufReader::new);
        Ok(Turns {
            control,
            granted: 0,
        })
    }

    /// True when the worker has to report the end of its turn before the next step.
    pub fn turn_over(&self) -> bool {
        self.control.is_some() && self.granted == 0
    }

    /// Blocks until the monitor grants more steps; `Stop` also when the monitor is gone.
    pub fn wait(&mut self) -> Result<Grant, String> {
        let Some(control) = self.control.as_mut() else {
            return Ok(Grant::Steps(u64::MAX));
        };
        let mut line = String::new();
        let read = control
            .read_line(&mut line)
            .map_err(|e| format!("control channel: {e}"))?;
        if read == 0 {
            return Ok(Grant::Stop);
        }
        let grant = parse_grant(&line)?;
        if let Grant::Steps(n) = grant {
            self.granted = n;
        }
        Ok(grant)
    }

    /// Called once per step run.
    pub fn took_step(&mut self) {
        self.granted = self.granted.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse() {
        assert_eq!(parse_grant("go 3\n"), Ok(Grant::Steps(3)));
        assert_eq!(parse_grant("stop"), Ok(Grant::Stop));
        assert!(parse_grant("go -1").is_err());
        assert!(parse_grant("run").is_err());
    }
}
