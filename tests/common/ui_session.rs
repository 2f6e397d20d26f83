//! A constructed session for UI tests and the render benchmark: every number on screen is known.

use golow::state::State;
use golow_protocol::config::{
    GpuPolicy, Mode, Model, Optimiser, Schedule, SessionConfig, WorkerConfig,
};
use golow_protocol::event::{
    Body, Breakdown, CopyKind, CopyStats, Epoch, Hello, KernelStats, KernelWindow, MemoryKind,
    Name, OperatorStats, OperatorWindow, Record, Step,
};

const WORKERS: [&str; 3] = ["libtorch", "pytorch", "torchscript"];

fn worker_config(device: &str) -> WorkerConfig {
    WorkerConfig {
        model: Model::Resnet50,
        mode: Mode::Train,
        dataset: "synthetic".into(),
        data_dir: "/session/data".into(),
        weights: "/session/weights.safetensors".into(),
        torchscript: None,
        aoti: None,
        channels: 3,
        classes: 10,
        batch_size: 32,
        resolution: 224,
        steps: 200,
        warmup: 2,
        device: device.into(),
        threads: 16,
        seed: 0,
        pinned: true,
        optimiser: Optimiser::default(),
        gpu_policy: GpuPolicy::default(),
        compile_mode: Default::default(),
        ops_every: 10,
        ops_library: None,
    }
}

/// The first record of a session of `workers` on `device`.
fn session_start(workers: Vec<String>, device: &str, schedule: Schedule) -> Record {
    Record::new(
        0.0,
        None,
        Body::SessionStart(Box::new(SessionConfig {
            workers,
            commands: Default::default(),
            model: Model::Resnet50,
            dataset: "synthetic".into(),
            mode: Mode::Train,
            batch_size: 32,
            resolution: 224,
            steps: 200,
            warmup: 2,
            device: device.into(),
            threads: 16,
            schedule,
            seed: 0,
            pinned: true,
            optimiser: Optimiser::default(),
            gpu_policy: Some(GpuPolicy::default()),
            compile_mode: Default::default(),
            command_env: Default::default(),
            stall_after_s: golow_protocol::config::DEFAULT_STALL_AFTER_S,
            monotonic_origin_ns: None,
            ops_every: 10,
            attached: Default::default(),
        })),
    )
}

/// What NVML's absence says.
fn no_gpu() -> Record {
    Record::new(
        1.0,
        None,
        Body::GpuUnavailable {
            reason: "libnvidia-ml.so.1 not found".into(),
        },
    )
}

/// A session of three workers, `steps` steps each at 4 steps a second, with a GPU or without one.
pub fn session(gpu: bool, steps: u64) -> State {
    let mut state = State::default();
    for r in &records(gpu, steps) {
        state.apply(r);
    }
    state
}

