use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::*;
use golow_protocol::config::{
    GpuPolicy, Mode, Model, Optimiser, Schedule, SessionConfig, WorkerConfig,
};
use golow_protocol::event::{
    Body, Compile, CompileTrigger, Epoch, ExitStatus, Hello, OperatorWindow, Step, Stream,
    WorkerExit,
};

// The integration tests read exported traces the same way.
#[path = "../../tests/common/trace.rs"]
mod trace;
use trace::{Slice, assert_no_thread_goes_back, assert_within, slices_by_thread};

const ODD: &str = "my \"fast\", run";

fn header() -> Value {
    json!({"format": "golow-recording", "version": 1})
}

fn session_start() -> Body {
    Body::SessionStart(Box::new(SessionConfig {
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
        attached: Default::default(),
    }))
}

fn hello(name: &str) -> Body {
    Body::Hello(Box::new(Hello {
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
    }))
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
        start_ns: None,
        end_ns: None,
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
        threads: None,
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
    assert_eq!(rows[0].len(), 41);
    assert_eq!(
        (
            rows[0][0].as_str(),
            rows[0][31].as_str(),
            rows[0][38].as_str()
        ),
        ("t_ms", "profiled", "skipped")
    );
    assert!(rows.iter().all(|row| row.len() == 41));
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
            Some(format!("w{}", i % workers).into()),
            Body::Process {
                pid: 1,
                rss_bytes: 1 << 20,
                peak_rss_bytes: 1 << 20,
                cpu_percent: Some(1.0),
                rank: None,
                threads: None,
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
            phases: None,
            skipped: false,
            loss: None,
            t_ns: None,
        })
    };
    let pass = Body::ForwardPass(ForwardPass {
        process: 0,
        pass: 0,
        ms: 40.0,
        interval_ms: None,
        grad: true,
        t_ns: None,
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
        threads: None,
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

/// A script's step holds its phases, one after another inside it, the rest of the step last; a skipped step says
/// so, and a step counted by its backward pass holds its phases too.
#[test]
fn a_scripts_step_slices_hold_their_phases() {
    use golow_protocol::event::{BackwardPass, OptimizerStep};
    use golow_protocol::samples::{optimizer_step, step_phases};
    let at = |t_ms: f64, body| Record::new(t_ms, Some("train".into()), body);
    let records = vec![
        Record::new(0.0, None, session_start()),
        at(100.0, Body::OptimizerStep(optimizer_step(0, None))),
        at(
            140.0,
            Body::OptimizerStep(OptimizerStep {
                phases: Some(step_phases(10.0, 8.0, 12.0, 4.0)),
                ..optimizer_step(1, Some(40.0))
            }),
        ),
        at(
            190.0,
            Body::OptimizerStep(OptimizerStep {
                skipped: true,
                ..optimizer_step(2, Some(50.0))
            }),
        ),
        at(
            400.0,
            Body::BackwardPass(BackwardPass {
                process: 1,
                pass: 3,
                interval_ms: Some(20.0),
                phases: Some(step_phases(5.0, 5.0, 5.0, 0.0)),
                profiled: false,
                loss: None,
                t_ns: None,
            }),
        ),
    ];
    let mut csv = Vec::new();
    export(
        &header(),
        records.clone().into_iter(),
        Format::Csv,
        &mut csv,
    )
    .unwrap();
    let rows = parse_csv(&String::from_utf8(csv).unwrap());
    let cells = |t_ms: &str, columns: &[&str]| -> Vec<String> {
        let row = rows.iter().find(|r| r[0] == t_ms).unwrap();
        columns
            .iter()
            .map(|c| row[rows[0].iter().position(|h| h == c).unwrap()].clone())
            .collect()
    };
    let phases = [
        "type",
        "interval_ms",
        "data_ms",
        "forward_ms",
        "backward_ms",
        "optimizer_ms",
        "forward_passes",
        "skipped",
    ];
    assert_eq!(
        cells("140.0", &phases),
        [
            "optimizer_step",
            "40.0",
            "10.0",
            "8.0",
            "12.0",
            "4.0",
            "1",
            "false"
        ]
    );
    assert_eq!(cells("190.0", &["skipped"]), ["true"]);
    assert_eq!(
        cells("400.0", &phases[..6]),
        ["backward_pass", "20.0", "5.0", "5.0", "5.0", "0.0"]
    );

    let trace = chrome_trace(records);
    let slices: Vec<(String, f64, f64)> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            (
                e["name"].as_str().unwrap().to_string(),
                ts,
                ts + e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    let named = |name: &str| -> Vec<(f64, f64)> {
        slices
            .iter()
            .filter(|(n, ..)| n == name)
            .map(|&(_, a, b)| (a, b))
            .collect()
    };
    let step = named("step 1")[0];
    assert_eq!(step, (100_000.0, 140_000.0));
    let phases: Vec<(f64, f64)> = ["data", "forward", "backward", "optimizer", "other"]
        .iter()
        .map(|name| named(name)[0])
        .collect();
    assert_eq!(
        phases,
        [
            (100_000.0, 110_000.0),
            (110_000.0, 118_000.0),
            (118_000.0, 130_000.0),
            (130_000.0, 134_000.0),
            (134_000.0, 140_000.0)
        ]
    );
    assert_eq!(named("step 2 skipped"), [(140_000.0, 190_000.0)]);
    assert_eq!(named("backward pass 3"), [(380_000.0, 400_000.0)]);
    assert_eq!(
        named("other").len(),
        2,
        "the backward pass's step holds its phases too"
    );
}

/// The host's monotonic clock when the sessions of the tests below started.
const ORIGIN_NS: u64 = 7_000_000_000_000;

/// A session's start as the hub writes it: with its start on the host's monotonic clock.
fn clocked_session_start(warmup: u64) -> Record {
    let mut start = session_start();
    if let Body::SessionStart(config) = &mut start {
        config.monotonic_origin_ns = Some(ORIGIN_NS);
        config.warmup = warmup;
    }
    Record::new(0.0, None, start)
}

/// A worker's events as the monitor stamps them. A `--cmd` process's hook queues its events and writes the queue
/// with the first event 50 ms or more after its last write (or at once), so each reaches the monitor up to 50 ms
/// after it happened and a few milliseconds of scheduling later; a built-in worker writes each event at once.
struct Stamps {
    worker: &'static str,
    batched: bool,
    flushed_ms: f64,
    queue: Vec<Body>,
    records: Vec<Record>,
    jitter: u64,
}

impl Stamps {
    fn new(worker: &'static str, batched: bool, seed: u64) -> Stamps {
        Stamps {
            worker,
            batched,
            flushed_ms: f64::NEG_INFINITY,
            queue: Vec::new(),
            records: Vec::new(),
            jitter: seed,
        }
    }

    /// `body` said at `at_ms` into the session.
    fn send(&mut self, at_ms: f64, body: Body, at_once: bool) {
        self.queue.push(body);
        if !self.batched || at_once || at_ms - self.flushed_ms >= 50.0 {
            self.flush(at_ms);
        }
    }

    fn flush(&mut self, at_ms: f64) {
        // 0 to 3 ms of scheduling, in eighths of a millisecond.
        self.jitter = self
            .jitter
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let arrival = at_ms + ((self.jitter >> 33) % 25) as f64 / 8.0;
        for body in self.queue.drain(..) {
            self.records
                .push(Record::new(arrival, Some(self.worker.into()), body));
        }
        self.flushed_ms = at_ms;
    }
}

/// `at_ms` into the session, on the host's monotonic clock.
fn host_ns(at_ms: f64) -> Option<u64> {
    Some(ORIGIN_NS + (at_ms * 1e6) as u64)
}

/// What an operator recorder sends: once a window (1 s) has passed since its last, at a step's end, the profiled
/// steps since.
#[derive(Default)]
struct Windows {
    last_ms: f64,
    steps: u64,
    compute_ms: f64,
    /// The last profiled step since the last window.
    last_profiled: Option<String>,
    /// Each window's process, the thread and the name of the step it describes, in the order they were sent.
    described: Vec<(u64, u64, String)>,
}

impl Windows {
    fn profiled(&mut self, step: String, compute_ms: f64) {
        self.steps += 1;
        self.compute_ms += compute_ms;
        self.last_profiled = Some(step);
    }

    /// The window due at `now_ms`, or at once (the process exits), of the process `pid` whose steps go on thread
    /// `tid`.
    fn due(&mut self, now_ms: f64, at_exit: bool, (pid, tid): (u64, u64)) -> Option<Body> {
        if self.steps == 0 || !(at_exit || now_ms - self.last_ms >= 1000.0) {
            return None;
        }
        let described = self.last_profiled.take().unwrap();
        self.described.push((pid, tid, described));
        let op = |name: &str, share: f64| golow_protocol::event::OperatorStats {
            name: name.into(),
            calls: 10 * self.steps,
            self_ns: (self.compute_ms * share * 1e6) as u64,
            total_ns: (self.compute_ms * share * 1e6) as u64,
            shapes: "".into(),
        };
        let window = OperatorWindow {
            process: 0,
            steps: self.steps,
            compute_ms: self.compute_ms,
            every: 4,
            operators: vec![op("aten::addmm", 0.5), op("aten::mm", 0.25)],
            dropped: 0,
        };
        self.last_ms = now_ms;
        (self.steps, self.compute_ms) = (0, 0.0);
        Some(Body::Operators(window))
    }
}

fn script_hello(pid: u32) -> Body {
    Body::ScriptProcess(golow_protocol::event::ScriptProcess {
        process: 0,
        pid,
        rank: None,
        local_rank: None,
        world_size: None,
        python: "3.11.7".into(),
        torch: Some("2.11.0".into()),
        threads: Some(2),
    })
}

fn announced(optimizer: u32, class: &str) -> Body {
    Body::Optimizer(golow_protocol::event::Optimizer {
        process: 0,
        optimizer,
        class: class.into(),
        lr: Some(0.1),
    })
}

/// A GAN as dcgan trains it, 40 iterations of 40 ms from 300 ms: the discriminator's two forward and backward passes
/// (said as backward passes until its optimiser first steps, and its forward passes until then), its SGD step, then
/// the generator's Adam step. One step in four is profiled past the warm-up.
fn gan(windows: &mut Windows) -> Vec<Record> {
    use golow_protocol::event::{BackwardPass, ForwardPass, OptimizerStep};
    use golow_protocol::samples::step_phases;
    let pid = 4242;
    let mut hook = Stamps::new("gan", true, 1);
    hook.send(100.0, script_hello(pid), true);
    for i in 0..40u64 {
        let at = 300.0 + 40.0 * i as f64;
        if i == 0 {
            for (pass, (start, end)) in [(at + 2.0, at + 6.0), (at + 9.0, at + 13.0)]
                .into_iter()
                .enumerate()
            {
                let forward = ForwardPass {
                    process: 0,
                    pass: pass as u64,
                    ms: end - start,
                    interval_ms: (pass > 0).then_some(7.0),
                    grad: true,
                    t_ns: host_ns(end),
                };
                hook.send(end, Body::ForwardPass(forward), false);
                let backward = BackwardPass {
                    process: 0,
                    pass: pass as u64,
                    interval_ms: (pass > 0).then_some(7.0),
                    phases: (pass > 0).then(|| step_phases(0.0, 4.0, 3.0, 0.0)),
                    profiled: false,
                    loss: Some(0.7),
                    t_ns: host_ns(end + 3.0),
                };
                hook.send(end + 3.0, Body::BackwardPass(backward), false);
            }
            hook.send(at + 18.0, announced(0, "SGD"), false);
        }
        let profiled = i >= 6 && i % 4 == 2;
        let step = OptimizerStep {
            step: i,
            interval_ms: (i > 0).then_some(40.0),
            first_step_ms: (i == 0).then_some(16.0),
            profiled,
            phases: (i > 0).then(|| step_phases(2.0, 8.0, 6.0, 2.0)),
            loss: Some(1.5),
            t_ns: host_ns(at + 18.0),
            ..golow_protocol::samples::optimizer_step(i, None)
        };
        hook.send(at + 18.0, Body::OptimizerStep(step), i == 0);
        if profiled {
            windows.profiled(format!("step {i}"), 40.0);
        }
        if let Some(window) = windows.due(at + 18.0, false, (pid.into(), 1)) {
            hook.send(at + 18.0, window, false);
        }
        if i == 0 {
            hook.send(at + 30.0, announced(1, "Adam"), false);
        }
        let generator = OptimizerStep {
            optimizer: 1,
            interval_ms: (i > 0).then_some(40.0),
            t_ns: host_ns(at + 30.0),
            ..golow_protocol::samples::optimizer_step(i, None)
        };
        hook.send(at + 30.0, Body::OptimizerStep(generator), false);
    }
    let end = 300.0 + 40.0 * 40.0;
    if let Some(window) = windows.due(end, true, (pid.into(), 1)) {
        hook.send(end, window, false);
    }
    hook.flush(end);
    hook.records
}

/// A script that updates its parameters by hand, 50 iterations of 30 ms from 250 ms: each a forward pass and a
/// backward pass, its step; one in five profiled past the warm-up.
fn by_hand(windows: &mut Windows) -> Vec<Record> {
    use golow_protocol::event::{BackwardPass, ForwardPass};
    let pid = 5151;
    let mut hook = Stamps::new("by hand", true, 2);
    hook.send(200.0, script_hello(pid), true);
    for k in 0..50u64 {
        let at = 250.0 + 30.0 * k as f64;
        let forward = ForwardPass {
            process: 0,
            pass: k,
            ms: 7.0,
            interval_ms: (k > 0).then_some(30.0),
            grad: true,
            t_ns: host_ns(at + 10.0),
        };
        hook.send(at + 10.0, Body::ForwardPass(forward), false);
        let profiled = k >= 5 && k % 5 == 0;
        let pass = BackwardPass {
            process: 0,
            pass: k,
            interval_ms: (k > 0).then_some(30.0),
            phases: (k > 0).then(|| golow_protocol::samples::step_phases(3.0, 7.0, 10.0, 0.0)),
            profiled,
            loss: Some(0.5),
            t_ns: host_ns(at + 20.0),
        };
        hook.send(at + 20.0, Body::BackwardPass(pass), k == 0);
        if profiled {
            windows.profiled(format!("backward pass {k}"), 30.0);
        }
        if let Some(window) = windows.due(at + 20.0, false, (pid.into(), 999)) {
            hook.send(at + 20.0, window, false);
        }
    }
    let end = 250.0 + 30.0 * 50.0;
    if let Some(window) = windows.due(end, true, (pid.into(), 999)) {
        hook.send(end, window, false);
    }
    hook.flush(end);
    hook.records
}

/// A built-in worker's 30 steps of 100 ms from 1 s, the first two a warm-up, one in five profiled past them.
fn builtin(windows: &mut Windows) -> Vec<Record> {
    let mut worker = Stamps::new("libtorch", false, 3);
    for n in 0..30u64 {
        let end = 1000.0 + 100.0 * (n + 1) as f64;
        let profiled = n >= 5 && n % 5 == 0;
        let step = Step {
            step: n,
            warmup: n < 2,
            profiled,
            data_ms: 5.0,
            compute_ms: 95.0,
            ..match step(n, None) {
                Body::Step(step) => step,
                _ => unreachable!(),
            }
        };
        worker.send(end, Body::Step(step), true);
        if profiled {
            let name = format!("step {n}");
            windows.profiled(name, 95.0);
        }
        // Its trace process is numbered as it appears: 0 stands for it until the trace is read.
        if let Some(window) = windows.due(end, false, (0, 1)) {
            worker.send(end, window, true);
        }
    }
    worker.records
}

/// The records of a session of the three workers above, as it is recorded, with the steps each window describes.
fn clocked_session() -> (Vec<Record>, Vec<(u64, u64, String)>) {
    let mut windows = [Windows::default(), Windows::default(), Windows::default()];
    let mut records = vec![clocked_session_start(2)];
    records.extend(builtin(&mut windows[0]));
    records.extend(gan(&mut windows[1]));
    records.extend(by_hand(&mut windows[2]));
    records.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    let described = windows.into_iter().flat_map(|w| w.described).collect();
    (records, described)
}

/// The slice named `name` on thread `thread`.
fn slice_named<'s>(
    threads: &'s HashMap<(u64, u64), Vec<Slice>>,
    thread: (u64, u64),
    name: &str,
) -> &'s Slice {
    threads[&thread]
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name} on {thread:?}"))
}

