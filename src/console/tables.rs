//! The tables printed at the end of a headless run, of a sweep and of a comparison.

use super::words::{Describe, bytes, describe, number};
use crate::compare::Judged;
use crate::compare::regression::{Row, Unit, Verdict};
use crate::state::script::SamplesFrom;
use crate::state::{
    ComparisonSummary, FlopsSummary, Percentiles, ScriptSummary, Summary, WorkerStatus,
    WorkerSummary,
};
use golow_protocol::text::printable;

fn ms(p: Option<Percentiles>, pick: fn(&Percentiles) -> f64) -> String {
    p.map(|p| format!("{:.3}", pick(&p)))
        .unwrap_or_else(|| "-".into())
}

/// A figure in a table column: fixed-point while that stays short, else in exponent form, so that a diverging loss
/// or a worker's absurd report cannot print hundreds of digits.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| number(v, digits))
}

pub fn table(summary: &Summary) -> String {
    let mut out = String::new();
    if let Some(c) = &summary.config {
        out.push_str(&describe(c, Describe::Table));
        out.push('\n');
    }
    out.push_str(&format!(
        "{:<12} {:<8} {:>6} {:>11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>9} {:>9} {:>7} {:>9}\n",
        "impl",
        "status",
        "steps",
        "ms/sample",
        "p90",
        "step ms",
        "compute",
        "samples/s",
        "h2d ms",
        "loss 1st",
        "loss end",
        "acc",
        "peak RSS"
    ));
    for w in &summary.workers {
        let status = match w.status {
            WorkerStatus::Ok => "ok",
            WorkerStatus::Failed => "FAILED",
            WorkerStatus::Stopped => "stopped",
            WorkerStatus::Ended => "ended",
            WorkerStatus::Detached => "detached",
        };
        out.push_str(&format!(
            "{:<12} {:<8} {:>6} {:>11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>9} {:>9} {:>7} {:>8}M\n",
            w.implementation,
            status,
            w.steps,
            ms(w.sample_time_ms, |p| p.p50),
            ms(w.sample_time_ms, |p| p.p90),
            ms(w.step_time_ms, |p| p.p50),
            ms(w.compute_ms, |p| p.p50),
            opt(w.throughput_samples_per_s, 1),
            ms(w.h2d_ms, |p| p.p50),
            opt(w.loss.first, 4),
            opt(w.loss.last, 4),
            opt(w.accuracy, 3),
            w.peak_host_rss_bytes / (1 << 20),
        ));
    }
    out.push_str("medians over measured steps (warm-up and profiled steps excluded); samples/s = 1000 / median ms/sample; compute = forward+loss+backward+step (train) or forward+loss (eval); step = h2d+compute, or for --cmd the interval between optimiser steps\n");
    for c in &summary.comparisons {
        out.push_str(&comparison_line(c));
    }
    if let Some(machine) = &summary.machine {
        out.push_str(&format!("machine: {}\n", machine.describe()));
    }
    if let Some(line) = flops_line(summary) {
        out.push_str(&line);
    }
    for w in &summary.workers {
        if let Some(rejected) = &w.protocol_errors {
            out.push_str(&golow_protocol::text::printable(&format!(
                "{}: {} line{} refused, the first: {}\n",
                w.implementation,
                rejected.count,
                if rejected.count == 1 { "" } else { "s" },
                rejected.first
            )));
        }
    }
    if let Some(reason) = &summary.gpu_processes_unavailable {
        out.push_str(&format!("GPU per process: {reason}\n"));
    }
    let eager = summary
        .workers
        .iter()
        .find(|w| w.implementation == "pytorch");
    for w in &summary.workers {
        if let Some(line) = compile_line(w, eager) {
            out.push_str(&line);
        }
        if let Some(line) = w.script.as_ref().and_then(|s| script_line(w, s)) {
            out.push_str(&line);
        }
        if let Some(line) = attached_line(summary, w) {
            out.push_str(&line);
        }
        if let Some(notice) = &w.notice {
            out.push_str(&format!("{}: {notice}\n", w.implementation));
        }
    }
    for w in &summary.workers {
        if let Some(error) = &w.error {
            out.push_str(&format!("\n{} failed: {error}\n", w.implementation));
        }
    }
    out
}

