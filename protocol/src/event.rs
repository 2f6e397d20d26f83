//! The event schema: the one contract between workers, samplers, the session hub, the recorder and the UI.
//!
//! Workers write [`WorkerEvent`]s, one JSON object per line, on a dedicated file descriptor (never their
//! stdout). The hub wraps every event, from a worker or from the monitor itself, in a [`Record`] that carries
//! the schema version, a monotonic timestamp and the worker it concerns.

use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::{Deserialize, Serialize};

pub use crate::collector::{
    Breakdown, CollectorStatus, CopyKind, CopyRuns, CopyStats, KernelStats, KernelWindow,
    MemoryKind, Run, Timeline,
};
pub use crate::script::{
    BackwardPass, ForwardPass, LoaderSetup, Optimizer, OptimizerStep, Phase, ProfilingOff, Scalar,
    ScriptProcess, StepPhases,
};

use crate::config::{Mode, WorkerConfig};

/// A worker's name, an operator's name or its shapes: held inline up to 24 bytes (most are shorter), so that the
/// records a replay reads by the hundred thousand, and the hub stamps with their worker's name, carry their names
/// without an allocation each.
pub type Name = compact_str::CompactString;

/// Bumped on any change a reader of older files could misread.
pub const SCHEMA_VERSION: u32 = 1;

/// A line on a worker's event channel is cut off beyond this many bytes and reported as a protocol error.
pub const MAX_WORKER_LINE_BYTES: usize = 1 << 20;

/// First event of every worker: who it is and what it is about to run.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Hello {
    #[serde(rename = "impl")]
    pub implementation: String,
    pub pid: u32,
    /// Library name → version, e.g. `torch` → `2.11.0+cu130`, `python` → `3.11.7`.
    pub versions: std::collections::BTreeMap<String, String>,
    /// The device the worker computes on, as torch names it (`cpu`, `cuda:0`).
    pub device: String,
    pub config: WorkerConfig,
}

/// One optimiser step (train) or one forward pass (eval), with its timed regions.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Step {
    /// Counts from 0 over the whole run, warm-up included.
    pub step: u64,
    pub epoch: u64,
    /// Whether the step trained the model or only evaluated it (a training run's eval passes are `eval`).
    pub phase: Mode,
    pub batch_size: u32,
    /// Host time to assemble the batch from the data cache (not part of the compared regions).
    pub data_ms: f64,
    /// Host→device copy of inputs and targets; `null` when the worker computes on the CPU.
    pub h2d_ms: Option<f64>,
    pub h2d_bytes: Option<u64>,
    /// forward + loss + backward + optimiser step (train), or forward + loss (eval).
    pub compute_ms: f64,
    /// NaN or infinite in a diverging run: written as "nan", "inf" or "-inf" ([`crate::nonfinite`]).
    #[serde(with = "crate::nonfinite::number")]
    #[schemars(schema_with = "crate::nonfinite::schema")]
    pub loss: f64,
    /// How many samples of the batch were classified correctly.
    pub correct: u32,
    /// Warm-up steps are reported but excluded from statistics.
    pub warmup: bool,
    /// Its operators were recorded (one step in `--ops-every`): its compute time carries what looking cost.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profiled: bool,
    /// When the step began (before its batch was assembled) and ended (its loss and accuracy read), on the host's
    /// CLOCK_MONOTONIC: the clock the collector places its windows on, so that the GPU's records can be set on the
    /// step that launched them. Absent from workers before golow sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
}

/// Operators named per `operators` window at most; the rest are summed as [`OTHER_OPERATORS`].
pub const MAX_OPERATORS: usize = 64;

/// Input shapes an operator recorder tells apart per operator name (`kMaxShapes` in `worker/csrc/operators.cpp`,
/// `MAX_SHAPES` in `golow_operators.py`): calls in any other shape are counted in a window's `dropped`.
pub const MAX_SHAPES_PER_OPERATOR: usize = 8;

/// The name under which operators beyond a window's cap, or beyond what a recorder tells apart, are summed.
pub const OTHER_OPERATORS: &str = "(other operators)";

