//! The worker's end of the event channel: one JSON object per line on the descriptor the launcher gave it.

use std::io::{BufWriter, Write};

use golow_protocol::channels::EVENT_FD_ENV;
use golow_protocol::event::WorkerEvent;

pub struct Emitter {
    out: Box<dyn Write>,
}

impl Emitter {
    /// Writes to the launcher's descriptor, or to stdout when run by hand without one.
    pub fn from_env() -> Result<Emitter, String> {
        let out: Box<dyn Write> = match super::inherited_fd(EVENT_FD_ENV)? {
            Some(file) => Box::new(BufWriter::new(file)),
            None => Box::new(std::io::stdout()),
        };
        Ok(Emitter { out })
    }

    /// Writes and flushes one event, so the monitor sees it at once; an error means the monitor is gone.
    pub fn emit(&mut self, event: &WorkerEvent) -> std::io::Result<()> {
        self.hold(event)?;
        self.out.flush()
    }

    /// Writes one event for the next `emit` to flush with its own: for an event another follows at
    /// once, so that the monitor wakes once for both.
    pub fn hold(&mut self, event: &WorkerEvent) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, event)?;
        self.out.write_all(b"\n")
    }
}