/// How far the built-in levels ran from the hardware: the model's FLOPs per sample, each level's achieved rate and
/// its share of the device's peak; for a ResNet-50 training session, the published rates to set them beside.
fn flops_line(summary: &Summary) -> Option<String> {
    let counted: Vec<(&WorkerSummary, &FlopsSummary)> = summary
        .workers
        .iter()
        .filter_map(|w| Some((w, w.flops.as_ref()?)))
        .collect();
    let (_, first) = counted.first()?;
    let train = first.per_sample > first.forward_per_sample;
    let mut line = format!(
        "flops: {} GFLOP per sample ({}; 2 FLOPs per multiply-add)",
        number(first.per_sample / 1e9, 2),
        if train {
            "forward + backward"
        } else {
            "forward"
        }
    );
    // One session, one device and one math: the first level's peak is every level's.
    if let (Some(peak), Some(math), Some(device)) =
        (first.peak_tflops, &first.peak_math, &first.peak_device)
    {
        line.push_str(&format!(
            " against the {device}'s {} TFLOP/s {math} peak",
            number(peak, 1)
        ));
    }
    let rates: Vec<String> = counted
        .iter()
        .filter_map(|(w, f)| {
            let rate = format!(
                "{} {} TFLOP/s",
                w.implementation,
                number(f.achieved_tflops?, 1)
            );
            Some(match f.share_of_peak {
                Some(share) => format!("{rate} ({}%)", number(share * 100.0, 1)),
                None => rate,
            })
        })
        .collect();
    if !rates.is_empty() {
        line.push_str(&format!(": {}", rates.join(", ")));
    }
    line.push('\n');
    let resnet50 = summary
        .config
        .as_ref()
        .and_then(|c| c.builtin.as_ref())
        .is_some_and(|b| b.model == golow_protocol::config::Model::Resnet50);
    if train && resnet50 {
        let anchors: Vec<String> = crate::state::flops::ANCHORS
            .iter()
            .map(|(what, rate)| format!("{what} {rate:.0}"))
            .collect();
        line.push_str(&format!(
            "published ResNet-50 training, images/s per GPU: {}\n",
            anchors.join("; ")
        ));
    }
    Some(line)
}

/// Two workers of the session as the compare view judges them: the verdict, and the ratio it rests on.
fn comparison_line(c: &ComparisonSummary) -> String {
    let ratio = match (c.ratio, c.low, c.high) {
        (Some(ratio), Some(low), Some(high)) => format!(
            "; {} {}/{} {ratio:.3}, 95% interval [{low:.3}, {high:.3}]",
            c.by.name(),
            c.a,
            c.b
        ),
        _ => String::new(),
    };
    format!("verdict: {}{ratio}\n", c.verdict)
}

/// What compiling cost a level, and when it paid that back against eager `pytorch`, where one ran.
fn compile_line(w: &WorkerSummary, eager: Option<&WorkerSummary>) -> Option<String> {
    let (total, c) = (w.compile_ms?, w.compile.as_ref()?);
    let cache = c
        .cache
        .map(|cache| format!(", Inductor's cache {}", cache.name()))
        .unwrap_or_default();
    let when = if c.ahead_of_time {
        "ahead of time "
    } else {
        ""
    };
    let mut parts = vec![format!(
        "compiled {when}in {} s{cache}",
        opt(Some(c.first_ms / 1e3), 1)
    )];
    if c.recompiles > 0 {
        parts.push(format!(
            "{} recompilations in {} s",
            c.recompiles,
            opt(Some(c.recompile_ms / 1e3), 1)
        ));
    }
    if c.excluded_steps > 0 {
        parts.push(format!(
            "{} steps past the warm-up left out (a compilation fell in them)",
            c.excluded_steps
        ));
    }
    let paid = match w.break_even_steps {
        Some(n) => format!(
            "pays its {} s back against pytorch after {n} steps",
            opt(Some(total / 1e3), 1)
        ),
        None => match eager {
            Some(e) if e.step_time_ms.is_some() && w.step_time_ms.is_some() => {
                "never pays it back against pytorch (no faster per step)".into()
            }
            Some(_) => "too few measured steps to weigh it against pytorch".into(),
            None => "no pytorch worker ran to pay it back against".into(),
        },
    };
    parts.push(paid);
    Some(format!("{}: {}\n", w.implementation, parts.join("; ")))
}