/// What a worker's operators cost over a window (default 1 s) of the steps it profiled: libtorch's operator
/// callbacks (RecordFunction) for the Rust levels, torch.profiler for the Python ones and `--cmd` scripts.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct OperatorWindow {
    /// The `--cmd` worker's process that profiled them (stamped by the monitor; 0 for a built-in worker).
    #[serde(default)]
    pub process: u32,
    /// Steps of the window whose operators were recorded, and their compute time summed.
    pub steps: u64,
    pub compute_ms: f64,
    /// One step in `every` is profiled.
    pub every: u32,
    /// Largest self time first, at most [`MAX_OPERATORS`], [`OTHER_OPERATORS`] last.
    pub operators: Vec<OperatorStats>,
    /// Calls, shapes or nestings the recorder could not keep.
    pub dropped: u64,
}

/// One operator name over a window.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct OperatorStats {
    /// As libtorch names it: `aten::convolution`, `ConvolutionBackward0`, …
    #[schemars(with = "String")]
    pub name: Name,
    pub calls: u64,
    /// Its own time, its children's excluded, and its time from call to return.
    pub self_ns: u64,
    pub total_ns: u64,
    /// Its tensor inputs' sizes in their most frequent form (`[16, 3, 32, 32] [64, 3, 7, 7]`); empty where not
    /// recorded.
    #[serde(default, skip_serializing_if = "Name::is_empty")]
    #[schemars(with = "String")]
    pub shapes: Name,
}

/// End of an epoch (or of the run, mid-epoch, with `complete: false`).
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Epoch {
    pub epoch: u64,
    pub complete: bool,
    #[serde(default, with = "crate::nonfinite::optional")]
    #[schemars(schema_with = "crate::nonfinite::schema")]
    pub train_loss: Option<f64>,
    pub train_accuracy: Option<f64>,
    #[serde(default, with = "crate::nonfinite::optional")]
    #[schemars(schema_with = "crate::nonfinite::schema")]
    pub eval_loss: Option<f64>,
    pub eval_accuracy: Option<f64>,
}

/// Time a level spent compiling (torch.compile's Dynamo and Inductor, CUDA graph recording; AOTInductor's package,
/// made before the steps): a cost of the level, reported apart and kept out of the step statistics (the step it
/// fell in is not measured).
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Compile {
    /// The step whose timed region it fell in; `None` outside any step (an epoch's evaluation).
    pub step: Option<u64>,
    /// Whether it came in a training step or an evaluation.
    pub phase: Mode,
    pub trigger: CompileTrigger,
    /// A frame compiled again: a guard failed (a new batch size, the switch to evaluation).
    pub recompile: bool,
    pub ms: f64,
    /// Inductor's caches (FX graphs, AOTAutograd) during it: what was found, and what had to be built.
    pub cache_hits: u32,
    pub cache_misses: u32,
}

/// A compilation began (its `compile` event follows when it ends): while it runs, the worker is not stalled.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct Compiling {
    pub step: Option<u64>,
    pub phase: Mode,
    pub trigger: CompileTrigger,
}

/// What set a compilation off, as torch's compile callbacks name it.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CompileTrigger {
    /// Dynamo traced a frame: the first call, or one whose guards failed.
    Dynamo,
    /// The backward graph, compiled at the first backward pass.
    LazyBackward,
    /// CUDA graphs recorded at run time (`reduce-overhead`).
    CudagraphRecording,
    /// Kernels autotuned at run time.
    Autotuning,
    /// torch.export and AOTInductor compiled the model into a package before the session's steps (`aoti`).
    Package,
    /// A trigger this version of golow does not know.
    Other,
}

impl CompileTrigger {
    pub fn name(self) -> &'static str {
        match self {
            CompileTrigger::Dynamo => "dynamo",
            CompileTrigger::LazyBackward => "lazy backward",
            CompileTrigger::CudagraphRecording => "CUDA graph recording",
            CompileTrigger::Autotuning => "autotuning",
            CompileTrigger::Package => "AOTInductor packaging",
            CompileTrigger::Other => "other",
        }
    }
}

/// The worker ran the steps it was granted and waits for its next turn (alternating schedule only).
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct TurnEnd {
    pub steps_done: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    Ok,
    Stopped,
    Error,
}

/// Last event of a worker that ends on its own terms.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct WorkerExit {
    pub status: ExitStatus,
    pub message: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Defines [`WorkerEvent`], [`ScriptEvent`] and [`Body`] and the conversions between them from one list of the worker
