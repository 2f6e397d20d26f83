//! `csv`: one row per numeric record in fixed columns.

use std::borrow::Cow;
use std::io::{self, Write};

use serde_json::Value;

use golow_protocol::event::{Body, Record};

use crate::state::{State, StepFlags};

/// The columns of every row, whatever kinds of record the recording holds.
const CSV_COLUMNS: &str = "t_ms,worker,type,step,epoch,phase,batch_size,data_ms,h2d_ms,\
    h2d_bytes,compute_ms,loss,correct,warmup,interval_ms,train_loss,train_accuracy,eval_loss,\
    eval_accuracy,pid,rss_bytes,peak_rss_bytes,cpu_percent,gpu_index,utilization_percent,\
    memory_used_bytes,power_watts,sm_clock_mhz,memory_bytes,sm_percent,rank,profiled,forward_ms,\
    backward_ms,optimizer_ms,forward_passes,backward_passes,samples,skipped,optimizer,\
    optimizer_index";

/// Writes the rows, folding every record as the summary does, so that a step's flags are what the fold made of it.
pub fn write(records: impl Iterator<Item = Record>, out: &mut impl Write) -> io::Result<()> {
    let mut csv = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(out);
    let columns: Vec<&str> = CSV_COLUMNS.split(',').collect();
    csv.write_record(&columns)?;
    let mut state = State::default();
    for record in records {
        state.apply(&record);
        let numeric = matches!(
            record.body,
            Body::Step(_)
                | Body::Epoch(_)
                | Body::OptimizerStep(_)
                | Body::BackwardPass(_)
                | Body::Process { .. }
                | Body::GpuDevice { .. }
                | Body::GpuProcess { .. }
        );
        if !numeric {
            continue;
        }
        // A record's flat JSON form names its fields as the columns do, so every kind maps onto
        // the columns without a hand-written mapping that could drift from the schema.
        let mut fields = serde_json::to_value(&record)?;
        if let Value::Object(map) = &mut fields {
            // Every step's row says all three, so that filtering on them keeps the steps the figures measure.
            if let Some(flags) = step_flags(&state, &record) {
                map.insert("warmup".into(), flags.warmup.into());
                map.insert("profiled".into(), flags.profiled.into());
                map.insert("skipped".into(), flags.skipped.into());
            }
            if let Body::OptimizerStep(step) = &record.body {
                // A GAN's optimisers interleave: each row names its own.
                let class = record
                    .worker
                    .as_deref()
                    .and_then(|name| state.worker(name)?.script.as_ref())
                    .and_then(|script| script.optimizer_class(step.process, step.optimizer));
                map.insert("optimizer".into(), class.into());
                map.insert("optimizer_index".into(), step.optimizer.into());
            }
        }
        // A script's step phases are columns of their own (its wait on data is `data_ms`, as a built-in step's).
        if let Value::Object(map) = &mut fields
            && let Some(Value::Object(phases)) = map.remove("phases")
        {
            for (name, value) in phases {
                map.entry(name).or_insert(value);
            }
        }
        for column in &columns {
            // `gpu_index` is the records' `index`, renamed to say of what; no other column is.
            let key = column.strip_prefix("gpu_").unwrap_or(column);
            csv.write_field(csv_cell(fields.get(key)).as_bytes())?;
        }
        csv.write_record(None::<&[u8]>)?;
    }
    csv.flush()
}

/// What the fold made of a step-like record; for a worker the state keeps no count of (past `MAX_WORKERS`), what the
/// record says of itself.
fn step_flags(state: &State, record: &Record) -> Option<StepFlags> {
    let folded = record
        .worker
        .as_deref()
        .and_then(|name| state.worker(name)?.latest_step);
    match (folded, &record.body) {
        (Some(flags), Body::Step(_) | Body::OptimizerStep(_) | Body::BackwardPass(_)) => {
            Some(flags)
        }
        (_, body) => {
            let warmup = state.session.as_ref().map_or(0, |s| s.warmup);
            StepFlags::as_recorded(body, warmup)
        }
    }
}

fn csv_cell(cell: Option<&Value>) -> Cow<'_, str> {
    match cell {
        None | Some(Value::Null) => Cow::Borrowed(""),
        Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
        Some(other) => Cow::Owned(other.to_string()),
    }
}