/// A `--cmd` worker's script in one line: its start, optimisers, forward passes and processes, where its steps' time
/// went, where its samples came from and its top three operators; nothing when its script has said nothing of these
/// (a process that only said hello).
fn script_line(w: &WorkerSummary, s: &ScriptSummary) -> Option<String> {
    let (name, operators) = (&w.implementation, &w.top_operators);
    let mut parts = Vec::new();
    if let Some(t) = s.time_to_first_step_s {
        let first = s
            .first_step_ms
            .map(|ms| format!(", which took {}", opt(Some(ms), 1) + " ms"))
            .unwrap_or_default();
        parts.push(format!(
            "first step after {}{first}",
            opt(Some(t), 2) + " s"
        ));
    }
    for o in &s.optimizers {
        let lr = o.lr.map(|lr| format!(" lr {lr}")).unwrap_or_default();
        parts.push(format!(
            "{}{lr}: {} steps, median {} ms",
            o.class.as_deref().unwrap_or("optimizer"),
            o.steps,
            ms(o.step_time_ms, |p| p.p50)
        ));
    }
    match s.steps_counted_by.as_deref() {
        // The model's passes are in its steps' phases.
        Some("backward") => parts.push(
            "steps are its backward passes: it updates its parameters with no optimiser".into(),
        ),
        // A training loop's forward passes before its first step ended (a closure's, a compilation's): worth a
        // word only past the warm-up.
        Some(_) if s.forward_ms.is_some() => parts.push(format!(
            "{} forward passes before its first optimiser step ended, median {} ms each",
            s.forward_passes,
            ms(s.forward_ms, |p| p.p50)
        )),
        Some(_) => {}
        None if s.forward_passes > 0 => parts.push(format!(
            "{} forward passes (no step: an evaluation), median {} ms each, {} ms apart",
            s.forward_passes,
            ms(s.forward_ms, |p| p.p50),
            ms(s.forward_interval_ms, |p| p.p50)
        )),
        None => {}
    }
    if s.processes.len() > 1 || s.more_processes > 0 {
        let each: Vec<String> = s
            .processes
            .iter()
            .map(|p| match p.rank {
                Some(rank) => format!("rank {rank} {} steps", p.steps),
                None => format!("pid {} {} steps", p.pid.unwrap_or(0), p.steps),
            })
            .collect();
        let more = if s.more_processes > 0 {
            format!(" and {} more", s.more_processes)
        } else {
            String::new()
        };
        parts.push(format!(
            "{} processes reported ({}){more}",
            s.processes.len(),
            each.join(", ")
        ));
    }
    if let Some(threads) = s.threads {
        parts.push(format!("torch threads {threads}"));
    }
    if let Some(p) = &s.phases {
        let each = p.each().map(|(phase, v)| {
            format!(
                "{phase} {:.0}% ({})",
                v.share * 100.0,
                crate::state::phases::milliseconds(v.p50_ms)
            )
        });
        let device = w
            .gpu_breakdown
            .map(|b| {
                format!(
                    " (host times; GPU busy {:.0}% of the steps, CUPTI)",
                    b.busy * 100.0
                )
            })
            .unwrap_or_default();
        parts.push(format!(
            "phases of a typical step {}{device}",
            each.join(", ")
        ));
    }
    if let Some(hook) = s
        .hook
        .filter(|h| h.share > crate::state::phases::HOOK_NOTICE_SHARE)
    {
        parts.push(format!(
            "golow's hook takes {} of it ({:.0}%): steps this short are slowed by being watched",
            crate::state::phases::milliseconds(hook.p50_ms),
            hook.share * 100.0
        ));
    }
    if s.samples_from.as_deref() == Some(SamplesFrom::BatchDimension.name()) {
        parts.push(
            "samples per step: each distinct batch the model took once (golow.report(samples=…) overrides)".into(),
        );
    }
    if !operators.is_empty() {
        let top: Vec<String> = operators
            .iter()
            .take(3)
            .map(|o| format!("{} {} ms", o.name, opt(Some(o.self_ms_per_step), 2)))
            .collect();
        let against = match w
            .operators
            .as_ref()
            .map(|o| (o.profiled_step_ms, o.unprofiled_step_ms))
        {
            Some((Some(profiled), Some(plain))) => format!(
                " (a profiled step {} ms, a median one {} ms)",
                opt(Some(profiled), 1),
                opt(Some(plain), 1)
            ),
            _ => String::new(),
        };
        parts.push(format!("top operators {}{against}", top.join(", ")));
    }
    if let Some(off) = w.operators.as_ref().and_then(|o| o.off.as_deref()) {
        parts.push(format!("no more steps profiled: {}", printable(off)));
    }
    (!parts.is_empty()).then(|| format!("{name}: {}\n", parts.join("; ")))
}