/// The records of `session`, in order.
pub fn records(gpu: bool, steps: u64) -> Vec<Record> {
    let device = if gpu { "cuda:0" } else { "cpu" };
    let workers = WORKERS.iter().map(|w| w.to_string()).collect();
    let mut records = vec![session_start(workers, device, Schedule::Alternate)];
    if gpu {
        records.push(Record::new(
            1.0,
            None,
            Body::GpuInfo {
                index: 0,
                name: "NVIDIA H200".into(),
                memory_total_bytes: 150_000_000_000,
                driver: "580.65".into(),
                uuid: "GPU-1f2e3d4c-0000-4000-8000-000000000000".into(),
            },
        ));
    } else {
        records.push(no_gpu());
    }
    for (w, name) in WORKERS.iter().enumerate() {
        let worker = Some(Name::from(*name));
        records.push(Record::new(
            5.0,
            worker.clone(),
            Body::WorkerStarted {
                pid: 100 + w as u32,
                command: vec![],
            },
        ));
        let hello = Hello {
            implementation: name.to_string(),
            pid: 100 + w as u32,
            versions: Default::default(),
            device: device.into(),
            config: worker_config(device),
        };
        records.push(Record::new(10.0, worker, Body::Hello(Box::new(hello))));
    }
    // Per-worker cost: pytorch slowest, libtorch fastest; a little deterministic jitter.
    let base = [20.0, 24.0, 21.0];
    for step in 0..steps {
        if step % 4 == 0 {
            records.push(Record::new(
                1000.0 + step as f64 * 250.0,
                None,
                Body::MachineLoad {
                    load_1m: 3.5,
                    busy_percent: 97.0,
                    steal_percent: 0.5,
                    others_percent: 4.0,
                    cpu_mhz: Some(2600.0),
                },
            ));
        }
        for (w, name) in WORKERS.iter().enumerate() {
            let t_ms = 1000.0 + step as f64 * 250.0 + w as f64 * 80.0;
            let jitter = ((step * 7 + w as u64 * 3) % 5) as f64 * 0.2;
            let worker = Some(Name::from(*name));
            let profiled = step >= 2 && (step - 2) % 10 == 0;
            records.push(Record::new(
                t_ms,
                worker.clone(),
                Body::Step(Step {
                    step,
                    epoch: step / 40,
                    phase: Mode::Train,
                    batch_size: 32,
                    data_ms: 1.0,
                    h2d_ms: gpu.then_some(0.8 + w as f64 * 0.1),
                    h2d_bytes: gpu.then_some(19_267_840),
                    compute_ms: base[w] + jitter,
                    loss: 2.3 * (-(step as f64) / 60.0).exp() + 0.1 * w as f64,
                    correct: (step as u32 * 32 / 100).min(32),
                    warmup: step < 2,
                    profiled,
                    start_ns: None,
                    end_ns: None,
                }),
            ));
            if profiled {
                records.push(Record::new(
                    t_ms + 0.5,
                    worker.clone(),
                    Body::Operators(operator_window(w, base[w] + jitter)),
                ));
            }
            if step % 2 == 0 {
                records.push(Record::new(
                    t_ms + 1.0,
                    worker.clone(),
                    Body::Process {
                        pid: 100 + w as u32,
                        rss_bytes: (2_000 + 300 * w as u64 + step) << 20,
                        peak_rss_bytes: (2_000 + 300 * w as u64 + step) << 20,
                        cpu_percent: Some(95.0 + w as f64 * 10.0),
                        rank: None,
                        threads: None,
                    },
                ));
                if gpu {
                    records.push(Record::new(
                        t_ms + 2.0,
                        worker.clone(),
                        Body::GpuProcess {
                            pid: 100 + w as u32,
                            index: 0,
                            memory_bytes: Some((3 + w as u64) << 30),
                            sm_percent: Some(60 + 10 * w as u32),
                            last_seen_us: Some(step),
                            rank: None,
                        },
                    ));
                }
            }
            if step == 39 {
                records.push(Record::new(
                    t_ms + 3.0,
                    worker,
                    Body::Epoch(Epoch {
                        epoch: 0,
                        complete: true,
                        train_loss: Some(1.5),
                        train_accuracy: Some(0.21 + 0.01 * w as f64),
                        eval_loss: Some(1.7),
                        eval_accuracy: Some(0.18 + 0.01 * w as f64),
                    }),
                ));
            }
        }
        if gpu && step % 4 == 3 {
            for (w, name) in WORKERS.iter().enumerate() {
                records.push(Record::new(
                    1000.0 + step as f64 * 250.0 + 210.0,
                    Some(Name::from(*name)),
                    Body::Kernels(Box::new(kernel_window(step, w))),
                ));
            }
        }
        if gpu && step % 2 == 1 {
            records.push(Record::new(
                1000.0 + step as f64 * 250.0 + 220.0,
                None,
                Body::GpuPcie {
                    index: 0,
                    rx_bytes_per_s: Some(18_000_000_000 + step * 10_000_000),
                    tx_bytes_per_s: Some(400_000_000),
                },
            ));
        }
        if gpu && step % 2 == 0 {
            records.push(Record::new(
                1000.0 + step as f64 * 250.0 + 200.0,
                None,
                Body::GpuDevice {
                    index: 0,
                    utilization_percent: Some(70 + (step % 20) as u32),
                    memory_used_bytes: Some(12 << 30),
                    power_watts: Some(420.0),
                    sm_clock_mhz: Some(1980),
                },
            ));
        }
    }
    records
}

/// One profiled step's operators of worker `w`, whose compute took `compute_ms`: ResNet-50's usual top operators
/// at shares of it that differ a little per worker, Python's SGD step in `pytorch` (with input shapes, as its
/// profiler gives them, some of them not kept) and libtorch's `mul` elsewhere.
fn operator_window(w: usize, compute_ms: f64) -> OperatorWindow {
    let op = |name: &str, calls: u64, share: f64| OperatorStats {
        name: name.into(),
        calls,
        self_ns: (compute_ms * share * 1e6) as u64,
        total_ns: (compute_ms * (share + 0.02) * 1e6) as u64,
        shapes: if w == 1 && name.ends_with("convolution") {
            "[32, 64, 56, 56] [64, 64, 3, 3]".into()
        } else {
            Default::default()
        },
    };
    let mut operators = vec![
        op("aten::convolution_backward", 53, 0.38 - 0.01 * w as f64),
        op("aten::mkldnn_convolution", 53, 0.26),
        op("aten::native_batch_norm_backward", 53, 0.10),
        op("aten::native_batch_norm", 53, 0.07),
        op("aten::add_", 177, 0.05),
        op("aten::threshold_backward", 49, 0.04),
        op("aten::relu_", 49, 0.03),
    ];
    if w == 1 {
        operators.push(op("Optimizer.step#SGD.step", 1, 0.04));
        operators.push(op("aten::mul_", 161, 0.02));
    } else {
        operators.push(op("aten::mul", 161, 0.03));
    }
    OperatorWindow {
        process: 0,
        steps: 1,
        compute_ms,
        every: 10,
        operators,
        // PyTorch's profiler sees more input shapes per operator than are kept.
        dropped: if w == 1 { 1257 } else { 0 },
    }
}

