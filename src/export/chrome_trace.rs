//! `chrome-trace`: the Trace Event Format that Perfetto UI and chrome://tracing open.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::{Value, json};

use golow_protocol::event::{
    BackwardPass, Body, Compile, CompileTrigger, ForwardPass, OperatorWindow, OptimizerStep,
    Record, ScriptProcess, Step, StepPhases,
};

use golow_protocol::script::MAX_OPTIMIZERS;

use crate::state::script::MonitorClock;

/// Trace time is laid out in whole ticks of 1/8 µs: a tick count over 8 is exact both as a
/// binary float and in whole nanoseconds, so viewers that add `ts + dur` in floats, or convert
/// each to integer nanoseconds, see child slices end exactly where they were placed.
const TICKS_PER_MS: f64 = 8000.0;
const TICKS_PER_US: f64 = 8.0;

fn ticks(ms: f64) -> i64 {
    (ms * TICKS_PER_MS).round() as i64
}

/// How far after its record's arrival stamp an event may say it ended. The hook reads the clock before it writes, and
/// the monitor stamps a line after reading it, on the same clock, so only rounding separates the two: a stamp further
/// on is not true, and would move the event where it never was.
const ARRIVAL_SLACK_NS: u64 = 1_000_000;

/// Nanoseconds in one tick.
const NS_PER_TICK: u64 = 125;

