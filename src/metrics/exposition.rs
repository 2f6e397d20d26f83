//! The session's state in Prometheus's text exposition format (version 0.0.4, which Prometheus and OpenMetrics
//! scrapers read): per worker its step and sample times as histograms, throughput, loss, steps, its processes' memory
//! and CPU, compile time, and where the collector runs its kernels and GPU time; per GPU NVML's readings, labelled as
//! DCGM exporter labels them (`gpu`, `UUID`, `modelName`, `Hostname`) so that PromQL joins golow's series with the
//! dashboards a cluster already has.
//!
//! Everything here is drawn from the fold, so a scrape of a replay at some position shows what a scrape of the live
//! session showed then. What comes from outside (worker and kernel names) is escaped, and cut to a length; kernels
//! are capped per worker, the rest summed under `kernel="other"`, so a model with thousands of kernels cannot make
//! a scrape, or Prometheus's index, grow without bound; a kernel once named stays named (`KernelNames`), so that no
//! counter's series comes and goes, nor falls back into `other`.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::state::flops::Efficiency;
use crate::state::phases::{Phase, PhasesState};
use crate::state::script::ProcessState;
use crate::state::{Activity, Durations, GpuDeviceState, State, WorkerState};

/// Upper bounds of the time histograms' buckets, in seconds: from a small CPU step to a long one.
pub const TIME_BUCKETS_S: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Kernels named per worker at most (by total time); the others are summed as `other`.
pub const MAX_KERNELS: usize = 16;

/// A label value from outside is cut to this many bytes.
pub const MAX_LABEL_BYTES: usize = 128;

/// The kernels each worker's scrapes have named so far: filled from the largest by GPU time while there is room,
/// then kept, so that a counter never moves between series (a counter that falls reads as a reset).
#[derive(Debug, Default)]
pub struct KernelNames(BTreeMap<String, Vec<String>>);

/// The text of one scrape; `kernels` are the names earlier scrapes of the same session gave.
pub fn render(state: &State, hostname: &str, kernels: &mut KernelNames) -> String {
    let mut out = Exposition::default();
    workers(&mut out, state, kernels);
    gpus(&mut out, state, hostname);
    out.text
}

/// A worker's reading.
type Of = fn(&WorkerState) -> Option<f64>;

/// The families with one sample per worker: name, type, help, and the reading.
const PER_WORKER: [(&str, &str, &str, Of); 10] = [
    (
        "golow_throughput_samples_per_second",
        "gauge",
        "Samples per second at the median time per sample.",
        WorkerState::throughput,
    ),
    (
        "golow_loss",
        "gauge",
        "The latest loss.",
        WorkerState::last_loss,
    ),
    (
        "golow_steps_total",
        "counter",
        "Steps run, warm-up included.",
        |w| Some(w.steps as f64),
    ),
    (
        "golow_samples_total",
        "counter",
        "Samples of measured steps.",
        // A --cmd worker that reports no samples has no such count, rather than one that stays 0.
        |w| (w.samples > 0).then_some(w.samples as f64),
    ),
    (
        "golow_worker_running",
        "gauge",
        "1 while the worker's process runs, else 0.",
        |w| Some(f64::from(u8::from(w.activity() == Activity::Running))),
    ),
    (
        "golow_process_resident_memory_bytes",
        "gauge",
        "Resident memory of the worker's processes (/proc, summed).",
        |w| last(&w.series.rss_bytes),
    ),
    (
        "golow_process_cpu_percent",
        "gauge",
        "CPU of the worker's processes (100 = one core busy).",
        |w| last(&w.series.cpu_percent),
    ),
    (
        "golow_compile_seconds",
        "gauge",
        "Time the level spent compiling (torch.compile; AOTInductor's package).",
        |w| w.compile.as_ref().map(|c| c.total_ms() / 1e3),
    ),
    (
        "golow_worker_gpu_memory_bytes",
        "gauge",
        "GPU memory of the worker's processes (NVML).",
        |w| last(&w.series.gpu_memory_bytes),
    ),
    (
        "golow_worker_gpu_sm_percent",
        "gauge",
        "SM utilisation of the worker's processes (NVML process samples).",
        |w| last(&w.series.gpu_sm_percent),
    ),
];

/// A rank's reading.
type OfRank = fn(&ProcessState) -> Option<f64>;