/// A script's events are placed by when they ended, on the session's clock, however late their batch arrived: each
/// operator window on the profiled step it describes, each forward pass in its step, and no thread goes back.
#[test]
fn a_trace_places_each_event_when_it_happened_and_windows_on_the_steps_they_describe() {
    let (records, described) = clocked_session();
    let trace = chrome_trace(records);
    assert_no_thread_goes_back(&trace);
    let threads = slices_by_thread(&trace);
    // Step 5 of the GAN's first optimiser ended at 518 ms, and began 40 ms before.
    let step = slice_named(&threads, (4242, 1), "step 5");
    assert_eq!((step.start, step.end), (478_000.0, 518_000.0));
    let first = slice_named(&threads, (4242, 1), "step 0");
    assert_eq!((first.start, first.end), (302_000.0, 318_000.0));
    for forward in ["forward 0", "forward 1"] {
        assert_within(slice_named(&threads, (4242, 0), forward), first, 0.0);
    }
    for k in 1..50 {
        let pass = slice_named(&threads, (5151, 999), &format!("backward pass {k}"));
        assert_within(
            slice_named(&threads, (5151, 0), &format!("forward {k}")),
            pass,
            0.0,
        );
    }
    let libtorch = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "process_name" && e["args"]["name"] == "libtorch")
        .unwrap()["pid"]
        .as_u64()
        .unwrap();
    let mut drawn: HashMap<u64, Vec<&Slice>> = HashMap::new();
    for ((pid, _), slices) in &threads {
        let windows = slices.iter().filter(|s| s.name.starts_with("operators: "));
        drawn.entry(*pid).or_default().extend(windows);
    }
    for pid in [libtorch, 4242, 5151] {
        let steps: Vec<_> = described
            .iter()
            .filter(|d| d.0 == pid || (d.0 == 0 && pid == libtorch))
            .collect();
        assert!(steps.len() >= 2, "{described:?}");
        assert_eq!(drawn[&pid].len(), steps.len(), "process {pid}");
        for (window, (_, tid, step)) in drawn[&pid].iter().zip(steps) {
            assert_within(window, slice_named(&threads, (pid, *tid), step), 0.0);
        }
    }
}