/// A second of one worker's GPU activity: an elementwise kernel whose grid differs between the
/// implementations (the seed paper's ReLU finding), a convolution, a GEMM, and the input copy.
fn kernel_window(step: u64, w: usize) -> KernelWindow {
    let stats =
        |name: &str, count: u64, mean_ns: u64, grid: [u32; 3], block: [u32; 3]| KernelStats {
            name: name.into(),
            count,
            total_ns: count * mean_ns,
            max_ns: mean_ns * 2,
            grid,
            block,
            shapes: 1,
            registers_per_thread: 32,
            shared_bytes: 0,
            grid_histogram: vec![(grid, count)],
        };
    let relu_grid = if w == 1 { [1024, 2, 1] } else { [512, 2, 1] };
    let start = step * 250_000_000;
    KernelWindow {
        window_start_ns: start,
        window_end_ns: start + 1_000_000_000,
        kernels: vec![
            stats(
                "cudnn::bn_fw_tr_1C11_kernel_NCHW",
                212,
                180_000,
                [64, 32, 1],
                [512, 1, 1],
            ),
            stats(
                "sm90_xmma_fprop_implicit_gemm",
                212,
                1_900_000 + 100_000 * w as u64,
                [14, 14, 8],
                [256, 1, 1],
            ),
            KernelStats {
                shapes: 2,
                grid_histogram: vec![(relu_grid, 147), ([256, 1, 1], 49)],
                ..stats(
                    "at::native::vectorized_elementwise_kernel",
                    196,
                    40_000,
                    relu_grid,
                    [128, 1, 1],
                )
            },
            stats("cutlass::Kernel", 4, 250_000, [8, 8, 1], [128, 1, 1]),
        ],
        copies: vec![CopyStats {
            kind: CopyKind::HostToDevice,
            src: MemoryKind::Pinned,
            count: 4,
            bytes: 4 * 19_267_840,
            total_ns: 4 * 800_000,
        }],
        breakdown: Breakdown {
            busy: 0.80 - 0.05 * w as f64,
            copy: 0.02,
            idle: 0.18 + 0.05 * w as f64,
        },
        dropped_records: 0,
        invalid_records: 0,
        dropped_windows: 0,
        monotonic_start_ns: None,
        monotonic_end_ns: None,
        timeline: None,
    }
}

/// Two `--cmd` workers of 4 ranks each on a machine without a GPU, `steps` steps at 4 a second: `ddp`, whose rank 3
/// begins its backward pass 30 ms after the others from step 20 on, and `ddp-fixed`, whose ranks arrive within
/// 0.2 ms of each other. Each rank's process is read every other step.
pub fn distributed_session(steps: u64) -> State {
    let mut state = State::default();
    for r in &distributed_records(steps) {
        state.apply(r);
    }
    state
}