/// The families with one sample per rank of a distributed `--cmd` worker, labelled `worker` and `rank`; apart from
/// the worker's own families, whose readings cover its whole tree (the launcher and every rank), so that a sum over
/// ranks never counts anything twice.
const PER_RANK: [(&str, &str, &str, OfRank); 5] = [
    (
        "golow_rank_steps_total",
        "counter",
        "Steps of the rank's first optimiser, warm-up included.",
        |p| Some(p.steps as f64),
    ),
    (
        "golow_rank_resident_memory_bytes",
        "gauge",
        "Resident memory of the rank's process and its descendants (/proc, summed).",
        |p| last(&p.series.rss_bytes),
    ),
    (
        "golow_rank_cpu_percent",
        "gauge",
        "CPU of the rank's process and its descendants (100 = one core busy).",
        |p| last(&p.series.cpu_percent),
    ),
    (
        "golow_rank_gpu_memory_bytes",
        "gauge",
        "GPU memory of the rank's processes (NVML).",
        |p| last(&p.series.gpu_memory_bytes),
    ),
    (
        "golow_rank_gpu_sm_percent",
        "gauge",
        "SM utilisation of the rank's processes (NVML process samples).",
        |p| last(&p.series.gpu_sm_percent),
    ),
];

fn workers(out: &mut Exposition, state: &State, kernels: &mut KernelNames) {
    let all = &state.workers;
    let steps: Vec<Labelled> = all.iter().flat_map(step_times).collect();
    histogram(
        out,
        "golow_step_seconds",
        "Time of a measured step (timed regions; a --cmd worker: the interval between optimiser steps, per rank).",
        &steps,
    );
    let samples: Vec<Labelled> = all
        .iter()
        .map(|w| (vec![("worker", label(&w.name))], &w.sample_time))
        .collect();
    histogram(
        out,
        "golow_sample_seconds",
        "Time per sample of a measured step.",
        &samples,
    );
    let phases: Vec<Labelled> = all.iter().flat_map(phase_times).collect();
    histogram(
        out,
        "golow_step_phase_seconds",
        "Time of a --cmd worker's measured step in each phase on the host (data, forward, backward, optimizer, other): \
         each rank's in a distributed job, else its primary process's.",
        &phases,
    );
    ranks(out, all);
    for (name, kind, help, of) in PER_WORKER {
        per_worker(out, all, name, kind, help, of);
    }
    for (name, kind, help, of) in PER_RANK {
        per_rank(out, all, name, kind, help, of);
    }
    flops(out, state);
    collector(out, all, kernels);
}

/// How far each built-in level runs from the hardware: its achieved FLOP/s (two per multiply-add, from the model's
/// architecture) and their share of the device's peak for the session's math (`--cmd` workers have neither).
fn flops(out: &mut Exposition, state: &State) {
    let of = |pick: fn(&Efficiency) -> Option<f64>| {
        state
            .workers
            .iter()
            .filter_map(|w| {
                let value = pick(&Efficiency::of_worker(state, w)?)?;
                Some((vec![("worker", label(&w.name))], value))
            })
            .collect()
    };
    family(
        out,
        "golow_achieved_flops_per_second",
        "gauge",
        "A built-in level's FLOPs per sample (2 per multiply-add) times its samples per second.",
        of(|e| Some(e.achieved_tflops? * 1e12)),
    );
    family(
        out,
        "golow_peak_flops_ratio",
        "gauge",
        "Achieved FLOP/s over the GPU's dense peak for the session's math (FP32, or TF32 with --tf32 on), from NVIDIA's datasheets.",
        of(Efficiency::share_of_peak),
    );
}

/// Durations with the labels of their series.
type Labelled<'a> = (Vec<(&'static str, String)>, &'a Durations);

/// A worker's step times: one series per rank for a distributed `--cmd` worker, else the worker's.
fn step_times(w: &WorkerState) -> Vec<Labelled<'_>> {
    let worker = label(&w.name);
    let ranked: Vec<Labelled> = w
        .script
        .iter()
        .flat_map(|s| s.ranks())
        .filter_map(|p| {
            let rank = p.rank?.to_string();
            Some((
                vec![("worker", worker.clone()), ("rank", rank)],
                &p.step_interval,
            ))
        })
        .collect();
    if ranked.is_empty() {
        vec![(vec![("worker", worker)], &w.step_time)]
    } else {
        ranked
    }
}

