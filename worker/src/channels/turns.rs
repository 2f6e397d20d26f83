//! The worker's side of the alternating schedule: it runs the steps it is granted, reports the end of
//! its turn, and waits for the next grant on its control descriptor.

use std::fs::File;
use std::io::{BufRead, BufReader};

use golow_protocol::channels::{CONTROL_FD_ENV, Grant};

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
        let grant = Grant::parse(&line)?;
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