/// The records of `distributed_session`, in order.
pub fn distributed_records(steps: u64) -> Vec<Record> {
    const JOBS: [&str; 2] = ["ddp", "ddp-fixed"];
    let mut start = session_start(
        JOBS.iter().map(|w| w.to_string()).collect(),
        "cpu",
        Schedule::Parallel,
    );
    if let Body::SessionStart(config) = &mut start.body {
        config.commands = JOBS
            .iter()
            .map(|w| (w.to_string(), "torchrun --nproc-per-node 4 train.py".into()))
            .collect();
    }
    let mut records = vec![start, no_gpu()];
    for (j, job) in JOBS.iter().enumerate() {
        let worker = Some(Name::from(*job));
        let launcher = 200 + 10 * j as u32;
        records.push(Record::new(
            5.0,
            worker.clone(),
            Body::WorkerStarted {
                pid: launcher,
                command: vec![],
            },
        ));
        for rank in 0..4u32 {
            records.push(Record::new(
                900.0,
                worker.clone(),
                golow_protocol::samples::rank_hello(rank, launcher + 1 + rank, rank, 4),
            ));
        }
    }
    for step in 0..steps {
        for (j, job) in JOBS.iter().enumerate() {
            let launcher = 200 + 10 * j as u32;
            let t_ms = 1000.0 + step as f64 * 250.0 + j as f64 * 40.0;
            for rank in 0..4u32 {
                let late_ms = match (j, rank) {
                    (0, 3) if step >= 20 => 30.0,
                    _ => f64::from((rank + step as u32) % 4) * 0.05,
                };
                let step_ms = 250.0 + f64::from(rank) * 0.5 + (step % 3) as f64;
                records.push(Record::new(
                    t_ms + f64::from(rank),
                    Some(Name::from(*job)),
                    Body::OptimizerStep(golow_protocol::event::OptimizerStep {
                        process: rank,
                        optimizer: 0,
                        step,
                        interval_ms: (step > 0).then_some(step_ms),
                        first_step_ms: None,
                        arrived_ns: Some(step * 250_000_000 + (late_ms * 1e6) as u64),
                        profiled: false,
                        phases: None,
                        skipped: false,
                        loss: None,
                        t_ns: None,
                    }),
                ));
                if step % 2 == 0 {
                    records.push(Record::new(
                        t_ms + 100.0,
                        Some(Name::from(*job)),
                        Body::Process {
                            pid: launcher + 1 + rank,
                            rss_bytes: (900 + 10 * u64::from(rank)) << 20,
                            peak_rss_bytes: (950 + 10 * u64::from(rank)) << 20,
                            cpu_percent: Some(95.0 + f64::from(rank)),
                            rank: Some(rank),
                            threads: None,
                        },
                    ));
                }
            }
            if step % 2 == 0 {
                records.push(Record::new(
                    t_ms + 100.0,
                    Some(Name::from(*job)),
                    Body::Process {
                        pid: launcher,
                        rss_bytes: 4000 << 20,
                        peak_rss_bytes: 4100 << 20,
                        cpu_percent: Some(390.0),
                        rank: None,
                        threads: None,
                    },
                ));
            }
        }
    }
    records
}

/// Two single-process `--cmd` workers on a machine without a GPU, `steps` optimiser steps each with their phases:
/// `loader`, whose 100 ms steps wait 60 ms on data (input-bound), and `compute`, whose 50 ms steps are mostly forward
/// and backward passes (data 2, forward 18, backward 20, optimizer 5, other 5 ms).
pub fn scripted_session(steps: u64) -> State {
    const JOBS: [(&str, f64, [f64; 4]); 2] = [
        ("loader", 100.0, [60.0, 15.0, 15.0, 5.0]),
        ("compute", 50.0, [2.0, 18.0, 20.0, 5.0]),
    ];
    let mut start = session_start(
        JOBS.iter().map(|(w, ..)| w.to_string()).collect(),
        "cpu",
        Schedule::Parallel,
    );
    if let Body::SessionStart(config) = &mut start.body {
        config.commands = JOBS
            .iter()
            .map(|(w, ..)| (w.to_string(), format!("python {w}.py")))
            .collect();
    }
    let mut records = vec![start, no_gpu()];
    for (j, (job, _, _)) in JOBS.iter().enumerate() {
        let worker = Some(Name::from(*job));
        let pid = 300 + j as u32;
        records.push(Record::new(
            5.0,
            worker.clone(),
            Body::WorkerStarted {
                pid,
                command: vec![],
            },
        ));
        let Body::ScriptProcess(mut hello) = golow_protocol::samples::rank_hello(0, pid, 0, 1)
        else {
            unreachable!()
        };
        (hello.rank, hello.local_rank, hello.world_size) = (None, None, None);
        records.push(Record::new(900.0, worker, Body::ScriptProcess(hello)));
    }
    for step in 0..steps {
        for (job, interval_ms, [data, forward, backward, optimizer]) in JOBS {
            let mut event = golow_protocol::samples::optimizer_step(step, None);
            if step > 0 {
                event.interval_ms = Some(interval_ms);
                event.phases = Some(golow_protocol::samples::step_phases(
                    data, forward, backward, optimizer,
                ));
            }
            records.push(Record::new(
                1000.0 + step as f64 * interval_ms,
                Some(Name::from(job)),
                Body::OptimizerStep(event),
            ));
        }
    }
    // CUPTI in `compute`'s process: its device busy half of the time, copying a sixteenth.
    let mut window = golow_protocol::samples::kernel_window(vec![golow_protocol::samples::kernel(
        "sm90_xmma_gemm",
        40,
        400_000_000,
    )]);
    window.breakdown = golow_protocol::event::Breakdown {
        busy: 0.5,
        copy: 0.0625,
        idle: 0.4375,
    };
    (window.monotonic_start_ns, window.monotonic_end_ns) = (None, None);
    records.push(Record::new(
        1000.0 + steps as f64 * 100.0,
        Some("compute".into()),
        Body::Kernels(Box::new(window)),
    ));
    let mut state = State::default();
    for r in &records {
        state.apply(r);
    }
    state
}