/// A `--cmd` worker's phases, one series each: a distributed job's per rank, else the worker's.
fn phase_times(w: &WorkerState) -> Vec<Labelled<'_>> {
    let Some(script) = &w.script else {
        return Vec::new();
    };
    let ranks = script.ranks();
    if ranks.is_empty() {
        return phase_series(w, None, &script.phases);
    }
    ranks
        .into_iter()
        .flat_map(|p| phase_series(w, p.rank, &p.phases))
        .collect()
}

fn phase_series<'a>(
    w: &WorkerState,
    rank: Option<u32>,
    phases: &'a PhasesState,
) -> Vec<Labelled<'a>> {
    Phase::ALL
        .iter()
        .zip(&phases.durations)
        .map(|(phase, durations)| {
            let mut labels = vec![("worker", label(&w.name))];
            if let Some(rank) = rank {
                labels.push(("rank", rank.to_string()));
            }
            labels.push(("phase", phase.name().to_string()));
            (labels, durations)
        })
        .collect()
}

/// Each series' durations as a cumulative histogram in seconds; a series with none yet is left out, and a family
/// with no series.
fn histogram(out: &mut Exposition, name: &str, help: &str, series: &[Labelled]) {
    let series: Vec<&Labelled> = series.iter().filter(|(_, d)| !d.is_empty()).collect();
    if series.is_empty() {
        return;
    }
    out.family(name, "histogram", help);
    let (bucket, sum, count) = (
        format!("{name}_bucket"),
        format!("{name}_sum"),
        format!("{name}_count"),
    );
    for (labels, durations) in series {
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let total = durations.len() as f64;
        let counts = durations.counts_at_most_ms(&TIME_BUCKETS_S.map(|s| s * 1e3));
        for (bound, count) in TIME_BUCKETS_S.iter().zip(counts) {
            let le = bound.to_string();
            out.sample(
                &bucket,
                &[&labels[..], &[("le", &le)]].concat(),
                count as f64,
            );
        }
        out.sample(&bucket, &[&labels[..], &[("le", "+Inf")]].concat(), total);
        out.sample(&sum, &labels, durations.sum_ms() / 1e3);
        out.sample(&count, &labels, total);
    }
}

/// A distributed worker's stragglers: the skew of the ranks' arrivals, how often each arrived last, and the rank
/// the verdict names.
fn ranks(out: &mut Exposition, workers: &[WorkerState]) {
    let arrivals: Vec<(String, &crate::state::ranks::Arrivals)> = workers
        .iter()
        .filter_map(|w| Some((label(&w.name), &w.script.as_ref()?.arrivals)))
        .filter(|(_, a)| a.complete > 0)
        .collect();
    let skews: Vec<Labelled> = arrivals
        .iter()
        .map(|(worker, a)| (vec![("worker", worker.clone())], &a.skew))
        .collect();
    histogram(
        out,
        "golow_arrival_skew_seconds",
        "Per step, how long after the first rank the last one began its backward pass (towards the all-reduce).",
        &skews,
    );
    if arrivals.is_empty() {
        return;
    }
    out.family(
        "golow_straggler_steps_total",
        "counter",
        "Steps in which the rank arrived last.",
    );
    for (worker, a) in &arrivals {
        for (rank, count) in &a.last_counts {
            let rank = rank.to_string();
            out.sample(
                "golow_straggler_steps_total",
                &[("worker", worker), ("rank", &rank)],
                *count as f64,
            );
        }
    }
    let named: Vec<(&String, String)> = arrivals
        .iter()
        .filter_map(|(worker, a)| Some((worker, a.verdict?.rank.to_string())))
        .collect();
    if named.is_empty() {
        return;
    }
    out.family(
        "golow_straggler",
        "gauge",
        "1 for the rank the verdict names: the latest steps' largest median lateness, a visible share of a step.",
    );
    for (worker, rank) in &named {
        out.sample(
            "golow_straggler",
            &[("worker", worker), ("rank", rank)],
            1.0,
        );
    }
}

/// A family with one sample per worker that has a value; none at all when no worker has one.
fn per_worker(
    out: &mut Exposition,
    workers: &[WorkerState],
    name: &str,
    kind: &str,
    help: &str,
    of: Of,
) {
    let values = workers
        .iter()
        .filter_map(|w| Some((vec![("worker", label(&w.name))], of(w)?)))
        .collect();
    family(out, name, kind, help, values);
}