/// A stamp that cannot be true (before the session, past its record's arrival) places nothing: the record's arrival
/// does, as it does in a recording without stamps or without the session's start on the host's clock.
#[test]
fn an_impossible_stamp_or_none_places_an_event_at_its_arrival() {
    use golow_protocol::event::OptimizerStep;
    let at = |t_ms: f64, step: u64, t_ns: Option<u64>| {
        let step = OptimizerStep {
            t_ns,
            ..golow_protocol::samples::optimizer_step(step, Some(10.0))
        };
        Record::new(t_ms, Some("train".into()), Body::OptimizerStep(step))
    };
    let records = |start: Record| {
        vec![
            start,
            at(100.0, 0, Some(0)),
            at(200.0, 1, Some(u64::MAX)),
            at(300.0, 2, host_ns(302.0)),
            at(400.0, 3, None),
            at(500.0, 4, host_ns(460.0)),
            at(600.0, 5, host_ns(600.5)),
        ]
    };
    let ends = |trace: &Value| -> Vec<f64> {
        slices_by_thread(trace)
            .into_values()
            .flatten()
            .filter(|s| s.name.starts_with("step "))
            .map(|s| s.end)
            .collect()
    };
    let clocked = chrome_trace(records(clocked_session_start(0)));
    assert_eq!(
        ends(&clocked),
        [
            100_000.0, 200_000.0, 300_000.0, 400_000.0, 460_000.0, 600_500.0
        ],
        "a batch's step where it ended; a millisecond past its arrival for the stamps' rounding, no more"
    );
    let unclocked = chrome_trace(records(Record::new(0.0, None, session_start())));
    assert_eq!(
        ends(&unclocked),
        [
            100_000.0, 200_000.0, 300_000.0, 400_000.0, 500_000.0, 600_000.0
        ]
    );
}