fn ticks_of_ns(ns: u64) -> i64 {
    i64::try_from(ns.saturating_add(NS_PER_TICK / 2) / NS_PER_TICK).unwrap_or(i64::MAX)
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
/// A script's backward passes while they are its steps (until an optimiser steps): numbered apart from its
/// optimisers' steps, which may follow them.
const BACKWARD_TID: u32 = 999;

/// A trace process: pid 0 is the monitor, pid N the N-th worker to appear; a script's process has its real pid.
struct Track {
    pid: u64,
    /// Where the last slice of each thread ended, so that the next one cannot overlap it.
    ends: HashMap<u32, i64>,
    /// Where its latest profiled step was drawn, until an operator window is drawn on it.
    profiled_step: Option<(i64, i64)>,
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
    /// The session's start on the host's monotonic clock, where its recording says: what places a script's events
    /// by the time each says it ended.
    origin_ns: Option<u64>,
}

pub fn write(
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
        origin_ns: None,
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
            profiled_step: None,
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

    /// Where an event that says it ended at `t_ns` on the host's monotonic clock ends on the trace: there, when the
    /// session's start on that clock is known and the stamp could be true (within the session, not after its record
    /// arrived at `t_ms`); else at its record's arrival, as in recordings made before events said when they ended.
    fn end_of(&self, t_ms: f64, t_ns: Option<u64>) -> i64 {
        let own = self.origin_ns.zip(t_ns).filter(|&(origin, ns)| {
            MonitorClock::at(origin, t_ms / 1e3).holds(ns, ARRIVAL_SLACK_NS)
        });
        match own {
            Some((origin, ns)) => ticks_of_ns(ns - origin),
            None => ticks(t_ms),
        }
    }

    fn record(&mut self, record: Record) -> io::Result<()> {
        let pid = self.pid(record.worker.as_deref())?;
        let ts = ticks(record.t_ms);
        match (&record.body, record.worker.as_deref()) {
            (Body::SessionStart(config), _) => self.origin_ns = config.monotonic_origin_ns,
            (Body::Step(step), _) => self.step(pid, ts, step)?,
            (Body::ScriptProcess(hello), Some(worker)) => {
                self.process_track(worker, hello.process, Some(hello))?;
            }
            (Body::OptimizerStep(step), Some(worker)) => {
                let track = self.process_track(worker, step.process, None)?;
                let end = self.end_of(record.t_ms, step.t_ns);
                self.optimizer_step(track, end, step)?;
            }
            (Body::ForwardPass(pass), Some(worker)) => {
                let track = self.process_track(worker, pass.process, None)?;
                let end = self.end_of(record.t_ms, pass.t_ns);
                self.forward_pass(track, end, pass)?;
            }
            (Body::BackwardPass(pass), Some(worker)) => {
                let track = self.process_track(worker, pass.process, None)?;
                let end = self.end_of(record.t_ms, pass.t_ns);
                self.backward_pass(track, end, pass)?;
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
        if step.profiled {
            self.tracks[pid].profiled_step = Some((start, parent_end));
        }
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

    /// An optimiser step of a script, ending at `end`: the interval since that optimiser's previous step (the first
    /// step: from the model's first forward pass), on the optimiser's thread.
    fn optimizer_step(&mut self, track: usize, end: i64, step: &OptimizerStep) -> io::Result<()> {
        let Some(ms) = step.interval_ms.or(step.first_step_ms) else {
            return Ok(());
        };
        // An optimiser past the hook's cap (which the monitor admits from no process) shares the last one's thread:
        // a recording naming optimiser 999 draws nothing on the threads above the optimisers'.
        let optimizer = step.optimizer.min(MAX_OPTIMIZERS - 1);
        let tid = TID.saturating_add(optimizer);
        if optimizer > 0 {
            self.name_new_thread(track, tid, &format!("optimizer {optimizer} steps"))?;
        }
        let (start, stop) = self.place(track, tid, end, ticks(ms).max(0));
        if step.profiled {
            self.tracks[track].profiled_step = Some((start, stop));
        }
        let name = if step.skipped {
            format!("step {} skipped", step.step)
        } else {
            format!("step {}", step.step)
        };
        self.slice(track, tid, &name, start, stop, serde_json::to_value(step)?)?;
        match &step.phases {
            Some(phases) => self.phases(track, tid, (start, stop), phases),
            None => Ok(()),
        }
    }

    /// A backward pass of a script that has not stepped an optimiser, its step until one does, ending at `end`: the
    /// interval since its previous backward pass, on a thread of its own (an optimiser's steps, numbered from 0
    /// again, may follow it).
    fn backward_pass(&mut self, track: usize, end: i64, pass: &BackwardPass) -> io::Result<()> {
        let Some(ms) = pass.interval_ms else {
            return Ok(());
        };
        self.name_new_thread(
            track,
            BACKWARD_TID,
            "backward passes (steps until an optimizer steps)",
        )?;
        let (start, stop) = self.place(track, BACKWARD_TID, end, ticks(ms).max(0));
        if pass.profiled {
            self.tracks[track].profiled_step = Some((start, stop));
        }
        let name = format!("backward pass {}", pass.pass);
        let args = serde_json::to_value(pass)?;
        self.slice(track, BACKWARD_TID, &name, start, stop, args)?;
        match &pass.phases {
            Some(phases) => self.phases(track, BACKWARD_TID, (start, stop), phases),
            None => Ok(()),
        }
    }

    /// A step's phases inside its slice, one after another in their order and the rest of the step last (a
    /// breakdown, not a timeline: micro-batches interleave them).
    fn phases(
        &mut self,
        track: usize,
        tid: u32,
        (start, stop): (i64, i64),
        phases: &StepPhases,
    ) -> io::Result<()> {
        let timed = [
            ("data", phases.data_ms, None),
            ("forward", phases.forward_ms, Some(phases.forward_passes)),
            ("backward", phases.backward_ms, Some(phases.backward_passes)),
            ("optimizer", phases.optimizer_ms, None),
        ];
        let mut at = start;
        for (name, ms, passes) in timed {
            let next = at.saturating_add(ticks(ms).max(0)).min(stop);
            self.slice(
                track,
                tid,
                name,
                at,
                next,
                json!({"ms": ms, "passes": passes}),
            )?;
            at = next;
        }
        let other_ms = (stop - at) as f64 / TICKS_PER_MS;
        self.slice(track, tid, "other", at, stop, json!({"ms": other_ms}))
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

    /// A window of operators as one profiled step on average: a slice of the step's compute time, and in it each
    /// operator's self time per step, largest first, one after another (a breakdown, not a timeline: the operators
    /// ran interleaved). It is drawn at the end of the profiled step it describes (the last of its steps), where the
    /// step computed, since a window is sent a while after its steps; with no profiled step drawn before it, where it
    /// was stamped (`arrived`).
    fn operators(&mut self, track: usize, arrived: i64, window: &OperatorWindow) -> io::Result<()> {
        let steps = window.steps.max(1) as f64;
        self.name_new_thread(track, OPERATORS_TID, "operators (per profiled step)")?;
        let duration = ticks(window.compute_ms / steps).max(0);
        let (start, stop) = match self.tracks[track].profiled_step.take() {
            Some((step_start, step_end)) => {
                let within = duration.min(step_end - step_start);
                self.place(track, OPERATORS_TID, step_end, within)
            }
            None => self.place(track, OPERATORS_TID, arrived, duration),
        };
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

    /// A forward pass of a script's model before its first optimiser step, ending at `end`.
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
