//! Exports a recording for other tools, streaming it record by record:
//!
//! - `json`: one object, `{"header": …, "records": […]}`, every record exactly as recorded.
//! - `csv`: one row per numeric record (steps, epochs, optimiser steps, process and GPU
//!   readings) in fixed columns, for spreadsheets and dataframes.
//! - `chrome-trace`: the Trace Event Format that Perfetto UI and chrome://tracing open: a
//!   process per worker with its steps as nested slices, counter tracks for its loss and
//!   resource readings, and instants for epochs, exits and protocol errors; whole-GPU readings
//!   go on process 0, the monitor. Each process of a `--cmd` worker that reported is a process
//!   of its own under its real pid (as `torch.profiler`'s traces name it), with a thread per
//!   optimiser for its steps and one for its model's forward passes. Operator windows are a
//!   thread of the process that profiled them: a profiled step's compute, and in it each
//!   operator's self time.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, BufWriter, Write};

use serde_json::{Value, json};

use golow_protocol::event::{
    Body, Compile, CompileTrigger, ForwardPass, OperatorWindow, OptimizerStep, Record,
    ScriptProcess, Step,
};

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
        Format::Json => write_json(header, records, &mut out)?,
        Format::Csv => write_csv(records, &mut out)?,
        Format::ChromeTrace => write_chrome_trace(header, records, &mut out)?,
    }
    out.flush()
}

fn write_json(
    header: &Value,
    records: impl Iterator<Item = Record>,
    out: &mut impl Write,
) -> io::Result<()> {
    out.write_all(b"{\"header\":")?;
    serde_json::to_writer(&mut *out, header)?;
    out.write_all(b",\"records\":[")?;
    for (i, record) in records.enumerate() {
        // A record per line keeps the file usable with line-oriented tools.
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut *out, &record)?;
    }
    out.write_all(b"\n]}\n")
}

/// The columns of every row, whatever kinds of record the recording holds.
const CSV_COLUMNS: &str = "t_ms,worker,type,step,epoch,phase,batch_size,data_ms,h2d_ms,\
    h2d_bytes,compute_ms,loss,correct,warmup,interval_ms,train_loss,train_accuracy,eval_loss,\
    eval_accuracy,pid,rss_bytes,peak_rss_bytes,cpu_percent,gpu_index,utilization_percent,\
    memory_used_bytes,power_watts,sm_clock_mhz,memory_bytes,sm_percent,rank,profiled";