fn per_rank(
    out: &mut Exposition,
    workers: &[WorkerState],
    name: &str,
    kind: &str,
    help: &str,
    of: OfRank,
) {
    let values = workers
        .iter()
        .filter_map(|w| Some((label(&w.name), w.script.as_ref()?.ranks())))
        .flat_map(|(worker, ranks)| {
            ranks.into_iter().filter_map(move |p| {
                let labels = vec![("worker", worker.clone()), ("rank", p.rank?.to_string())];
                Some((labels, of(p)?))
            })
        })
        .collect();
    family(out, name, kind, help, values);
}

/// A family of one sample per set of labels, its non-finite values left out; nothing at all without a value.
fn family(
    out: &mut Exposition,
    name: &str,
    kind: &str,
    help: &str,
    values: Vec<(Vec<(&'static str, String)>, f64)>,
) {
    let values: Vec<_> = values.into_iter().filter(|(_, v)| v.is_finite()).collect();
    if values.is_empty() {
        return;
    }
    out.family(name, kind, help);
    for (labels, value) in values {
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        out.sample(name, &labels, value);
    }
}

/// The collector's kernels (those named, then `other`) and each worker's GPU time breakdown.
fn collector(out: &mut Exposition, workers: &[WorkerState], names: &mut KernelNames) {
    let rows: Vec<(String, Vec<KernelRow>)> = workers
        .iter()
        .filter(|w| !w.gpu_activity.kernels.is_empty())
        .map(|w| {
            let named = names.0.entry(w.name.clone()).or_default();
            (label(&w.name), kernel_rows(w, named))
        })
        .collect();
    if !rows.is_empty() {
        out.family(
            "golow_kernel_launches_total",
            "counter",
            "CUDA kernel launches the collector saw, by kernel.",
        );
        for (worker, kernels) in &rows {
            for k in kernels {
                out.sample(
                    "golow_kernel_launches_total",
                    &[("worker", worker), ("kernel", &k.kernel)],
                    k.launches as f64,
                );
            }
        }
        out.family(
            "golow_kernel_seconds_total",
            "counter",
            "GPU time of the kernels the collector saw, by kernel.",
        );
        for (worker, kernels) in &rows {
            for k in kernels {
                out.sample(
                    "golow_kernel_seconds_total",
                    &[("worker", worker), ("kernel", &k.kernel)],
                    k.total_ns as f64 / 1e9,
                );
            }
        }
    }
    let breakdowns: Vec<(String, [(&str, f64); 3])> = workers
        .iter()
        .filter_map(|w| {
            let b = w.gpu_activity.breakdown()?;
            Some((
                label(&w.name),
                [("busy", b.busy), ("copy", b.copy), ("idle", b.idle)],
            ))
        })
        .collect();
    if !breakdowns.is_empty() {
        out.family(
            "golow_gpu_time_ratio",
            "gauge",
            "Share of the worker's GPU time busy with kernels, copying, or idle.",
        );
        for (worker, parts) in &breakdowns {
            for (state, value) in parts {
                out.sample(
                    "golow_gpu_time_ratio",
                    &[("worker", worker), ("state", state)],
                    *value,
                );
            }
        }
    }
}

/// One kernel's totals as exported.
struct KernelRow {
    kernel: String,
    launches: u64,
    total_ns: u64,
}

/// A worker's named kernels (naming the largest unnamed ones while fewer than `MAX_KERNELS` are, unless cut to
/// `MAX_LABEL_BYTES` one would read as another), then the rest as `other`.
fn kernel_rows(w: &WorkerState, named: &mut Vec<String>) -> Vec<KernelRow> {
    let top = w.gpu_activity.top();
    for (name, _) in &top {
        if named.len() >= MAX_KERNELS {
            break;
        }
        let clash = named.iter().any(|n| n == name || label(n) == label(name));
        if !clash && *name != "other" {
            named.push(name.to_string());
        }
    }
    let mut rows: Vec<KernelRow> = Vec::new();
    let mut other = KernelRow {
        kernel: "other".into(),
        launches: 0,
        total_ns: 0,
    };
    for (name, totals) in top {
        if named.iter().any(|n| n == name) {
            rows.push(KernelRow {
                kernel: label(name),
                launches: totals.count,
                total_ns: totals.total_ns,
            });
        } else {
            other.launches = other.launches.saturating_add(totals.count);
            other.total_ns = other.total_ns.saturating_add(totals.total_ns);
        }
    }
    if other.launches > 0 {
        rows.push(other);
    }
    rows
}

/// A GPU reading from the state.
type Reading = fn(&GpuDeviceState) -> Option<f64>;

fn gpus(out: &mut Exposition, state: &State, hostname: &str) {
    let devices = &state.gpu.devices;
    if devices.is_empty() {
        return;
    }
    let host = label(hostname);
    let readings: [(&str, &str, Reading); 6] = [
        (
            "golow_gpu_utilization_percent",
            "GPU utilisation (NVML, over the driver's sample window).",
            |d| last(&d.utilization),
        ),
        (
            "golow_gpu_memory_used_bytes",
            "GPU memory used (NVML).",
            |d| last(&d.memory_used_bytes),
        ),
        ("golow_gpu_power_watts", "GPU power draw (NVML).", |d| {
            last(&d.power_watts)
        }),
        ("golow_gpu_sm_clock_mhz", "SM clock (NVML).", |d| {
            last(&d.sm_clock_mhz)
        }),
        (
            "golow_gpu_pcie_rx_bytes_per_second",
            "PCIe traffic into the GPU (NVML).",
            |d| last(&d.pcie_rx_bytes_per_s),
        ),
        (
            "golow_gpu_pcie_tx_bytes_per_second",
            "PCIe traffic out of the GPU (NVML).",
            |d| last(&d.pcie_tx_bytes_per_s),
        ),
    ];
    for (name, help, of) in readings {
        let values: Vec<(&GpuDeviceState, f64)> = devices
            .iter()
            .filter_map(|d| of(d).filter(|v| v.is_finite()).map(|v| (d, v)))
            .collect();
        if values.is_empty() {
            continue;
        }
        out.family(name, "gauge", help);
        for (d, value) in values {
            let (gpu, uuid, model) = (d.index.to_string(), label(&d.uuid), label(&d.name));
            let labels = [
                ("gpu", gpu.as_str()),
                ("UUID", &uuid),
                ("modelName", &model),
                ("Hostname", &host),
            ];
            out.sample(name, &labels, value);
        }
    }
}

fn last(series: &crate::state::Series) -> Option<f64> {
    series.last().map(|(_, v)| v)
}

/// A value from outside as a label value: cut to `MAX_LABEL_BYTES` at a character boundary; the format's escapes
/// are applied when it is written.
fn label(value: &str) -> String {
    let mut end = value.len().min(MAX_LABEL_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_string()
}

#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// One sample; a value that is not a number is left out (the format would take `NaN`, but no reader wants it).
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        if !value.is_finite() {
            return;
        }
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(key);
                self.text.push_str("=\"");
                escape_into(&mut self.text, value);
                self.text.push('"');
            }
            self.text.push('}');
        }
        // Go's float syntax, which Prometheus reads: exponent form for the very large and very small, where `{}`
        // would spell out hundreds of digits.
        if value == 0.0 || (1e-6..1e15).contains(&value.abs()) {
            let _ = writeln!(self.text, " {value}");
        } else {
            let _ = writeln!(self.text, " {value:e}");
        }
    }
}