/// events, each of which `Body` holds under the same name: a worker event cannot be added to one enum and forgotten
/// in another. The groups say who may send an event: `boxed` and `built_in` events come from built-in workers
/// alone (a `boxed` one is boxed in a `WorkerEvent`), `stamped` ones from any worker, a `--cmd` worker's processes
/// included, which the monitor stamps with the `process` they came from; `monitor` lists `Body`'s own.
macro_rules! events {
    (
        boxed { $( $(#[$boxed_meta:meta])* $boxed:ident($boxed_type:ty), )* }
        built_in { $( $(#[$built_in_meta:meta])* $built_in:ident($built_in_type:ty), )* }
        stamped { $( $(#[$stamped_meta:meta])* $stamped:ident($stamped_type:ty), )* }
        monitor { $($monitor:tt)* }
    ) => {
        /// What a worker may say. A worker cannot forge monitor events: its lines parse into this type only.
        #[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum WorkerEvent {
            $( $(#[$boxed_meta])* $boxed(Box<$boxed_type>), )*
            $( $(#[$built_in_meta])* $built_in($built_in_type), )*
            $( $(#[$stamped_meta])* $stamped($stamped_type), )*
        }

        /// What a process of a `--cmd` worker may say on its socket: the worker events that carry a `process`, which
        /// the monitor stamps. The monitor reads these lines as [`WorkerEvent`]s and refuses the others
        /// ([`WorkerEvent::from_script_process`]); this type gives the hook's stream its schema.
        #[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum ScriptEvent {
            $( $(#[$stamped_meta])* $stamped($stamped_type), )*
        }

        /// Everything that reaches the state, from workers and from the monitor.
        #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum Body {
            $( $(#[$boxed_meta])* $boxed(Box<$boxed_type>), )*
            $( $(#[$built_in_meta])* $built_in($built_in_type), )*
            $( $(#[$stamped_meta])* $stamped($stamped_type), )*
            $($monitor)*
        }

        impl From<WorkerEvent> for Body {
            fn from(event: WorkerEvent) -> Self {
                match event {
                    $( WorkerEvent::$boxed(e) => Body::$boxed(e), )*
                    $( WorkerEvent::$built_in(e) => Body::$built_in(e), )*
                    $( WorkerEvent::$stamped(e) => Body::$stamped(e), )*
                }
            }
        }

        impl WorkerEvent {
            /// What a `--cmd` worker's process numbered `process` said, as the monitor records it: only the events
            /// such a process may say, stamped with the process the monitor knows it by.
            pub fn from_script_process(self, process: u32) -> Result<Body, String> {
                match self {
                    $( WorkerEvent::$stamped(mut e) => {
                        e.process = process;
                        Ok(Body::$stamped(e))
                    } )*
                    $( WorkerEvent::$boxed(_) )|* $( | WorkerEvent::$built_in(_) )* => {
                        Err("a built-in worker's event on a --cmd worker's socket".into())
                    }
                }
            }
        }
    };
}

events! {
    // A worker says hello once, and the configuration it carries would size every event and record.
    boxed {
        Hello(Hello),
    }
    built_in {
        Step(Step),
        Epoch(Epoch),
        TurnEnd(TurnEnd),
        Exit(WorkerExit),
        Compiling(Compiling),
        Compile(Compile),
    }
    stamped {
        OptimizerStep(OptimizerStep),
        /// A process of a `--cmd` worker that reports, and the events it reports (see [`crate::script`]).
        ScriptProcess(ScriptProcess),
        Optimizer(Optimizer),
        ForwardPass(ForwardPass),
        BackwardPass(BackwardPass),
        Scalar(Scalar),
        Phase(Phase),
        /// A window of the operators of the worker's profiled steps.
        Operators(OperatorWindow),
        ProfilingOff(ProfilingOff),
    }
    monitor {
        /// The session's configuration, first record of every session.
        SessionStart(Box<crate::config::SessionConfig>),
        /// The launcher started a worker process.
        WorkerStarted {
            pid: u32,
            command: Vec<String>,
        },
        /// A line the worker printed on its stdout or stderr.
        Output {
            stream: Stream,
            line: String,
        },
        /// A line on the event channel that is not a valid event.
        ProtocolError {
            message: String,
        },
        /// A reading of the worker's process and its descendants from /proc: memory summed, CPU summed
        /// (100 = one core busy). With `rank`, of one rank's process (`pid`, which said it is that rank) and its
        /// descendants, inside a `--cmd` worker's tree; the worker's own reading comes without.
        Process {
            pid: u32,
            rss_bytes: u64,
            peak_rss_bytes: u64,
            cpu_percent: Option<f64>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            rank: Option<u32>,
            /// The threads of the processes read, summed; absent in older recordings.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            threads: Option<u32>,
        },
        /// The worker process ended; `signal` is set when a signal killed it.
        WorkerExited {
            exit_code: Option<i32>,
            signal: Option<i32>,
            /// golow asked it to stop (user interrupt); its end is then not a failure.
            stop_requested: bool,
        },
        /// An attached worker's process (`golow attach`) left the session. `detached`: the session stopped watching it
        /// and it runs on. Otherwise it ended, and how is not knowable: golow is not its parent, so no exit status
        /// reaches it.
        AttachedEnd {
            detached: bool,
        },
        /// A process in an attached worker's tree whose environment names it a rank of a distributed job (`RANK`,
        /// as torchrun, accelerate and Lightning set it): the samplers read it as that rank.
        RankProcess {
            pid: u32,
            rank: u32,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            local_rank: Option<u32>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            world_size: Option<u32>,
        },
        /// NVML cannot be used on this machine; the GPU panes say why.
        GpuUnavailable {
            reason: String,
        },
        /// A GPU as NVML names it, once per session before its readings.
        GpuInfo {
            index: u32,
            name: String,
            memory_total_bytes: u64,
            driver: String,
            /// NVML's UUID (`GPU-…`), which DCGM exporter labels its series with; empty in older recordings.
            #[serde(default)]
            uuid: String,
        },
        /// A reading of a whole GPU. Utilisation is NVML's, averaged by the driver over its own sample
        /// window (1/6 s to 1 s depending on the product), not over golow's interval.
        GpuDevice {
            index: u32,
            utilization_percent: Option<u32>,
            memory_used_bytes: Option<u64>,
            power_watts: Option<f64>,
            sm_clock_mhz: Option<u32>,
        },
        /// PCIe traffic of a whole GPU from NVML (its own 20 ms sample per direction), in bytes per second:
        /// `rx` into the GPU (host-to-device copies), `tx` out of it.
        GpuPcie {
            index: u32,
            rx_bytes_per_s: Option<u64>,
            tx_bytes_per_s: Option<u64>,
        },
        /// The recording stopped (a full disk, say) while the session went on; the live views and the summary say so.
        RecordingFailed {
            reason: String,
        },
        /// NVML's per-process readings cannot be attributed to the workers (inside a PID namespace it reports the
        /// host's process IDs); device readings go on.
        GpuProcessesUnavailable {
            reason: String,
        },
        /// A reading of one worker's process on a GPU: its memory, and its SM utilisation from NVML's
        /// process samples since the previous reading (`last_seen_us` is NVML's timestamp of that sample). With `rank`,
        /// of one rank's process and its descendants, as for `Process`.
        GpuProcess {
            pid: u32,
            index: u32,
            memory_bytes: Option<u64>,
            sm_percent: Option<u32>,
            last_seen_us: Option<u64>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            rank: Option<u32>,
        },
        /// The whole machine once a second, so that a session's conditions can be judged and compared: the 1-minute
        /// load average, and over the last second the share of all CPUs (100 = every core) busy, stolen by a
        /// hypervisor, and busy with processes other than golow and its workers; the mean CPU clock, read every 10 s.
        MachineLoad {
            load_1m: f64,
            busy_percent: f64,
            steal_percent: f64,
            others_percent: f64,
            cpu_mhz: Option<f64>,
        },
        /// A window of the worker's GPU activity from the CUPTI collector.
        Kernels(Box<KernelWindow>),
        /// Whether the CUPTI collector inside the worker's process runs, and if not, why.
        Collector(CollectorStatus),
        SessionEnd,
    }
}

/// An event as the hub stamped it: what is recorded, replayed and folded into the state.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Record {
    pub v: u32,
    /// Milliseconds since the session started, on the monitor's monotonic clock.
    pub t_ms: f64,
    /// The worker the event concerns; absent for session-wide events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<Name>,
    #[serde(flatten)]
    pub body: Body,
}

impl Record {
    pub fn new(t_ms: f64, worker: Option<Name>, body: Body) -> Self {
        Record {
            v: SCHEMA_VERSION,
            t_ms,
            worker,
            body,
        }
    }
}

/// Parses one recorded line. The kinds a recording is mostly made of, as golow writes them, are scanned straight
/// from the line (`record_scan.rs`); other lines golow wrote (`v`, `t_ms` and `worker` before the body's
/// fields) skip the derived `Deserialize`'s `flatten`, which buffers every field before the body's tag buffers them
/// again; any other valid order still parses, the derived way.
pub fn parse_record(line: &[u8]) -> serde_json::Result<Record> {
    let mut scanned = Vec::with_capacity(1);
    if let Ok(text) = std::str::from_utf8(line)
        && crate::record_scan::record_onto(text, &mut scanned)
        && let Some(record) = scanned.pop()
    {
        return Ok(record);
    }
    parse_by_serde(line)
}

/// A line the scan does not vouch for, read by serde.
fn parse_by_serde(line: &[u8]) -> serde_json::Result<Record> {
    match serde_json::from_slice::<HeadFirst>(line) {
        Ok(HeadFirst(record)) => Ok(record),
        Err(_) => serde_json::from_slice(line),
    }
}

/// Parses the JSON lines of `lines` (a recording's frame) onto `out`, in order; returns how many non-empty lines
/// were not records, or records of no time a session can hold (not finite). The loop lives in this crate, beside the
/// scan, so that the scan is inlined into it (it would not be across crates): a replay parses hundreds of thousands.
pub fn parse_records(lines: &[u8], out: &mut Vec<Record>) -> u64 {
    // The frame's text checked once, and a damaged frame's line by line: a line cut from text at a newline, an
    // ASCII character, is text too.
    let text = std::str::from_utf8(lines).ok();
    let mut not_records = 0;
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', lines).chain([lines.len()]) {
        let (line, from) = (&lines[start..end], start);
        start = end + 1;
        if line.is_empty() {
            continue;
        }
        let line_text = match text {
            Some(text) => text.get(from..end),
            None => std::str::from_utf8(line).ok(),
        };
        if line_text.is_some_and(|text| crate::record_scan::record_onto(text, out)) {
            if out.last().is_some_and(|r| !r.t_ms.is_finite()) {
                out.pop();
                not_records += 1;
            }
            continue;
        }
        match parse_by_serde(line) {
            Ok(record) if record.t_ms.is_finite() => out.push(record),
            _ => not_records += 1,
        }
    }
    not_records
}

/// A record whose head fields come first: they are read, then the rest of the map is the body's.
struct HeadFirst(Record);

impl<'de> Deserialize<'de> for HeadFirst {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeadFirstVisitor)
    }
}

struct HeadFirstVisitor;

impl<'de> serde::de::Visitor<'de> for HeadFirstVisitor {
    type Value = HeadFirst;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a record with v, t_ms and worker first")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<HeadFirst, A::Error> {
        use serde::de::Error;
        let (mut v, mut t_ms, mut worker) = (None, None, None);
        let first_body_key = loop {
            let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? else {
                return Err(A::Error::custom("a record without a body"));
            };
            match key.as_ref() {
                "v" => v = Some(map.next_value()?),
                "t_ms" => t_ms = Some(map.next_value()?),
                "worker" => worker = map.next_value()?,
                _ => break key.into_owned(),
            }
        };
        let (Some(v), Some(t_ms)) = (v, t_ms) else {
            return Err(A::Error::custom("v and t_ms come after the body"));
        };
        let body = Body::deserialize(MapAccessDeserializer::new(Prepended {
            key: Some(first_body_key),
            map,
        }))?;
        Ok(HeadFirst(Record {
            v,
            t_ms,
            worker,
            body,
        }))
    }
}

/// A map with its first key, already read, put back in front.
struct Prepended<A> {
    key: Option<String>,
    map: A,
}

impl<'de, A: serde::de::MapAccess<'de>> serde::de::MapAccess<'de> for Prepended<A> {
    type Error = A::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        match self.key.take() {
            Some(key) => seed
                .deserialize(serde::de::IntoDeserializer::into_deserializer(key))
                .map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// Parses one line of a worker's event channel.
pub fn parse_worker_line(line: &str) -> Result<WorkerEvent, String> {
    if let Some(event) = crate::record_scan::worker_event(line) {
        return Ok(event);
    }
    serde_json::from_str(line).map_err(|e| {
        // serde quotes what the worker sent, its JSON escapes decoded: a line break or an escape sequence.
        let message = format!("invalid event line ({e}): {}", preview(line));
        crate::text::printable(&message).replace('\n', "\\n")
    })
}

fn preview(line: &str) -> String {
    const MAX: usize = 120;
    if line.len() <= MAX {
        return line.to_string();
    }
    let cut = (0..=MAX)
        .rev()
        .find(|&i| line.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &line[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{Damage, every_body};

    #[test]
    fn every_record_kind_round_trips() {
        for body in every_body() {
            let record = Record::new(12.5, Some("libtorch".into()), body);
            let line = serde_json::to_string(&record).unwrap();
            assert!(!line.contains('\n'));
            let back: Record = serde_json::from_str(&line).unwrap();
            assert_eq!(back, record, "{line}");
        }
    }

    #[test]
    fn the_fast_record_parser_agrees_with_the_derived_one() {
        for (i, body) in every_body().into_iter().enumerate() {
            let worker = (i % 2 == 0).then(|| Name::from("pytorch"));
            let record = Record::new(0.125 * i as f64, worker, body);
            let line = serde_json::to_vec(&record).unwrap();
            assert_eq!(parse_record(&line).unwrap(), record);
            // Another order of the same fields takes the derived path to the same record.
            let mut value = serde_json::to_value(&record).unwrap();
            let t = value.as_object_mut().unwrap().remove("t_ms").unwrap();
            value.as_object_mut().unwrap().insert("t_ms".into(), t);
            let reordered = serde_json::to_vec(&value).unwrap();
            assert_eq!(parse_record(&reordered).unwrap(), record);
        }
        let bad: [&[u8]; 4] = [
            b"{}",
            br#"{"v":1,"t_ms":1.0}"#,
            br#"{"v":1,"t_ms":1.0,"type":"nope"}"#,
            b"[1]",
        ];
        for line in bad {
            assert!(parse_record(line).is_err());
        }
    }

    /// A frame's lines read alike whether the frame is valid text or has a line that is not: that line alone is
    /// refused, and the others read as they do in a frame of their own.
    #[test]
    fn a_frame_with_a_line_that_is_not_text_loses_that_line_only() {
        let records: Vec<Record> = every_body()
            .into_iter()
            .enumerate()
            .map(|(i, body)| Record::new(i as f64, Some("pytorch".into()), body))
            .collect();
        let mut frame = Vec::new();
        for record in &records {
            frame.extend(serde_json::to_vec(record).unwrap());
            frame.push(b'\n');
        }
        let mut read = Vec::new();
        assert_eq!(parse_records(&frame, &mut read), 0);
        assert_eq!(read, records);
        let damaged_line = b"{\"v\":1,\"t_ms\":1.0,\"worker\":\"py\xfftorch\",\"type\":\"turn_end\",\"steps_done\":4}\n";
        let at = frame.iter().position(|&b| b == b'\n').unwrap() + 1;
        frame.splice(at..at, damaged_line.iter().copied());
        let mut read = Vec::new();
        assert_eq!(parse_records(&frame, &mut read), 1);
        assert_eq!(read, records);
    }

    /// What a reading left out (a process's rank, a first CPU share) and a body whose tag is not its first field read
    /// the same on either path.
    #[test]
    fn the_scanned_kinds_agree_with_the_derived_way_in_every_shape() {
        let lines: [&[u8]; 6] = [
            br#"{"v":1,"t_ms":2.5,"worker":"libtorch","type":"process","pid":7,"rss_bytes":1,"peak_rss_bytes":2,"cpu_percent":null}"#,
            br#"{"v":1,"t_ms":2.5,"worker":"libtorch","type":"process","pid":7,"rss_bytes":1,"peak_rss_bytes":2,"cpu_percent":12.5,"rank":3}"#,
            br#"{"v":1,"t_ms":2.5,"worker":"libtorch","pid":7,"type":"process","rss_bytes":1,"peak_rss_bytes":2,"cpu_percent":1.0}"#,
            br#"{"v":1,"t_ms":3.0,"type":"machine_load","load_1m":0.5,"busy_percent":50.0,"steal_percent":0.0,"others_percent":1.0,"cpu_mhz":null}"#,
            br#"{"v":1,"t_ms":3.0,"worker":"pytorch","type":"turn_end","steps_done":4}"#,
            br#"{"v":1,"t_ms":3.0,"worker":"pytorch","steps_done":4,"type":"turn_end"}"#,
        ];
        for line in lines {
            let derived: Record = serde_json::from_slice(line).unwrap();
            assert_eq!(
                parse_record(line).unwrap(),
                derived,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // A field missing or of the wrong type is refused on every path.
        let bad: [&[u8]; 2] = [
            br#"{"v":1,"t_ms":2.5,"type":"process","pid":7,"rss_bytes":1,"cpu_percent":null}"#,
            br#"{"v":1,"t_ms":2.5,"type":"step","step":"zero"}"#,
        ];
        for line in bad {
            assert!(parse_record(line).is_err());
            assert!(serde_json::from_slice::<Record>(line).is_err());
        }
    }

    #[test]
    fn records_are_flat_json_objects() {
        let record = Record::new(1.0, None, Body::SessionEnd);
        let value: serde_json::Value = serde_json::to_value(&record).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"v": SCHEMA_VERSION, "t_ms": 1.0, "type": "session_end"})
        );
    }

    #[test]
    fn worker_lines_parse_and_cannot_forge_monitor_events() {
        let line = r#"{"type":"step","step":0,"epoch":0,"phase":"train","batch_size":4,"data_ms":0.1,"h2d_ms":null,"h2d_bytes":null,"compute_ms":5.0,"loss":2.3,"correct":1,"warmup":true}"#;
        assert!(
            matches!(parse_worker_line(line), Ok(WorkerEvent::Step(s)) if s.warmup && s.batch_size == 4)
        );
        let forged =
            r#"{"type":"worker_exited","exit_code":0,"signal":null,"stop_requested":false}"#;
        assert!(parse_worker_line(forged).is_err());
        let err = parse_worker_line(&"x".repeat(1000)).unwrap_err();
        assert!(err.len() < 300, "{err}");
    }

    /// A seeded mutation fuzz of the worker-line parser: 10,000 damaged copies of every kind of worker line. Each
    /// parses or fails with one line of bounded length, never a panic.
    #[test]
    fn ten_thousand_damaged_worker_lines_parse_or_fail_in_one_line() {
        const JSON_BYTES: &[u8] = br#"{}[]":,0e-9\u"#;
        let lines: Vec<String> = every_body()
            .into_iter()
            .filter_map(|body| {
                let record = serde_json::to_value(Record::new(1.0, None, body)).ok()?;
                let mut event = record.as_object()?.clone();
                event.remove("v");
                event.remove("t_ms");
                parse_worker_line(&serde_json::to_string(&event).ok()?).ok()?;
                serde_json::to_string(&event).ok()
            })
            .collect();
        assert!(lines.len() >= 5, "{lines:?}");
        let mut damage = Damage::new(0x2545_F491_4F6C_DD1D);
        let (mut parsed, mut failed) = (0, 0);
        for case in 0..10_000 {
            let mut bytes = lines[case % lines.len()].clone().into_bytes();
            damage.damage(&mut bytes, JSON_BYTES, 3);
            // The line reader splits at line breaks: a line never holds one (a JSON escape may).
            let line = String::from_utf8_lossy(&bytes).replace('\n', " ");
            match parse_worker_line(&line) {
                Ok(_) => parsed += 1,
                Err(message) => {
                    failed += 1;
                    assert!(
                        !message.contains(char::is_control),
                        "case {case}: {message}"
                    );
                    assert!(message.len() < 600, "case {case}: {} bytes", message.len());
                }
            }
        }
        assert!(
            parsed > 100 && failed > 1_000,
            "{parsed} parsed, {failed} failed"
        );
    }
}