fn write_csv(records: impl Iterator<Item = Record>, out: &mut impl Write) -> io::Result<()> {
    let mut csv = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(out);
    let columns: Vec<&str> = CSV_COLUMNS.split(',').collect();
    csv.write_record(&columns)?;
    for record in records {
        let numeric = matches!(
            record.body,
            Body::Step(_)
                | Body::Epoch(_)
                | Body::OptimizerStep(_)
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
        if matches!(record.body, Body::Step(_) | Body::OptimizerStep(_))
            && let Value::Object(map) = &mut fields
        {
            // The schema leaves `profiled` out when false; a column that filters steps says so in every step's row.
            map.entry("profiled").or_insert(Value::Bool(false));
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

fn csv_cell(cell: Option<&Value>) -> Cow<'_, str> {
    match cell {
        None | Some(Value::Null) => Cow::Borrowed(""),
        Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
        Some(other) => Cow::Owned(other.to_string()),
    }
}

/// Trace time is laid out in whole ticks of 1/8 µs: a tick count over 8 is exact both as a
/// binary float and in whole nanoseconds, so viewers that add `ts + dur` in floats, or convert
/// each to integer nanoseconds, see child slices end exactly where they were placed.
const TICKS_PER_MS: f64 = 8000.0;
const TICKS_PER_US: f64 = 8.0;

fn ticks(ms: f64) -> i64 {
    (ms * TICKS_PER_MS).round() as i64
}

fn micros(ticks: i64) -> f64 {
    ticks as f64 / TICKS_PER_US
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Steps, counters and instants all go on one thread of their process.
const TID: u32 = 1;

/// A script's forward passes go on this thread of its process; its optimisers' steps on `TID + optimiser`.
const FORWARD_TID: u32 = 0;
/// A built-in worker's compilations (torch.compile), beside its steps.
const COMPILE_TID: u32 = 2;
/// A worker's operator windows, on the process that profiled them (a script's beyond its optimisers' threads).
const OPERATORS_TID: u32 = 1000;

/// A trace process: pid 0 is the monitor, pid N the N-th worker to appear; a script's process has its real pid.
struct Track {
    pid: u64,
    /// Where the last slice of each thread ended, so that the next one cannot overlap it.
    ends: HashMap<u32, i64>,
}

struct ChromeTrace<'a, W: Write> {
    out: &'a mut W,
    tracks: Vec<Track>,
    /// Each worker's track, so that finding it costs the same however many workers a recording names.
    by_worker: HashMap<String, usize>,
    /// Each reporting process of a `--cmd` worker's track, and the same tracks by the pid each said hello with.
    by_process: HashMap<(String, u32), usize>,
    by_pid: HashMap<(String, u32), usize>,
    /// Every trace pid given, so that a script's real pid never lands on another track's.
    pids: std::collections::HashSet<u64>,
    events: usize,
}

fn write_chrome_trace(
    header: &Value,
    records: impl Iterator<Item = Record>,
    out: &mut impl Write,
) -> io::Result<()> {
    out.write_all(b"{\"displayTimeUnit\":\"ms\",\"metadata\":{\"golow\":")?;
    serde_json::to_writer(&mut *out, header)?;
    out.write_all(b"},\"traceEvents\":[")?;
    let mut trace = ChromeTrace {
        out,
        tracks: Vec::new(),
        by_worker: HashMap::new(),
        by_process: HashMap::new(),
        by_pid: HashMap::new(),
        pids: std::collections::HashSet::new(),
        events: 0,
    };
    trace.add_track("golow monitor", "session")?;
    for record in records {
        trace.record(record)?;
    }
    trace.out.write_all(b"\n]}\n")
}

impl<W: Write> ChromeTrace<'_, W> {
    fn emit(&mut self, event: Value) -> io::Result<()> {
        let separator: &[u8] = if self.events == 0 { b"\n" } else { b",\n" };
        self.out.write_all(separator)?;
        self.events += 1;
        Ok(serde_json::to_writer(&mut *self.out, &event)?)
    }

    fn add_track(&mut self, name: &str, thread: &str) -> io::Result<usize> {
        self.add_track_as(None, name, &[(TID, thread)])
    }

    /// A new track under `pid` where it is free, else under the next free number; `threads` are named.
    fn add_track_as(
        &mut self,
        pid: Option<u64>,
        name: &str,
        threads: &[(u32, &str)],
    ) -> io::Result<usize> {
        let mut pid = pid
            .filter(|p| !self.pids.contains(p))
            .unwrap_or(self.tracks.len() as u64);
        while self.pids.contains(&pid) {
            pid += 1;
        }
        self.pids.insert(pid);
        let args = json!({"name": name});
        self.emit(
            json!({"ph": "M", "pid": pid, "tid": TID, "name": "process_name", "args": args}),
        )?;
        for &(tid, thread) in threads {
            let args = json!({"name": thread});
            self.emit(
                json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": args}),
            )?;
        }
        self.tracks.push(Track {
            pid,
            ends: HashMap::new(),
        });
        Ok(self.tracks.len() - 1)
    }

    /// The track of a `--cmd` worker's process: made when it says hello (under its real pid), or at its first
    /// event when a recording lacks the hello.
    fn process_track(
        &mut self,
        worker: &str,
        process: u32,
        hello: Option<&ScriptProcess>,
    ) -> io::Result<usize> {
        let key = (worker.to_owned(), process);
        if let Some(&track) = self.by_process.get(&key) {
            return Ok(track);
        }
        let name = match hello.and_then(|h| h.rank) {
            Some(rank) => format!("{worker} rank {rank}"),
            None => format!("{worker} process {process}"),
        };
        let threads = [(FORWARD_TID, "forward passes"), (TID, "optimizer 0 steps")];
        let track = self.add_track_as(hello.map(|h| u64::from(h.pid)), &name, &threads)?;
        self.by_process.insert(key, track);
        if let Some(h) = hello {
            self.by_pid.insert((worker.to_owned(), h.pid), track);
        }
        Ok(track)
    }

    fn pid(&mut self, worker: Option<&str>) -> io::Result<usize> {
        let Some(name) = worker else { return Ok(0) };
        // Not the monitor's track: a worker may be named like it.
        if let Some(&pid) = self.by_worker.get(name) {
            return Ok(pid);
        }
        let pid = self.add_track(name, "steps")?;
        self.by_worker.insert(name.to_owned(), pid);
        Ok(pid)
    }

    fn record(&mut self, record: Record) -> io::Result<()> {
        let pid = self.pid(record.worker.as_deref())?;
        let ts = ticks(record.t_ms);
        match (&record.body, record.worker.as_deref()) {
            (Body::Step(step), _) => self.step(pid, ts, step)?,
            (Body::ScriptProcess(hello), Some(worker)) => {
                self.process_track(worker, hello.process, Some(hello))?;
            }
            (Body::OptimizerStep(step), Some(worker)) => {
                let track = self.process_track(worker, step.process, None)?;
                self.optimizer_step(track, ts, step)?;
            }
            (Body::ForwardPass(pass), Some(worker)) => {
                let track = self.process_track(worker, pass.process, None)?;
                self.forward_pass(track, ts, pass)?;
            }
            (Body::Operators(window), Some(worker)) => {
                // A script's window goes on the process that profiled it; a built-in worker has no such process.
                let track = match self.by_process.get(&(worker.to_owned(), window.process)) {
                    Some(&track) => track,
                    None => pid,
                };
                self.operators(track, ts, window)?;
            }
            // A package made before the session has no place on its timeline: it is marked (instant_name).
            (Body::Compile(compile), Some(_)) if compile.trigger != CompileTrigger::Package => {
                self.compilation(pid, ts, compile)?;
            }
            _ => {}
        }
        if let Some(name) = instant_name(&record.body) {
            let pid = self.tracks[pid].pid;
            return self.emit(json!({
                "ph": "i", "s": "p", "pid": pid, "tid": TID, "name": name, "ts": micros(ts),
                "args": serde_json::to_value(&record.body)?,
            }));
        }
        // A rank's readings go on its own process's track; the worker's, which cover its whole tree, on the worker's.
        let reading_track = match (&record.body, record.worker.as_deref()) {
            (
                Body::Process {
                    pid: process,
                    rank: Some(_),
                    ..
                }
                | Body::GpuProcess {
                    pid: process,
                    rank: Some(_),
                    ..
                },
                Some(worker),
            ) => match self.by_pid.get(&(worker.to_owned(), *process)) {
                Some(&track) => track,
                None => return Ok(()),
            },
            _ => pid,
        };
        for (track, name, value) in counters(reading_track, &record.body) {
            let pid = self.tracks[track].pid;
            // A non-finite value would serialise as null, which viewers reject in a counter.
            if let Some(value) = value.filter(|v| v.is_finite()) {
                self.emit(json!({
                    "ph": "C", "pid": pid, "tid": TID, "name": name, "ts": micros(ts),
                    "args": {"value": value},
                }))?;
            }
        }
        Ok(())
    }

    /// A step is stamped when the monitor receives it, just after it ended, so its slice ends
    /// there; unless that would overlap the previous step (the latency of stamps varies), when
    /// it starts where the previous one ended instead. Its regions follow one another from its
    /// start.
    fn step(&mut self, pid: usize, end: i64, step: &Step) -> io::Result<()> {
        let h2d = step.h2d_ms.map(|ms| ("h2d", ms));
        let regions = [
            Some(("data", step.data_ms)),
            h2d,
            Some(("compute", step.compute_ms)),
        ];
        let regions = regions.map(|r| r.map(|(name, ms)| (name, ticks(ms).max(0))));
        let total = regions
            .iter()
            .flatten()
            .fold(0, |sum, r| i64::saturating_add(sum, r.1));
        let (start, parent_end) = self.place(pid, TID, end, total);
        let warm_up = if step.warmup { " (warm-up)" } else { "" };
        let name = format!("step {}{warm_up}", step.step);
        self.slice(
            pid,
            TID,
            &name,
            start,
            parent_end,
            serde_json::to_value(step)?,
        )?;
        let mut at = start;
        for (name, duration) in regions.into_iter().flatten() {
            let child_end = at.saturating_add(duration).min(parent_end);
            self.slice(pid, TID, name, at, child_end, json!({}))?;
            at = child_end;
        }
        Ok(())
    }

    /// Where a slice of `duration` stamped at `end` goes on a thread: ending at its stamp, unless that would overlap
    /// the thread's previous slice, when it starts where that one ended.
    fn place(&mut self, track: usize, tid: u32, end: i64, duration: i64) -> (i64, i64) {
        let last = self.tracks[track].ends.entry(tid).or_insert(0);
        let start = end.saturating_sub(duration).max(*last);
        *last = start.saturating_add(duration);
        (start, *last)
    }

    /// An optimiser step of a script: the interval since that optimiser's previous step (the first step: from the
    /// model's first forward pass), on the optimiser's thread.
    fn optimizer_step(&mut self, track: usize, end: i64, step: &OptimizerStep) -> io::Result<()> {
        let Some(ms) = step.interval_ms.or(step.first_step_ms) else {
            return Ok(());
        };
        let tid = TID.saturating_add(step.optimizer);
        if step.optimizer > 0 {
            self.name_new_thread(track, tid, &format!("optimizer {} steps", step.optimizer))?;
        }
        let (start, stop) = self.place(track, tid, end, ticks(ms).max(0));
        let name = format!("step {}", step.step);
        self.slice(track, tid, &name, start, stop, serde_json::to_value(step)?)
    }

    /// Names a thread of `track` that has no slice yet (the first slice placed on it gives it an end).
    fn name_new_thread(&mut self, track: usize, tid: u32, name: &str) -> io::Result<()> {
        if self.tracks[track].ends.contains_key(&tid) {
            return Ok(());
        }
        let pid = self.tracks[track].pid;
        let args = json!({"name": name});
        self.emit(json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": args}))
    }

    /// A compilation, stamped as it ended, on a thread of its own beside the worker's steps (the first step's slice
    /// holds it).
    fn compilation(&mut self, track: usize, end: i64, compile: &Compile) -> io::Result<()> {
        self.name_new_thread(track, COMPILE_TID, "compilation")?;
        let (start, stop) = self.place(track, COMPILE_TID, end, ticks(compile.ms).max(0));
        let again = if compile.recompile {
            "recompile"
        } else {
            "compile"
        };
        let name = format!("{again} ({})", compile.trigger.name());
        self.slice(
            track,
            COMPILE_TID,
            &name,
            start,
            stop,
            serde_json::to_value(compile)?,
        )
    }

    /// A window of operators, stamped as it was sent, as one profiled step on average: a slice of the step's compute
    /// time, and in it each operator's self time per step, largest first, one after another (a breakdown, not a
    /// timeline: the operators ran interleaved).
    fn operators(&mut self, track: usize, end: i64, window: &OperatorWindow) -> io::Result<()> {
        let steps = window.steps.max(1) as f64;
        self.name_new_thread(track, OPERATORS_TID, "operators (per profiled step)")?;
        let duration = ticks(window.compute_ms / steps).max(0);
        let (start, stop) = self.place(track, OPERATORS_TID, end, duration);
        let name = format!(
            "operators: {} profiled step{}",
            window.steps,
            if window.steps == 1 { "" } else { "s" }
        );
        let args = json!({
            "steps": window.steps, "every": window.every, "compute_ms": window.compute_ms,
            "dropped": window.dropped,
        });
        self.slice(track, OPERATORS_TID, &name, start, stop, args)?;
        let mut at = start;
        for op in &window.operators {
            let self_ms = op.self_ns as f64 / 1e6 / steps;
            let next = at.saturating_add(ticks(self_ms).max(0)).min(stop);
            let args = json!({
                "self_ms_per_step": self_ms,
                "total_ms_per_step": op.total_ns as f64 / 1e6 / steps,
                "calls_per_step": op.calls as f64 / steps,
                "shapes": op.shapes,
            });
            self.slice(track, OPERATORS_TID, &op.name, at, next, args)?;
            at = next;
        }
        Ok(())
    }

    fn forward_pass(&mut self, track: usize, end: i64, pass: &ForwardPass) -> io::Result<()> {
        let (start, stop) = self.place(track, FORWARD_TID, end, ticks(pass.ms).max(0));
        let name = format!("forward {}", pass.pass);
        self.slice(
            track,
            FORWARD_TID,
            &name,
            start,
            stop,
            serde_json::to_value(pass)?,
        )
    }

    fn slice(
        &mut self,
        track: usize,
        tid: u32,
        name: &str,
        from: i64,
        to: i64,
        args: Value,
    ) -> io::Result<()> {
        let pid = self.tracks[track].pid;
        self.emit(json!({
            "ph": "X", "pid": pid, "tid": tid, "name": name,
            "ts": micros(from), "dur": micros(to - from), "args": args,
        }))
    }
}

/// Epoch ends, exits and protocol errors mark the timeline; stderr lines would swamp it.
fn instant_name(body: &Body) -> Option<String> {
    match body {
        Body::Epoch(e) if e.complete => Some(format!("epoch {} end", e.epoch)),
        Body::Epoch(e) => Some(format!("epoch {} end (incomplete)", e.epoch)),
        Body::Exit(_) => Some("exit".into()),
        Body::WorkerExited { .. } => Some("worker exited".into()),
        Body::Compile(c) if c.trigger == CompileTrigger::Package => Some(format!(
            "compiled ahead of time, before the session ({:.1} s)",
            c.ms / 1e3
        )),
        Body::ProtocolError { .. } => Some("protocol error".into()),
        _ => None,
    }
}

/// A record's counter readings, with the process each is drawn on. GPU counters are named with
/// the device's index, since a worker's processes may use several devices.
fn counters(pid: usize, body: &Body) -> Vec<(usize, String, Option<f64>)> {
    let gpu = |index: u32, name: &str| format!("GPU {index} {name}");
    match *body {
        Body::Step(ref step) => vec![(pid, "loss".into(), Some(step.loss))],
        Body::Scalar(ref scalar) => vec![(pid, scalar.name.clone(), Some(scalar.value))],
        Body::Process {
            rss_bytes,
            cpu_percent,
            ..
        } => vec![
            (pid, "cpu %".into(), cpu_percent),
            (pid, "host RSS MiB".into(), Some(mib(rss_bytes))),
        ],
        Body::GpuProcess {
            index,
            memory_bytes,
            sm_percent,
            ..
        } => vec![
            (pid, gpu(index, "memory MiB"), memory_bytes.map(mib)),
            (pid, gpu(index, "SM %"), sm_percent.map(f64::from)),
        ],
        Body::GpuDevice {
            index,
            utilization_percent,
            memory_used_bytes,
            power_watts,
            ..
        } => vec![
            (0, gpu(index, "util %"), utilization_percent.map(f64::from)),
            (0, gpu(index, "memory MiB"), memory_used_bytes.map(mib)),
            (0, gpu(index, "power W"), power_watts),
        ],
        Body::MachineLoad {
            load_1m,
            busy_percent,
            steal_percent,
            others_percent,
            ..
        } => vec![
            (0, "machine load 1m".into(), Some(load_1m)),
            (0, "machine busy %".into(), Some(busy_percent)),
            (0, "machine others %".into(), Some(others_percent)),
            (0, "machine steal %".into(), Some(steal_percent)),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use golow_protocol::config::{
        GpuPolicy, Mode, Model, Optimiser, Schedule, SessionConfig, WorkerConfig,
    };
    use golow_protocol::event::{Epoch, ExitStatus, Hello, Stream, WorkerExit};

    const ODD: &str = "my \"fast\", run";

    fn header() -> Value {
        json!({"format": "golow-recording", "version": 1})
    }

    fn session_start() -> Body {
        Body::SessionStart(SessionConfig {
            workers: vec!["libtorch".into(), ODD.into()],
            commands: [(ODD.to_string(), "python train.py".to_string())].into(),
            model: Model::Resnet50,
            dataset: "synthetic".into(),
            mode: Mode::Train,
            batch_size: 16,
            resolution: 32,
            steps: 4,
            warmup: 1,
            device: "cuda:0".into(),
            threads: 2,
            schedule: Schedule::Alternate,
            seed: 7,
            pinned: false,
            optimiser: Optimiser::default(),
            gpu_policy: Some(GpuPolicy::default()),
            compile_mode: Default::default(),
            command_env: Default::default(),
            stall_after_s: golow_protocol::config::DEFAULT_STALL_AFTER_S,
            monotonic_origin_ns: None,
            ops_every: 10,
        })
    }

    fn hello(name: &str) -> Body {
        Body::Hello(Hello {
            implementation: name.into(),
            pid: 40,
            versions: [("torch".to_string(), "2.11.0".to_string())].into(),
            device: "cuda:0".into(),
            config: WorkerConfig {
                model: Model::Resnet50,
                mode: Mode::Train,
                dataset: "synthetic".into(),
                data_dir: "/tmp/data".into(),
                weights: "/tmp/weights.safetensors".into(),
                torchscript: None,
                aoti: None,
                channels: 3,
                classes: 10,
                batch_size: 16,
                resolution: 32,
                steps: 4,
                warmup: 1,
                device: "cuda:0".into(),
                threads: 2,
                seed: 7,
                pinned: false,
                optimiser: Optimiser::default(),
                gpu_policy: GpuPolicy::default(),
                compile_mode: Default::default(),
                ops_every: 10,
                ops_library: None,
            },
        })
    }

    fn step(n: u64, h2d_ms: Option<f64>) -> Body {
        Body::Step(Step {
            step: n,
            epoch: 0,
            phase: golow_protocol::config::Mode::Train,
            batch_size: 16,
            data_ms: 0.1,
            h2d_ms,
            h2d_bytes: h2d_ms.map(|_| 196_736),
            compute_ms: 12.3,
            loss: 2.25,
            correct: 4,
            warmup: n == 0,
            profiled: false,
        })
    }

    /// Two workers, "libtorch" copying to the GPU and `ODD` not, four steps each (the first a
    /// warm-up). Times are whole tenths of a millisecond: not binary fractions, yet decimals short
    /// enough that JSON parsing gives them back exactly.
    fn session() -> Vec<Record> {
        let mut records = vec![Record::new(0.0, None, session_start())];
        let process = Body::Process {
            pid: 40,
            rss_bytes: 3 << 29,
            peak_rss_bytes: 1 << 31,
            cpu_percent: Some(99.5),
            rank: None,
        };
        let gpu_process = Body::GpuProcess {
            pid: 40,
            index: 0,
            memory_bytes: Some(1 << 30),
            sm_percent: Some(80),
            last_seen_us: None,
            rank: None,
        };
        let epoch = Body::Epoch(Epoch {
            epoch: 0,
            complete: true,
            train_loss: Some(2.0),
            train_accuracy: Some(0.25),
            eval_loss: None,
            eval_accuracy: None,
        });
        let exited = Body::WorkerExited {
            exit_code: Some(0),
            signal: None,
            stop_requested: false,
        };
        let (stream, status) = (Stream::Stderr, ExitStatus::Ok);
        for (w, name) in ["libtorch", ODD].into_iter().enumerate() {
            let mut push = |tenths: i64, body| {
                records.push(Record::new(tenths as f64 / 10.0, Some(name.into()), body));
            };
            let command = vec!["golow-worker".into()];
            push(10, Body::WorkerStarted { pid: 40, command });
            push(20, hello(name));
            for n in 0..4 {
                // Step 3 is stamped early, as if step 2's stamp was late: the slices would overlap.
                let t = 10_007 + 133 * n - if n == 3 { 90 } else { 0 } + 10 * w as i64;
                push(t, step(n as u64, (w == 0).then_some(0.2)));
                push(t + 5, process.clone());
                push(t + 6, gpu_process.clone());
            }
            let line = "Traceback".into();
            push(10_600, Body::Output { stream, line });
            push(10_610, epoch.clone());
            push(
                10_620,
                Body::Exit(WorkerExit {
                    status,
                    message: None,
                }),
            );
            push(10_630, exited.clone());
        }
        let device = Body::GpuDevice {
            index: 0,
            utilization_percent: Some(97),
            memory_used_bytes: Some(2 << 30),
            power_watts: Some(250.5),
            sm_clock_mhz: None,
        };
        records.push(Record::new(1100.0, None, device));
        let message = "bad line".into();
        let error = Body::ProtocolError { message };
        records.push(Record::new(1101.0, Some("libtorch".into()), error));
        records.push(Record::new(1200.0, None, Body::SessionEnd));
        records.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
        records
    }

    fn chrome_trace(records: Vec<Record>) -> Value {
        let mut out = Vec::new();
        export(
            &header(),
            records.into_iter(),
            Format::ChromeTrace,
            &mut out,
        )
        .unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    fn exported(format: Format) -> String {
        let mut out = Vec::new();
        export(&header(), session().into_iter(), format, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// RFC 4180: quoted fields may hold commas, doubled quotes and line breaks; rows end in CRLF.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let (mut rows, mut row, mut field, mut quoted) = (vec![], vec![], String::new(), false);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => field.push(chars.next().unwrap()),
                (true, '"') => quoted = false,
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\r') => {
                    assert_eq!(chars.next(), Some('\n'), "a bare CR");
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, '\n') => panic!("a row ended by LF alone"),
                (_, c) => field.push(c),
            }
        }
        assert!(
            !quoted && row.is_empty() && field.is_empty(),
            "an unterminated row"
        );
        rows
    }

    #[test]
    fn json_holds_the_header_and_every_record() {
        let value: Value = serde_json::from_str(&exported(Format::Json)).unwrap();
        assert_eq!(value["header"], header());
        let records: Vec<Record> = serde_json::from_value(value["records"].clone()).unwrap();
        assert_eq!(records, session());
    }

    #[test]
    fn csv_has_fixed_columns_and_quotes_worker_names() {
        let text = exported(Format::Csv);
        assert!(text.contains(",\"my \"\"fast\"\", run\","), "{text}");
        let rows = parse_csv(&text);
        assert_eq!(rows[0].len(), 32);
        assert_eq!(
            (rows[0][0].as_str(), rows[0][31].as_str()),
            ("t_ms", "profiled")
        );
        assert!(rows.iter().all(|row| row.len() == 32));
        // Per worker: 4 steps, 4 process and 4 GPU process readings, an epoch. Then a device.
        assert_eq!(rows.len(), 1 + 2 * 13 + 1);
        let odd: Vec<_> = rows.iter().filter(|row| row[1] == ODD).collect();
        assert_eq!(odd.len(), 13);
        let cell = |row: &Vec<String>, column: &str| {
            row[rows[0].iter().position(|c| c == column).unwrap()].clone()
        };
        let step = odd.iter().find(|row| row[2] == "step").unwrap();
        assert_eq!(
            (cell(step, "data_ms"), cell(step, "h2d_ms")),
            ("0.1".into(), "".into())
        );
        let device = rows.iter().find(|row| row[2] == "gpu_device").unwrap();
        assert_eq!(
            (cell(device, "worker"), cell(device, "gpu_index")),
            ("".into(), "0".into())
        );
    }

    #[test]
    fn chrome_trace_nests_regions_in_steps_and_names_workers() {
        let trace: Value = serde_json::from_str(&exported(Format::ChromeTrace)).unwrap();
        assert_eq!(trace["metadata"]["golow"], header());
        let mut steps: HashMap<_, Vec<(f64, f64)>> = HashMap::new();
        let (mut regions, mut instants, mut processes) = (0, 0, vec![]);
        let mut counters = BTreeSet::new();
        for event in trace["traceEvents"].as_array().unwrap() {
            let ph = event["ph"].as_str().unwrap();
            let name = event["name"].as_str().unwrap();
            let thread = (
                event["pid"].as_u64().unwrap(),
                event["tid"].as_u64().unwrap(),
            );
            assert!(ph == "M" || event["ts"].is_number(), "{event}");
            let ts = event["ts"].as_f64().unwrap_or(0.0);
            let dur = event["dur"].as_f64().unwrap_or(0.0);
            assert!(dur >= 0.0, "{event}");
            match ph {
                "X" if name.starts_with("step ") => {
                    let earlier = steps.entry(thread).or_default();
                    assert!(earlier.last().is_none_or(|p| ts >= p.1), "overlap: {event}");
                    earlier.push((ts, ts + dur));
                }
                "X" => {
                    let parent = steps[&thread].last().unwrap();
                    assert!(parent.0 <= ts && ts + dur <= parent.1, "{event}");
                    regions += 1;
                }
                "C" => {
                    assert!(
                        event["args"]
                            .as_object()
                            .unwrap()
                            .values()
                            .all(Value::is_number)
                    );
                    counters.insert((thread.0, name.to_string()));
                }
                "i" => instants += 1,
                "M" if name == "process_name" => processes.push(event["args"]["name"].clone()),
                "M" => assert_eq!(name, "thread_name"),
                _ => panic!("unexpected {event}"),
            }
        }
        assert_eq!(
            processes,
            [json!("golow monitor"), json!("libtorch"), json!(ODD)]
        );
        // Step 1 of "libtorch" ends at its stamp; step 3, stamped early, right after step 2.
        let libtorch = &steps[&(1, 1)];
        assert_eq!(
            (libtorch[1].1, libtorch[3].0),
            (1014.0 * 1000.0, libtorch[2].1)
        );
        assert_eq!((libtorch.len(), steps[&(2, 1)].len()), (4, 4));
        assert_eq!(regions, 4 * 3 + 4 * 2);
        assert_eq!(instants, 2 * 3 + 1);
        let names = [
            "loss",
            "cpu %",
            "host RSS MiB",
            "GPU 0 memory MiB",
            "GPU 0 SM %",
        ];
        let device = ["GPU 0 util %", "GPU 0 memory MiB", "GPU 0 power W"];
        let workers = [1, 2]
            .into_iter()
            .flat_map(|pid| names.map(|n| (pid, n.to_string())));
        let expected: BTreeSet<_> = workers.chain(device.map(|n| (0, n.to_string()))).collect();
        assert_eq!(counters, expected);
        let text = trace.to_string();
        assert!(text.contains("step 0 (warm-up)") && !text.contains("Traceback"));
    }

    #[test]
    fn each_of_many_workers_keeps_its_own_track() {
        let workers = 2_000;
        let record = |i: usize| {
            Record::new(
                i as f64,
                Some(format!("w{}", i % workers)),
                Body::Process {
                    pid: 1,
                    rss_bytes: 1 << 20,
                    peak_rss_bytes: 1 << 20,
                    cpu_percent: Some(1.0),
                    rank: None,
                },
            )
        };
        let mut out = Vec::new();
        export(
            &header(),
            (0..3 * workers).map(record),
            Format::ChromeTrace,
            &mut out,
        )
        .unwrap();
        let trace: Value = serde_json::from_slice(&out).unwrap();
        let mut tracks = std::collections::HashMap::new();
        for event in trace["traceEvents"].as_array().unwrap() {
            if event["name"] == "process_name" {
                let name = event["args"]["name"].as_str().unwrap().to_owned();
                assert!(
                    tracks.insert(name, event["pid"].clone()).is_none(),
                    "{event}"
                );
            } else if event["ph"] == "C" && event["name"] == "cpu %" {
                let ts = event["ts"].as_f64().unwrap() / 1000.0;
                let worker = format!("w{}", ts as usize % workers);
                assert_eq!(tracks[&worker], event["pid"], "{event}");
            }
        }
        assert_eq!(tracks.len(), workers + 1);
    }

    /// Every slice of the trace, as (name, start, end) in µs, each checked to lie on the thread named `thread`.
    fn slices_on_thread<'t>(trace: &'t Value, thread: &str) -> Vec<(&'t str, f64, f64)> {
        let events = trace["traceEvents"].as_array().unwrap();
        let named = events
            .iter()
            .find(|e| e["name"] == "thread_name" && e["args"]["name"] == thread)
            .unwrap_or_else(|| panic!("no thread named {thread}"));
        events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                assert_eq!((&e["pid"], &e["tid"]), (&named["pid"], &named["tid"]));
                let ts = e["ts"].as_f64().unwrap();
                (
                    e["name"].as_str().unwrap(),
                    ts,
                    ts + e["dur"].as_f64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn compilations_are_slices_on_a_thread_of_their_own() {
        let compile = |t_ms: f64, recompile: bool, ms: f64| {
            let body = Body::Compile(Compile {
                step: Some(0),
                phase: golow_protocol::config::Mode::Train,
                trigger: golow_protocol::event::CompileTrigger::LazyBackward,
                recompile,
                ms,
                cache_hits: 0,
                cache_misses: 1,
            });
            Record::new(t_ms, Some("compile".into()), body)
        };
        let records = vec![
            Record::new(0.0, None, session_start()),
            compile(3_000.0, false, 2_500.0),
            compile(9_000.0, true, 500.0),
        ];
        let trace = chrome_trace(records);
        assert_eq!(
            slices_on_thread(&trace, "compilation"),
            [
                ("compile (lazy backward)", 500_000.0, 3_000_000.0),
                ("recompile (lazy backward)", 8_500_000.0, 9_000_000.0)
            ]
        );
    }

    #[test]
    fn operator_windows_break_a_profiled_step_down_on_a_thread_of_their_own() {
        let op = |name: &str, self_ms: u64| golow_protocol::event::OperatorStats {
            name: name.into(),
            calls: 106,
            self_ns: self_ms * 1_000_000,
            total_ns: self_ms * 1_500_000,
            shapes: "[16, 3, 32, 32]".into(),
        };
        let window = OperatorWindow {
            process: 0,
            steps: 2,
            compute_ms: 100.0,
            every: 10,
            operators: vec![op("aten::convolution_backward", 60), op("aten::add_", 30)],
            dropped: 0,
        };
        let records = vec![
            Record::new(0.0, None, session_start()),
            Record::new(5_000.0, Some("libtorch".into()), Body::Operators(window)),
        ];
        let trace = chrome_trace(records);
        // Per step: 50 ms of compute ending at the stamp, 30 ms and 15 ms of operators in it.
        assert_eq!(
            slices_on_thread(&trace, "operators (per profiled step)"),
            [
                ("operators: 2 profiled steps", 4_950_000.0, 5_000_000.0),
                ("aten::convolution_backward", 4_950_000.0, 4_980_000.0),
                ("aten::add_", 4_980_000.0, 4_995_000.0),
            ]
        );
        let conv = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "aten::convolution_backward")
            .unwrap();
        assert_eq!(conv["args"]["calls_per_step"], 53.0);
        assert_eq!(conv["args"]["total_ms_per_step"], 45.0);
    }

    #[test]
    fn a_package_made_before_the_session_is_marked_not_drawn_over_its_steps() {
        let packaging = Body::Compile(Compile {
            step: None,
            phase: golow_protocol::config::Mode::Eval,
            trigger: CompileTrigger::Package,
            recompile: false,
            ms: 27_250.0,
            cache_hits: 0,
            cache_misses: 0,
        });
        let records = vec![
            Record::new(0.0, None, session_start()),
            Record::new(400.0, Some("aoti".into()), packaging),
        ];
        let trace = chrome_trace(records);
        let events = trace["traceEvents"].as_array().unwrap();
        assert!(!events.iter().any(|e| e["ph"] == "X"), "{events:?}");
        let mark = events
            .iter()
            .find(|e| e["ph"] == "i" && e["args"]["type"] == "compile")
            .expect("a packaging mark");
        assert_eq!(
            mark["name"],
            "compiled ahead of time, before the session (27.2 s)"
        );
        assert_eq!(mark["ts"].as_f64(), Some(400_000.0));
    }

    #[test]
    fn a_scripts_processes_have_their_real_pids_and_step_slices() {
        use golow_protocol::event::{ForwardPass, OptimizerStep};
        let hello = |process, pid, rank| golow_protocol::samples::rank_hello(process, pid, rank, 2);
        let step = |process, optimizer, step: u64, interval_ms, first_step_ms| {
            Body::OptimizerStep(OptimizerStep {
                process,
                optimizer,
                step,
                interval_ms,
                first_step_ms,
                arrived_ns: None,
                profiled: false,
            })
        };
        let pass = Body::ForwardPass(ForwardPass {
            process: 0,
            pass: 0,
            ms: 40.0,
            interval_ms: None,
            grad: true,
        });
        let at = |t_ms: f64, body| Record::new(t_ms, Some("ddp".into()), body);
        let mut records = vec![
            Record::new(0.0, None, session_start()),
            at(1.0, hello(0, 4242, 0)),
            at(2.0, hello(1, 4243, 1)),
            at(100.0, pass),
            at(150.0, step(0, 0, 0, None, Some(90.0))),
            at(151.0, step(1, 0, 0, None, None)),
        ];
        for i in 1..5u64 {
            let t = 150.0 + 20.0 * i as f64;
            records.push(at(t, step(0, 0, i, Some(20.0), None)));
            records.push(at(t + 2.0, step(0, 1, i - 1, Some(20.0), None)));
            records.push(at(t + 1.0, step(1, 0, i, Some(20.0), None)));
        }
        let rss = |pid, rank| Body::Process {
            pid,
            rss_bytes: 512 << 20,
            peak_rss_bytes: 512 << 20,
            cpu_percent: Some(97.0),
            rank: Some(rank),
        };
        records.push(at(300.0, rss(4243, 1)));
        // A rank reading for a process that never said hello has no track to go on.
        records.push(at(301.0, rss(9999, 1)));
        let trace = chrome_trace(records);
        let counters: Vec<(u64, String)> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "C")
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            counters,
            [
                (4243, "cpu %".to_string()),
                (4243, "host RSS MiB".to_string())
            ],
            "a rank's readings on its own process"
        );
        let mut names = HashMap::new();
        type Slices = Vec<(f64, f64, String)>;
        let mut slices: HashMap<(u64, u64), Slices> = HashMap::new();
        for event in trace["traceEvents"].as_array().unwrap() {
            let (pid, tid) = (
                event["pid"].as_u64().unwrap(),
                event["tid"].as_u64().unwrap(),
            );
            match event["ph"].as_str().unwrap() {
                "M" if event["name"] == "process_name" => {
                    names.insert(pid, event["args"]["name"].as_str().unwrap().to_string());
                }
                "X" => {
                    let ts = event["ts"].as_f64().unwrap();
                    let end = ts + event["dur"].as_f64().unwrap();
                    let name = event["name"].as_str().unwrap().to_string();
                    slices.entry((pid, tid)).or_default().push((ts, end, name));
                }
                _ => {}
            }
        }
        assert_eq!(names[&4242], "ddp rank 0");
        assert_eq!(names[&4243], "ddp rank 1");
        let steps = &slices[&(4242, 1)];
        assert_eq!(steps.len(), 5, "rank 1's steps are its own");
        assert_eq!(steps[0], (60_000.0, 150_000.0, "step 0".to_string()));
        assert!(steps.windows(2).all(|w| w[0].1 <= w[1].0), "{steps:?}");
        assert_eq!(
            slices[&(4242, 2)].len(),
            4,
            "the second optimiser has a thread of its own"
        );
        assert_eq!(
            slices[&(4243, 1)].len(),
            4,
            "rank 1's first step has no duration"
        );
        assert_eq!(
            slices[&(4242, 0)],
            [(60_000.0, 100_000.0, "forward 0".to_string())]
        );
    }
}
