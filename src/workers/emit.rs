//! The worker's end of the event channel: one JSON object per line on the descriptor the launcher gave it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::FromRawFd;

use crate::event::WorkerEvent;

/// Environment variable naming the file descriptor events are written to.
pub const EVENT_FD_ENV: &str = "GOLOW_EVENT_FD";

pub struct Emitter {
    out: Box<dyn Write>,
}

impl Emitter {
    /// Writes to the launcher's descriptor, or to stdout when run by hand without one.
    pub fn from_env() -> Result<Emitter, String> {
        let out: Box<dyn Write> = match std::env::var(EVENT_FD_ENV) {
            Ok(fd) => {
                let fd: i32 = fd
                    .parse()
                    .map_err(|_| format!("{EVENT_FD_ENV}={fd} is not a file descriptor number"))?;
                if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
                    return Err(format!(
                        "{EVENT_FD_ENV}={fd} is not an open file descriptor"
                    ));
                }
                // SAFETY: the descriptor is open (checked above) and nothing else in this process owns it.
                Box::new(BufWriter::new(unsafe { File::from_raw_fd(fd) }))
            }
            Err(_) => Box::new(std::io::stdout()),
        };
        Ok(Emitter { out })
    }

    /// Writes and flushes one event; a monitor that went away is not an error worth dying of mid-step,
    /// so failures are returned for the caller to decide.
    pub fn emit(&mut self, event: &WorkerEvent) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, event)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}