/// A recording's optimiser past the hook's cap shares the last optimiser's thread: its steps land on neither the
/// backward passes' thread nor the operators'.
#[test]
fn an_optimiser_past_the_cap_draws_on_the_last_optimisers_thread() {
    use golow_protocol::event::OptimizerStep;
    use golow_protocol::script::MAX_OPTIMIZERS;
    let records = [15, 998, 999, u32::MAX].map(|optimizer| {
        let step = OptimizerStep {
            optimizer,
            ..golow_protocol::samples::optimizer_step(0, Some(10.0))
        };
        Record::new(100.0, Some("train".into()), Body::OptimizerStep(step))
    });
    let trace = chrome_trace(records.into());
    let threads: BTreeSet<u64> = slices_by_thread(&trace)
        .into_keys()
        .map(|(_, tid)| tid)
        .collect();
    assert_eq!(threads, [u64::from(MAX_OPTIMIZERS)].into());
}

/// Every step's row says whether it was a warm-up, profiled or skipped step, as the fold counted it, and an
/// optimiser step names its optimiser: filtering on the three keeps exactly the steps golow measured.
#[test]
fn every_steps_row_says_its_flags_and_optimiser_and_the_filter_keeps_the_measured_steps() {
    let (records, _) = clocked_session();
    let mut state = crate::state::State::default();
    for record in &records {
        state.apply(record);
    }
    let mut out = Vec::new();
    export(&header(), records.into_iter(), Format::Csv, &mut out).unwrap();
    let rows = parse_csv(&String::from_utf8(out).unwrap());
    let column = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    let [kind, worker, interval] = ["type", "worker", "interval_ms"].map(column);
    let flags = ["warmup", "profiled", "skipped"].map(column);
    let steps = ["step", "optimizer_step", "backward_pass"];
    let step_rows: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| steps.contains(&r[kind].as_str()))
        .collect();
    assert_eq!(step_rows.len(), 30 + 2 + 2 * 40 + 50);
    for row in &step_rows {
        assert!(
            flags.iter().all(|&f| row[f] == "true" || row[f] == "false"),
            "{row:?}"
        );
    }
    let [class, index] = ["optimizer", "optimizer_index"].map(column);
    let optimizers: BTreeSet<(&str, &str)> = step_rows
        .iter()
        .filter(|r| r[kind] == "optimizer_step")
        .map(|r| (r[index].as_str(), r[class].as_str()))
        .collect();
    assert_eq!(optimizers, [("0", "SGD"), ("1", "Adam")].into());
    let mut warm: HashMap<(&str, &str, &str), u32> = HashMap::new();
    for r in step_rows.iter().filter(|r| r[flags[0]] == "true") {
        *warm
            .entry((r[worker].as_str(), r[kind].as_str(), r[index].as_str()))
            .or_default() += 1;
    }
    let each_two: HashMap<(&str, &str, &str), u32> = [
        ("gan", "backward_pass", ""),
        ("gan", "optimizer_step", "0"),
        ("gan", "optimizer_step", "1"),
        ("by hand", "backward_pass", ""),
        ("libtorch", "step", ""),
    ]
    .into_iter()
    .map(|key| (key, 2))
    .collect();
    assert_eq!(
        warm, each_two,
        "the first two steps of each optimiser, of the passes counted as steps, and of the built-in worker"
    );
    // The worker's own steps: its first optimiser's, its backward passes while it has none, a built-in's steps.
    let measured = |name: &str, of: &dyn Fn(&Vec<String>) -> bool| {
        step_rows
            .iter()
            .filter(|r| r[worker] == name && of(r) && flags.iter().all(|&f| r[f] == "false"))
            .filter(|r| r[kind] == "step" || !r[interval].is_empty())
            .count() as u64
    };
    let lead = |r: &Vec<String>| r[kind] == "optimizer_step" && r[index] == "0";
    let pass = |r: &Vec<String>| r[kind] == "backward_pass";
    let step = |r: &Vec<String>| r[kind] == "step";
    for (name, of) in [
        ("gan", &lead as &dyn Fn(&Vec<String>) -> bool),
        ("by hand", &pass),
        ("libtorch", &step),
    ] {
        let folded = state.worker(name).unwrap();
        assert_eq!(measured(name, of), folded.step_time.len(), "{name}");
        assert!(folded.step_time.len() > 20, "{name}");
    }
}
