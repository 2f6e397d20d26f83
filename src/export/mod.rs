//! Exports a recording for other tools, streaming it record by record:
//!
//! - `json`: one object, `{"header": …, "records": […]}`, every record exactly as recorded.
//! - `csv`: one row per numeric record (steps, epochs, optimiser steps, backward passes, process and GPU readings)
//!   in fixed columns, for spreadsheets and dataframes. The records are folded as they go (`State::apply`, as the
//!   summary folds them), so that each step's row says what the fold made of it: warm-up, profiled, skipped.
//! - `chrome-trace`: the Trace Event Format that Perfetto UI and chrome://tracing open: a
//!   process per worker with its steps as nested slices, counter tracks for its loss and
//!   resource readings, and instants for epochs, exits and protocol errors; whole-GPU readings
//!   go on process 0, the monitor. Each process of a `--cmd` worker that reported is a process
//!   of its own under its real pid (as `torch.profiler`'s traces name it), with a thread per
//!   optimiser for its steps, one for its model's forward passes and one for the backward passes counted as its
//!   steps before an optimiser steps, each placed when the hook says it ended. Operator windows are a thread of the
//!   process that profiled them: a profiled step's compute, drawn on the profiled step it describes, and in it each
//!   operator's self time.

mod chrome_trace;
mod csv;
mod json;

use std::io::{self, BufWriter, Write};

use serde_json::Value;

use golow_protocol::event::Record;

/// The formats, as `--format` names them (`chrome-trace`, `csv`, `json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    ChromeTrace,
    Csv,
    Json,
}

/// Writes `records` (in time order) in `format` to `out`. `header` is the recording's header
/// object (JSON), included where the format has room for it.
pub fn export(
    header: &Value,
    records: impl Iterator<Item = Record>,
    format: Format,
    out: &mut dyn Write,
) -> io::Result<()> {
    // Every format writes many small pieces; buffering here spares callers from having to.
    let mut out = BufWriter::new(out);
    match format {
        Format::Json => json::write(header, records, &mut out)?,
        Format::Csv => csv::write(records, &mut out)?,
        Format::ChromeTrace => chrome_trace::write(header, records, &mut out)?,
    }
    out.flush()
}

#[cfg(test)]
mod tests;