/// The text format's label escapes: backslash, double quote and line feed; every other control character becomes
/// a space, so that nothing from outside reaches a reader's terminal or parser as a control.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::event::{Body, Record, Step};
    use golow_protocol::samples;

    /// Step `n` (the first a warm-up step), its loss falling.
    fn step(n: u64, compute_ms: f64) -> Body {
        Body::Step(Step {
            loss: 2.5 - n as f64 / 10.0,
            ..samples::step(n, compute_ms, n == 0)
        })
    }

    fn state(records: Vec<(&str, Body)>) -> State {
        let mut state = State::default();
        for (i, (worker, body)) in records.into_iter().enumerate() {
            state.apply(&Record::new(i as f64, Some(worker.into()), body));
        }
        state
    }

    /// The samples of `name` (its lines that are not comments), for the worker `worker`.
    fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
            .collect()
    }

    /// A built-in level on a known GPU serves its achieved FLOP/s and their share of the peak; a `--cmd` worker,
    /// whose model golow does not know, neither.
    #[test]
    fn a_built_in_level_serves_its_flops_and_share_of_the_peak() {
        let mut hello = crate::state::flops::sample_hello();
        hello.config.device = "cuda:0".into();
        let gpu = Body::GpuInfo {
            index: 0,
            name: "NVIDIA A100-SXM4-80GB".into(),
            memory_total_bytes: 80 << 30,
            driver: "580".into(),
            uuid: String::new(),
        };
        let mut records = vec![("libtorch", gpu), ("libtorch", Body::Hello(hello))];
        for n in 0..4 {
            records.push(("libtorch", step(n, 8.0)));
            records.push((
                "script",
                Body::OptimizerStep(samples::optimizer_step(n, Some(9.0))),
            ));
        }
        let state = state(records);
        let text = render(&state, "node-1", &mut KernelNames::default());
        let value = |name: &str| -> Vec<f64> {
            samples(&text, name)
                .iter()
                .map(|l| {
                    assert!(l.contains("worker=\"libtorch\""), "{l}");
                    l.rsplit(' ').next().unwrap().parse().unwrap()
                })
                .collect()
        };
        let (achieved, share) = (
            value("golow_achieved_flops_per_second"),
            value("golow_peak_flops_ratio"),
        );
        assert_eq!((achieved.len(), share.len()), (1, 1), "{text}");
        let tf32_peak = 156e12;
        assert!((share[0] - achieved[0] / tf32_peak).abs() < 1e-9, "{text}");
    }

    #[test]
    fn a_workers_steps_are_a_cumulative_histogram_in_seconds() {
        let state = state(vec![
            ("libtorch", step(0, 900.0)),
            ("libtorch", step(1, 3.0)),
            ("libtorch", step(2, 40.0)),
            ("libtorch", step(3, 40.0)),
        ]);
        let text = render(&state, "node-1", &mut KernelNames::default());
        assert!(
            text.contains("# TYPE golow_step_seconds histogram\n"),
            "{text}"
        );
        let bucket = |le: &str| {
            let line = format!("golow_step_seconds_bucket{{worker=\"libtorch\",le=\"{le}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&line))
                .unwrap_or_else(|| panic!("no {line} in {text}"))
                .to_string()
        };
        // The warm-up step (900 ms) is not measured; 3 ms and twice 40 ms are.
        assert_eq!(bucket("0.001"), "0");
        assert_eq!(bucket("0.005"), "1");
        assert_eq!(bucket("0.025"), "1");
        assert_eq!(bucket("0.05"), "3");
        assert_eq!(bucket("+Inf"), "3");
        assert_eq!(
            samples(&text, "golow_step_seconds_count"),
            ["golow_step_seconds_count{worker=\"libtorch\"} 3"]
        );
        let sum: f64 = samples(&text, "golow_step_seconds_sum")[0]
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 0.083).abs() < 1e-4, "{sum}");
        assert_eq!(
            samples(&text, "golow_steps_total"),
            ["golow_steps_total{worker=\"libtorch\"} 4"]
        );
        assert_eq!(
            samples(&text, "golow_samples_total"),
            ["golow_samples_total{worker=\"libtorch\"} 24"]
        );
        assert_eq!(
            samples(&text, "golow_loss"),
            ["golow_loss{worker=\"libtorch\"} 2.2"]
        );
        // No GPU was read: no GPU family at all, rather than empty ones.
        assert!(!text.contains("golow_gpu_"), "{text}");
    }

    /// A `--cmd` worker whose script reports no samples has steps and step times, and no sample families at all:
    /// neither a count that stays 0 nor a histogram with no observation.
    #[test]
    fn a_worker_without_samples_has_no_empty_sample_families() {
        let optimizer_step =
            |n: u64| Body::OptimizerStep(samples::optimizer_step(n, (n > 0).then_some(20.0)));
        let state = state((0..6).map(|n| ("script", optimizer_step(n))).collect());
        let text = render(&state, "node-1", &mut KernelNames::default());
        assert!(
            samples(&text, "golow_step_seconds_count")[0].ends_with(" 5"),
            "{text}"
        );
        for absent in [
            "golow_sample_seconds",
            "golow_samples_total",
            "golow_throughput",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
    }

    /// Go's float syntax, which Prometheus parses: no value spells out hundreds of digits (a reported -1e308 did).
    #[test]
    fn huge_and_tiny_values_are_written_with_an_exponent() {
        let mut out = Exposition::default();
        for value in [-1e308, 1e15, 123.5, 0.0, 2.5e-9] {
            out.sample("golow_loss", &[], value);
        }
        assert_eq!(
            out.text,
            "golow_loss -1e308\ngolow_loss 1e15\ngolow_loss 123.5\ngolow_loss 0\ngolow_loss 2.5e-9\n"
        );
        for line in out.text.lines() {
            let value = line.split(' ').nth(1).unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn names_from_outside_are_escaped_and_bounded() {
        let hostile = "a\"b\\c\nd\u{1b}[2J".to_string() + &"x".repeat(500);
        let state = state(vec![(hostile.as_str(), step(1, 5.0))]);
        let text = render(&state, "host", &mut KernelNames::default());
        let line = samples(&text, "golow_steps_total")[0];
        assert!(
            line.starts_with("golow_steps_total{worker=\"a\\\"b\\\\c\\nd [2Jxxx"),
            "{line}"
        );
        assert!(!text.contains('\u{1b}'));
        let value = line
            .split("worker=\"")
            .nth(1)
            .unwrap()
            .rsplit_once("\"}")
            .unwrap()
            .0;
        assert!(value.len() <= MAX_LABEL_BYTES + 8, "{}", value.len());
        // Every line is one sample or one comment: nothing a name held broke one.
        for l in text.lines() {
            assert!(l.starts_with("# ") || l.starts_with("golow_"), "{l}");
        }
    }

    #[test]
    fn kernels_are_capped_per_worker_and_the_rest_summed() {
        let kernels = (0..40)
            .map(|i| samples::kernel(&format!("kernel_{i:02}"), 2, 1_000 * (i + 1)))
            .collect();
        let window = Body::Kernels(Box::new(samples::kernel_window(kernels)));
        let state = state(vec![("cudnn", step(1, 5.0)), ("cudnn", window)]);
        let text = render(&state, "host", &mut KernelNames::default());
        let launches = samples(&text, "golow_kernel_launches_total");
        assert_eq!(launches.len(), MAX_KERNELS + 1, "{launches:?}");
        assert!(launches[0].contains("kernel=\"kernel_39\""), "{launches:?}");
        let other = launches.last().unwrap();
        assert_eq!(
            *other,
            format!(
                "golow_kernel_launches_total{{worker=\"cudnn\",kernel=\"other\"}} {}",
                2 * (40 - MAX_KERNELS)
            )
        );
    }

    #[test]
    fn a_distributed_workers_ranks_have_their_own_series_and_the_straggler_is_named() {
        use golow_protocol::event::OptimizerStep;
        let mut records = Vec::new();
        for rank in 0..2 {
            records.push(("ddp", samples::rank_hello(rank, 100 + rank, rank, 2)));
        }
        // Rank 1 arrives 40 ms after rank 0 at every one of 30 steps of 100 ms.
        for step in 0..30u64 {
            for rank in 0..2u32 {
                records.push((
                    "ddp",
                    Body::OptimizerStep(OptimizerStep {
                        process: rank,
                        optimizer: 0,
                        step,
                        interval_ms: (step > 0).then_some(100.0),
                        first_step_ms: None,
                        arrived_ns: Some(step * 100_000_000 + u64::from(rank) * 40_000_000),
                        profiled: false,
                        // Rank 1 waits 10 ms on its data, rank 0 40 ms.
                        phases: (step > 0).then(|| {
                            samples::step_phases(40.0 - 30.0 * f64::from(rank), 20.0, 30.0, 5.0)
                        }),
                        skipped: false,
                        loss: None,
                        t_ns: None,
                    }),
                ));
            }
        }
        let text = render(&state(records), "host", &mut KernelNames::default());
        assert_eq!(
            samples(&text, "golow_step_seconds_count"),
            [
                "golow_step_seconds_count{worker=\"ddp\",rank=\"0\"} 29",
                "golow_step_seconds_count{worker=\"ddp\",rank=\"1\"} 29"
            ]
        );
        assert_eq!(
            samples(&text, "golow_straggler_steps_total"),
            ["golow_straggler_steps_total{worker=\"ddp\",rank=\"1\"} 30"]
        );
        assert_eq!(
            samples(&text, "golow_straggler"),
            ["golow_straggler{worker=\"ddp\",rank=\"1\"} 1"]
        );
        assert!(
            text.contains("golow_arrival_skew_seconds_bucket{worker=\"ddp\",le=\"0.05\"} 30"),
            "{text}"
        );
        assert!(samples(&text, "golow_rank_resident_memory_bytes").is_empty());
        // Each rank's phases: rank 0's 40 ms of data and 5 ms of the rest, rank 1's 10 ms of data and 35 of the rest.
        let counts = samples(&text, "golow_step_phase_seconds_count");
        assert_eq!(counts.len(), 10, "{counts:?}");
        assert_eq!(
            counts[0],
            "golow_step_phase_seconds_count{worker=\"ddp\",rank=\"0\",phase=\"data\"} 29"
        );
        let sums = samples(&text, "golow_step_phase_seconds_sum");
        let sum = |rank: u32, phase: &str| -> f64 {
            let line = sums
                .iter()
                .find(|l| l.contains(&format!("rank=\"{rank}\",phase=\"{phase}\"")))
                .unwrap();
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!((sum(0, "data") - 29.0 * 0.04).abs() < 1e-3, "{sums:?}");
        assert!((sum(1, "data") - 29.0 * 0.01).abs() < 1e-3, "{sums:?}");
        assert!((sum(1, "other") - 29.0 * 0.035).abs() < 1e-3, "{sums:?}");
        assert!((sum(0, "other") - 29.0 * 0.005).abs() < 1e-3, "{sums:?}");
    }

    #[test]
    fn a_ranks_readings_are_its_latest_process_and_never_a_strangers() {
        let hello = |process, pid, rank| samples::rank_hello(process, pid, rank, 2);
        let rss = |pid: u32, rank: u32, mib: u64| Body::Process {
            pid,
            rss_bytes: mib << 20,
            peak_rss_bytes: mib << 20,
            cpu_percent: Some(50.0),
            rank: Some(rank),
            threads: None,
        };
        let records = vec![
            ("ddp", hello(0, 100, 0)),
            ("ddp", hello(1, 101, 1)),
            ("ddp", rss(100, 0, 300)),
            ("ddp", rss(101, 1, 310)),
            // torchrun restarted rank 1 as a new process.
            ("ddp", hello(2, 201, 1)),
            ("ddp", rss(201, 1, 320)),
            // A pid no rank said is its own, and a rank read under another's pid, change nothing.
            ("ddp", rss(999, 0, 9000)),
            ("ddp", rss(100, 1, 9000)),
        ];
        let state = state(records);
        let text = render(&state, "host", &mut KernelNames::default());
        assert_eq!(
            samples(&text, "golow_rank_resident_memory_bytes"),
            [
                format!(
                    "golow_rank_resident_memory_bytes{{worker=\"ddp\",rank=\"0\"}} {}",
                    300 << 20
                ),
                format!(
                    "golow_rank_resident_memory_bytes{{worker=\"ddp\",rank=\"1\"}} {}",
                    320 << 20
                ),
            ]
        );
        assert!(
            samples(&text, "golow_process_resident_memory_bytes").is_empty(),
            "a rank's reading is not the worker's"
        );
        let ranks = crate::state::Summary::from_state(&state).workers[0]
            .ranks
            .clone();
        assert_eq!(
            ranks
                .iter()
                .map(|r| (r.rank, r.peak_host_rss_bytes >> 20))
                .collect::<Vec<_>>(),
            [(0, 300), (1, 320)]
        );
    }

    #[test]
    fn a_kernel_once_named_stays_named_and_other_never_falls() {
        let window = |kernels| Body::Kernels(Box::new(samples::kernel_window(kernels)));
        // 20 kernels: the 16 largest are named; then a small one grows to the largest of all.
        let first = (0..20)
            .map(|i| samples::kernel(&format!("k{i:02}"), 1, 100 + i))
            .collect();
        let mut names = KernelNames::default();
        let mut state = state(vec![("cudnn", window(first))]);
        let other = |text: &str| {
            samples(text, "golow_kernel_launches_total")
                .into_iter()
                .find(|l| l.contains("kernel=\"other\""))
                .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        };
        let before = render(&state, "host", &mut names);
        assert_eq!(other(&before), Some(4.0));
        assert!(!before.contains("kernel=\"k00\""));
        state.apply(&Record::new(
            99.0,
            Some("cudnn".into()),
            window(vec![samples::kernel("k00", 1, 1_000_000)]),
        ));
        let after = render(&state, "host", &mut names);
        assert!(!after.contains("kernel=\"k00\""), "{after}");
        assert_eq!(other(&after), Some(5.0));
        assert_eq!(
            samples(&after, "golow_kernel_launches_total").len(),
            MAX_KERNELS + 1
        );
    }
}
