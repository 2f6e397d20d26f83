//! The channels between the monitor and a worker process besides its stdout and stderr: events out on one
//! descriptor, turn grants in on another, the CUPTI collector's windows out on a third. Each descriptor's number is
//! also named in the worker's environment, so a worker started by hand (without them) runs on its own.

/// Where a worker writes its events, one JSON object per line.
pub const EVENT_FD: i32 = 3;
pub const EVENT_FD_ENV: &str = "GOLOW_EVENT_FD";

/// Where a worker under the alternating schedule reads its grants; unset means run freely.
pub const CONTROL_FD: i32 = 4;
pub const CONTROL_FD_ENV: &str = "GOLOW_CONTROL_FD";

/// Where the CUPTI collector inside the worker sends its windows (see [`crate::collector::FD_ENV`]).
pub const COLLECTOR_FD: i32 = 5;

/// What the monitor tells a worker that takes turns: one line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Run this many more steps, then report the end of the turn and wait.
    Steps(u64),
    Stop,
}

impl Grant {
    /// The line as written on the control descriptor: `go N` or `stop`.
    pub fn line(self) -> String {
        match self {
            Grant::Steps(n) => format!("go {n}\n"),
            Grant::Stop => "stop\n".to_string(),
        }
    }

    /// Parses one control line.
    pub fn parse(line: &str) -> Result<Grant, String> {
        let line = line.trim();
        if line == "stop" {
            return Ok(Grant::Stop);
        }
        line.strip_prefix("go ")
            .and_then(|n| n.trim().parse().ok())
            .map(Grant::Steps)
            .ok_or_else(|| format!("invalid control line '{line}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse() {
        assert_eq!(Grant::parse("go 3\n"), Ok(Grant::Steps(3)));
        assert_eq!(Grant::parse("stop"), Ok(Grant::Stop));
        assert!(Grant::parse("go -1").is_err());
        assert!(Grant::parse("run").is_err());
    }

    #[test]
    fn lines_parse_back() {
        for grant in [Grant::Steps(0), Grant::Steps(u64::MAX), Grant::Stop] {
            assert_eq!(Grant::parse(&grant.line()), Ok(grant));
        }
    }
}