/// `golow compare`'s report: what the reader must know first, a line each, then the table.
pub fn comparison(judged: &Judged, threshold: f64) -> String {
    let mut out: String = judged.notes.iter().map(|n| format!("{n}\n")).collect();
    out.push_str(&regression_table(&judged.rows, threshold));
    out
}

/// `golow compare`'s table: one line per implementation and metric, B against A.
fn regression_table(rows: &[Row], threshold: f64) -> String {
    let value = |unit: Unit, v: Option<f64>| match (unit, v) {
        (_, None) => "-".to_string(),
        (Unit::Bytes, Some(v)) if v.is_finite() && v >= 0.0 => bytes(v),
        (_, Some(v)) => opt(Some(v), 4),
    };
    // Paired workers are labelled old→new: the column is as wide as its longest label.
    let width = rows
        .iter()
        .map(|r| r.worker.chars().count())
        .max()
        .unwrap_or(0)
        .max(12);
    let mut out = format!(
        "{:<width$} {:<28} {:>14} {:>14} {:>8} {:>19}  verdict (threshold {:.0}%)\n",
        "impl",
        "metric",
        "A",
        "B",
        "B/A",
        "95% interval",
        threshold * 100.0
    );
    for row in rows {
        let (ratio, interval) = match row.ratio {
            Some(r) if r.low == r.high => (format!("{:.3}", r.ratio), "-".to_string()),
            Some(r) => (
                format!("{:.3}", r.ratio),
                format!("[{:.3}, {:.3}]", r.low, r.high),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        let verdict = match row.verdict() {
            Verdict::NotJudged(reason) => format!("not judged: {reason}"),
            Verdict::Regression => "REGRESSION".into(),
            Verdict::NotComparable => "not comparable".into(),
            Verdict::WithinNoise => "within noise".into(),
            Verdict::Ok => "ok".into(),
        };
        out.push_str(&format!(
            "{:<width$} {:<28} {:>14} {:>14} {:>8} {:>19}  {verdict}\n",
            row.worker,
            row.metric,
            value(row.unit, row.a),
            value(row.unit, row.b),
            ratio,
            interval
        ));
    }
    out
}

/// One line per implementation and cell of a sweep.
pub fn sweep_table(results: &crate::sweep::Results) -> String {
    // With --repeat, each time per sample is a median over sessions, and their range is worth its column.
    let repeated = results.rows.iter().any(|r| r.repeats > 1);
    let range = |r: &crate::sweep::Row| match (r.sample_time_p50_min_ms, r.sample_time_p50_max_ms) {
        (Some(lo), Some(hi)) => format!("{}–{}", number(lo, 3), number(hi, 3)),
        _ => "-".into(),
    };
    let mut out = format!(
        "{:<12} {:>6} {:>6} {:<7} {:>11} {}{:>11} {:>10} {:>10} {:>10}\n",
        "impl",
        "batch",
        "px",
        "status",
        "ms/sample",
        if repeated {
            format!("{:>17} ", "range")
        } else {
            String::new()
        },
        "p90",
        "samples/s",
        "peak RSS",
        "peak GPU"
    );
    let mib = |b: Option<u64>| b.map_or("-".into(), |b| format!("{}M", b >> 20));
    for r in &results.rows {
        let status = match r.status {
            crate::sweep::RowStatus::Ok => "ok",
            crate::sweep::RowStatus::Oom => "oom",
            crate::sweep::RowStatus::Failed => "FAILED",
        };
        out.push_str(&format!(
            "{:<12} {:>6} {:>6} {:<7} {:>11} {}{:>11} {:>10} {:>10} {:>10}\n",
            r.implementation,
            r.batch_size,
            r.resolution,
            status,
            opt(r.sample_time_p50_ms, 3),
            if repeated {
                format!("{:>17} ", range(r))
            } else {
                String::new()
            },
            opt(r.sample_time_p90_ms, 3),
            opt(r.throughput_samples_per_s, 1),
            mib(r.peak_host_rss_bytes),
            mib(r.peak_gpu_mem_bytes),
        ));
    }
    if repeated {
        out.push_str(&format!(
            "medians over {} sessions a cell; range: the least and greatest session's median ms/sample\n",
            results.config.repeat
        ));
    }
    out
}

/// What /proc read of an attached worker's process and its tree: its CPU, threads and memory.
fn attached_line(summary: &Summary, w: &WorkerSummary) -> Option<String> {
    let pid = summary.config.as_ref()?.attached.get(&w.implementation)?;
    let cpu = w
        .host_cpu_percent_mean
        .map_or("-".into(), |c| format!("{c:.1}%"));
    let threads = w.peak_host_threads.map_or("-".into(), |t| t.to_string());
    Some(format!(
        "{}: pid {pid} and its tree: CPU {cpu} of a core on average, {threads} threads at most, peak RSS {}\n",
        w.implementation,
        bytes(w.peak_host_rss_bytes as f64)
    ))
}

#[cfg(test)]
mod tests {
    use super::opt;

    #[test]
    fn bytes_compare_in_the_units_golow_shows_them_in_elsewhere() {
        use crate::compare::regression::{Row, Unit, Worse};
        let row = |metric, unit, a: f64| Row {
            worker: "libtorch".into(),
            metric,
            unit,
            a: Some(a),
            b: Some(a),
            ratio: None,
            worse: Worse::Higher,
            regression: false,
            not_judged: None,
            too_few_steps: false,
        };
        let table = super::regression_table(
            &[
                row("peak host RSS", Unit::Bytes, 632188928.0),
                row("median step time (ms)", Unit::Ms, 12.5),
            ],
            0.05,
        );
        assert!(
            table.contains(" 602.9 MiB ") && !table.contains("632188928"),
            "{table}"
        );
        assert!(table.contains(" 12.5000 "), "{table}");
    }

    #[test]
    fn a_script_that_only_said_hello_gets_no_empty_line() {
        use golow_protocol::event::{Body, Record, ScriptProcess};
        let table = |stepped: bool| {
            let mut state = crate::state::State::default();
            let mut bodies = vec![Body::ScriptProcess(ScriptProcess {
                process: 0,
                pid: 42,
                rank: None,
                local_rank: None,
                world_size: None,
                python: "3.11.7".into(),
                torch: None,
                threads: Some(4),
            })];
            if stepped {
                bodies.push(Body::OptimizerStep(
                    golow_protocol::samples::optimizer_step(0, None),
                ));
            }
            for body in bodies {
                state.apply(&Record::new(0.0, Some("x".into()), body));
            }
            super::table(&crate::state::Summary::from_state(&state))
        };
        let silent = table(false);
        assert!(!silent.lines().any(|l| l.starts_with("x:")), "{silent}");
        let stepped = table(true);
        assert!(
            stepped.contains("x: optimizer: 1 steps, median - ms; torch threads 4\n"),
            "{stepped}"
        );
    }

    /// A built-in level on a GPU in the table gets its FLOPs, rate and share of the peak in the summary and a line of
    /// the table, with the published rates beside a ResNet-50 training session; a `--cmd` worker gets none.
    #[test]
    fn built_in_levels_say_how_far_from_the_gpus_peak_they_ran() {
        use golow_protocol::event::{Body, Record};
        let mut state = crate::state::State::default();
        let mut apply = |worker: Option<&str>, body: Body| {
            state.apply(&Record::new(0.0, worker.map(Into::into), body));
        };
        let Some(Body::SessionStart(session)) =
            golow_protocol::samples::every_body().into_iter().next()
        else {
            unreachable!()
        };
        let session = golow_protocol::config::SessionConfig {
            model: golow_protocol::config::Model::Resnet50,
            mode: golow_protocol::config::Mode::Train,
            ..*session
        };
        apply(None, Body::SessionStart(Box::new(session)));
        apply(
            None,
            Body::GpuInfo {
                index: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                memory_total_bytes: 80 << 30,
                driver: "580".into(),
                uuid: String::new(),
            },
        );
        let mut hello = crate::state::flops::sample_hello();
        hello.implementation = "libtorch".into();
        hello.config.device = "cuda:0".into();
        hello.config.resolution = 224;
        apply(Some("libtorch"), Body::Hello(hello));
        for n in 0..5 {
            // 8 samples in 8 ms: 1,000 samples/s.
            apply(
                Some("libtorch"),
                Body::Step(golow_protocol::samples::step(n, 8.0, false)),
            );
            apply(
                Some("train"),
                Body::OptimizerStep(golow_protocol::samples::optimizer_step(n, Some(9.0))),
            );
        }
        let summary = crate::state::Summary::from_state(&state);
        let flops = summary.workers[0].flops.as_ref().unwrap();
        let achieved = flops.achieved_tflops.unwrap();
        let rate = summary.workers[0].throughput_samples_per_s.unwrap();
        assert!((rate - 1000.0).abs() < 1.0, "{rate}");
        assert!((achieved - flops.per_sample * rate / 1e12).abs() < 1e-9);
        assert!(flops.per_sample > 2.9 * flops.forward_per_sample);
        assert_eq!(flops.peak_tflops, Some(494.5));
        assert_eq!(flops.peak_math.as_deref(), Some("TF32"));
        assert_eq!(flops.share_of_peak, Some(achieved / 494.5));
        assert_eq!(summary.workers[1].flops, None);
        let json = serde_json::to_value(&summary).unwrap();
        assert!(json["workers"][1].get("flops").is_none(), "{json}");
        let table = super::table(&summary);
        let line = table.lines().find(|l| l.starts_with("flops: ")).unwrap();
        assert!(
            line.contains(
                "against the H100 SXM's 494.5 TFLOP/s TF32 peak: libtorch 24.3 TFLOP/s (4.9%)"
            ),
            "{line}"
        );
        assert!(!line.contains("train "), "{line}");
        assert!(
            table.contains("published ResNet-50 training, images/s per GPU: "),
            "{table}"
        );
    }

    /// Where NVML's per-process readings could not be given to the workers, the summary and the table say why.
    #[test]
    fn unavailable_per_process_readings_are_said_in_the_summary_and_the_table() {
        use golow_protocol::event::{Body, Record};
        let mut state = crate::state::State::default();
        let reason = "NVML samples utilisation under the host's process IDs";
        state.apply(&Record::new(
            0.0,
            None,
            Body::GpuProcessesUnavailable {
                reason: reason.into(),
            },
        ));
        let summary = crate::state::Summary::from_state(&state);
        assert_eq!(summary.gpu_processes_unavailable.as_deref(), Some(reason));
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["gpu_processes_unavailable"], reason);
        assert!(
            super::table(&summary).contains(&format!("GPU per process: {reason}\n")),
            "{}",
            super::table(&summary)
        );
        let without = crate::state::Summary::from_state(&crate::state::State::default());
        assert!(
            serde_json::to_value(&without)
                .unwrap()
                .get("gpu_processes_unavailable")
                .is_none()
        );
    }

    /// The summary table of a session in which `compile`, after 5 s of compiling, took `compiled_ms` a step and, with
    /// `eager`, `pytorch` ran too and took its `Some(ms)` a step (with `None`, it measured none).
    fn compile_table(eager: Option<Option<f64>>, compiled_ms: f64) -> String {
        use golow_protocol::config::Mode;
        use golow_protocol::event::{Body, Compile, CompileTrigger, Record};
        let step = |n: u64, ms: f64, warmup: bool| {
            Body::Step(golow_protocol::samples::step(n, ms, warmup))
        };
        let mut records = vec![Record::new(
            0.0,
            Some("compile".into()),
            Body::Compile(Compile {
                step: Some(0),
                phase: Mode::Train,
                trigger: CompileTrigger::Dynamo,
                recompile: false,
                ms: 5_000.0,
                cache_hits: 0,
                cache_misses: 1,
            }),
        )];
        for n in 0..4 {
            records.push(Record::new(
                1.0,
                Some("compile".into()),
                step(n, compiled_ms, n == 0),
            ));
            if let Some(Some(ms)) = eager {
                records.push(Record::new(
                    1.0,
                    Some("pytorch".into()),
                    step(n, ms, n == 0),
                ));
            }
        }
        if eager == Some(None) {
            records.push(Record::new(1.0, Some("pytorch".into()), step(0, 1.0, true)));
        }
        let mut state = crate::state::State::default();
        records.iter().for_each(|r| state.apply(r));
        super::table(&crate::state::Summary::from_state(&state))
    }

    #[test]
    fn a_compiled_level_says_whether_and_when_it_pays_its_compile_time_back() {
        let line = |table: String| {
            table
                .lines()
                .find(|l| l.starts_with("compile: "))
                .unwrap_or_else(|| panic!("{table}"))
                .to_string()
        };
        let paid = line(compile_table(Some(Some(10.0)), 5.0));
        let (head, steps) = paid
            .split_once("; pays its 5.0 s back against pytorch after ")
            .unwrap_or_else(|| panic!("{paid}"));
        assert_eq!(head, "compile: compiled in 5.0 s, Inductor's cache cold");
        // 5 ms saved a step, by medians the histograms keep to three significant digits.
        let steps: u64 = steps.trim_end_matches(" steps").parse().unwrap();
        assert!((995..=1_005).contains(&steps), "{paid}");
        let slower = line(compile_table(Some(Some(5.0)), 10.0));
        assert!(
            slower.ends_with("; never pays it back against pytorch (no faster per step)"),
            "{slower}"
        );
        let unmeasured = line(compile_table(Some(None), 10.0));
        assert!(
            unmeasured.ends_with("; too few measured steps to weigh it against pytorch"),
            "{unmeasured}"
        );
        let alone = line(compile_table(None, 10.0));
        assert!(
            alone.ends_with("; no pytorch worker ran to pay it back against"),
            "{alone}"
        );
    }

    #[test]
    fn figures_never_print_hundreds_of_digits() {
        assert_eq!(opt(Some(2.25), 3), "2.250");
        assert_eq!(opt(None, 3), "-");
        assert_eq!(opt(Some(1e308), 3), "1.00e308");
        assert_eq!(opt(Some(-2.5e7), 1), "-2.50e7");
        // Not finite: the schema's word, as recordings and summaries write it.
        assert_eq!(opt(Some(f64::NAN), 1), "nan");
        assert_eq!(opt(Some(f64::NEG_INFINITY), 1), "-inf");
    }
}
