//! One record body of every kind, with plausible values: what round-trip tests of the schema, and of anything that
//! stores records, go through.

use crate::config::{
    AotiPackage, CompileMode, GpuPolicy, Mode, Model, Optimiser, Schedule, SessionConfig,
    WorkerConfig,
};
use crate::event::{
    BackwardPass, Body, Breakdown, CollectorStatus, Compile, CompileTrigger, Compiling, CopyKind,
    CopyRuns, CopyStats, Epoch, ExitStatus, ForwardPass, Hello, KernelStats, KernelWindow,
    LoaderSetup, MemoryKind, OTHER_OPERATORS, OperatorStats, OperatorWindow, Optimizer,
    OptimizerStep, Phase, ProfilingOff, Run, Scalar, ScriptProcess, Step, StepPhases, Stream,
    Timeline, TurnEnd, WorkerExit,
};

fn worker_config() -> WorkerConfig {
    WorkerConfig {
        model: Model::Resnet50,
        mode: Mode::Train,
        dataset: "synthetic".into(),
        data_dir: "/tmp/s/data".into(),
        weights: "/tmp/s/weights.safetensors".into(),
        torchscript: None,
        aoti: Some(AotiPackage {
            package: "/tmp/s/resnet.pt2".into(),
            packaging: "/tmp/s/packaging.json".into(),
        }),
        channels: 3,
        classes: 10,
        batch_size: 16,
        resolution: 32,
        steps: 10,
        warmup: 2,
        device: "cpu".into(),
        threads: 2,
        seed: 7,
        pinned: false,
        optimiser: Optimiser::default(),
        gpu_policy: GpuPolicy {
            cudnn_benchmark: false,
            tf32: true,
        },
        compile_mode: CompileMode::MaxAutotune,
        ops_every: 10,
        ops_library: None,
    }
}

/// A CPU training step of batch 8 with no copy, for tests that need steps of given times.
pub fn step(step: u64, compute_ms: f64, warmup: bool) -> Step {
    Step {
        step,
        epoch: 0,
        phase: Mode::Train,
        batch_size: 8,
        data_ms: 0.1,
        h2d_ms: None,
        h2d_bytes: None,
        compute_ms,
        loss: 2.0,
        correct: 1,
        warmup,
        profiled: false,
        start_ns: None,
        end_ns: None,
    }
}

/// Step `step` of the first optimiser of a `--cmd` worker's first process, `interval_ms` after the one before, with no
/// arrival stamp and unprofiled: for tests of scripts.
pub fn optimizer_step(step: u64, interval_ms: Option<f64>) -> OptimizerStep {
    OptimizerStep {
        process: 0,
        optimizer: 0,
        step,
        interval_ms,
        first_step_ms: None,
        arrived_ns: None,
        profiled: false,
        phases: None,
        skipped: false,
        loss: None,
        t_ns: None,
    }
}

/// Phases that add up to `interval_ms` less `other_ms`: a step's time as the hook would split it.
pub fn step_phases(
    data_ms: f64,
    forward_ms: f64,
    backward_ms: f64,
    optimizer_ms: f64,
) -> StepPhases {
    StepPhases {
        data_ms,
        forward_ms,
        backward_ms,
        optimizer_ms,
        forward_passes: 1,
        backward_passes: 1,
        samples: None,
        loader: None,
        hook_ms: None,
    }
}

/// A kernel launched `count` times for `total_ns` in all, in one shape: for tests that need kernels of given sizes.
pub fn kernel(name: &str, count: u64, total_ns: u64) -> KernelStats {
    KernelStats {
        name: name.into(),
        count,
        total_ns,
        max_ns: total_ns / count.max(1),
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shapes: 1,
        registers_per_thread: 32,
        shared_bytes: 0,
        grid_histogram: vec![([1, 1, 1], count)],
    }
}

/// A collector window of `kernels`, with a copy and a breakdown.
pub fn kernel_window(kernels: Vec<KernelStats>) -> KernelWindow {
    KernelWindow {
        window_start_ns: 1_000,
        window_end_ns: 1_000_001_000,
        kernels,
        copies: vec![CopyStats {
            kind: CopyKind::HostToDevice,
            src: MemoryKind::Pageable,
            count: 2,
            bytes: 19_267_584,
            total_ns: 1_250_000,
        }],
        breakdown: Breakdown {
            busy: 0.875,
            copy: 0.03125,
            idle: 0.09375,
        },
        dropped_records: 0,
        invalid_records: 3,
        dropped_windows: 1,
        monotonic_start_ns: Some(5_000_001_000),
        monotonic_end_ns: Some(6_000_001_000),
        timeline: Some(Timeline {
            kernels: vec![Run::from((-2_000, 400_000, 31, 390_000))],
            copies: vec![CopyRuns {
                kind: CopyKind::HostToDevice,
                src: MemoryKind::Pageable,
                runs: vec![Run::from((500_000, 1_125_000, 2, 19_267_584))],
            }],
            merged: 4,
        }),
    }
}

/// The hello of a `--cmd` worker's process `process` (pid `pid`), rank `rank` of `world`: for tests of ranks.
pub fn rank_hello(process: u32, pid: u32, rank: u32, world: u32) -> Body {
    Body::ScriptProcess(ScriptProcess {
        process,
        pid,
        rank: Some(rank),
        local_rank: Some(rank),
        world_size: Some(world),
        python: "3.11.7".into(),
        torch: Some("2.11.0".into()),
        threads: Some(1),
    })
}

/// One body of every kind, for round trips here and in the recording.
pub fn every_body() -> Vec<Body> {
    let step = Step {
        step: 3,
        epoch: 0,
        phase: Mode::Train,
        batch_size: 16,
        data_ms: 0.5,
        h2d_ms: Some(0.25),
        h2d_bytes: Some(196_736),
        compute_ms: 12.5,
        loss: 2.25,
        correct: 4,
        warmup: false,
        profiled: true,
        start_ns: Some(5_000_000_000),
        end_ns: Some(5_013_500_000),
    };
    vec![
        Body::SessionStart(Box::new(SessionConfig {
            workers: vec!["libtorch".into(), "train".into()],
            commands: [("train".to_string(), "python train.py".to_string())].into(),
            model: Model::Resnet18,
            dataset: "cifar10:/d".into(),
            mode: Mode::Eval,
            batch_size: 8,
            resolution: 32,
            steps: 5,
            warmup: 1,
            device: "cuda:0".into(),
            threads: 4,
            schedule: Schedule::Alternate,
            seed: 1,
            pinned: true,
            optimiser: Optimiser::default(),
            gpu_policy: Some(GpuPolicy {
                cudnn_benchmark: true,
                tf32: false,
            }),
            compile_mode: Some(CompileMode::ReduceOverhead),
            ops_every: 10,
            command_env: [("OMP_NUM_THREADS".to_string(), "4".to_string())].into(),
            stall_after_s: 45,
            monotonic_origin_ns: Some(5_000_000_000),
            attached: [("watched".to_string(), 4242)].into(),
        })),
        Body::WorkerStarted {
            pid: 42,
            command: vec!["golow-worker".into(), "run".into()],
        },
        Body::Hello(Box::new(Hello {
            implementation: "libtorch".into(),
            pid: 42,
            versions: [("torch".to_string(), "2.11.0".to_string())].into(),
            device: "cpu".into(),
            config: worker_config(),
        })),
        Body::Step(step),
        Body::Compiling(Compiling {
            step: Some(0),
            phase: Mode::Train,
            trigger: CompileTrigger::Dynamo,
        }),
        Body::Compile(Compile {
            step: Some(0),
            phase: Mode::Train,
            trigger: CompileTrigger::LazyBackward,
            recompile: false,
            ms: 25_624.25,
            cache_hits: 0,
            cache_misses: 1,
        }),
        Body::Compile(Compile {
            step: None,
            phase: Mode::Eval,
            trigger: CompileTrigger::Dynamo,
            recompile: true,
            ms: 841.5,
            cache_hits: 2,
            cache_misses: 0,
        }),
        Body::Compile(Compile {
            step: None,
            phase: Mode::Eval,
            trigger: CompileTrigger::Package,
            recompile: false,
            ms: 34_357.5,
            cache_hits: 0,
            cache_misses: 0,
        }),
        Body::Epoch(Epoch {
            epoch: 1,
            complete: true,
            train_loss: Some(1.5),
            train_accuracy: Some(0.5),
            eval_loss: None,
            eval_accuracy: Some(0.625),
        }),
        Body::TurnEnd(TurnEnd { steps_done: 4 }),
        Body::Exit(WorkerExit {
            status: ExitStatus::Error,
            message: Some("out of memory".into()),
        }),
        Body::Output {
            stream: Stream::Stderr,
            line: "Traceback (most recent call last):".into(),
        },
        Body::ProtocolError {
            message: "invalid event line".into(),
        },
        Body::Process {
            pid: 42,
            rss_bytes: 1 << 30,
            peak_rss_bytes: 2 << 30,
            cpu_percent: Some(180.5),
            rank: None,
            threads: Some(12),
        },
        Body::Process {
            pid: 4242,
            rss_bytes: 600 << 20,
            peak_rss_bytes: 700 << 20,
            cpu_percent: Some(99.5),
            rank: Some(1),
            threads: None,
        },
        Body::OptimizerStep(OptimizerStep {
            process: 0,
            optimizer: 0,
            step: 7,
            interval_ms: Some(31.25),
            first_step_ms: None,
            arrived_ns: Some(5_000_250_000),
            profiled: true,
            phases: Some(StepPhases {
                data_ms: 6.5,
                forward_ms: 8.25,
                backward_ms: 12.125,
                optimizer_ms: 2.5,
                forward_passes: 4,
                backward_passes: 4,
                samples: Some(128),
                loader: Some(LoaderSetup {
                    num_workers: 0,
                    pin_memory: false,
                    cuda: true,
                }),
                hook_ms: Some(0.125),
            }),
            skipped: false,
            loss: None,
            t_ns: Some(5_031_500_000),
        }),
        Body::OptimizerStep(OptimizerStep {
            process: 1,
            optimizer: 1,
            step: 0,
            interval_ms: None,
            first_step_ms: Some(6312.5),
            arrived_ns: None,
            profiled: false,
            phases: None,
            skipped: true,
            loss: None,
            t_ns: None,
        }),
        Body::ScriptProcess(ScriptProcess {
            process: 1,
            pid: 4242,
            rank: Some(1),
            local_rank: Some(1),
            world_size: Some(2),
            python: "3.11.7".into(),
            torch: Some("2.11.0+cpu".into()),
            threads: Some(1),
        }),
        Body::Optimizer(Optimizer {
            process: 0,
            optimizer: 1,
            class: "AdamW".into(),
            lr: Some(3e-4),
        }),
        Body::ForwardPass(ForwardPass {
            process: 0,
            pass: 3,
            ms: 12.5,
            interval_ms: Some(14.25),
            grad: false,
            t_ns: Some(4_012_500_000),
        }),
        Body::BackwardPass(BackwardPass {
            process: 0,
            pass: 2,
            interval_ms: Some(40.5),
            phases: Some(step_phases(10.0, 9.5, 18.25, 0.0)),
            profiled: true,
            loss: None,
            t_ns: Some(6_040_500_000),
        }),
        Body::ProfilingOff(ProfilingOff {
            process: 0,
            reason: "a profiled step ran past 2 s".into(),
        }),
        Body::Scalar(Scalar {
            process: 0,
            name: "loss".into(),
            value: 0.693,
        }),
        Body::Phase(Phase {
            process: 0,
            name: "eval".into(),
        }),
        Body::GpuUnavailable {
            reason: "libnvidia-ml.so.1 not found".into(),
        },
        Body::GpuInfo {
            index: 0,
            name: "NVIDIA H200".into(),
            memory_total_bytes: 150_000_000_000,
            driver: "580.95".into(),
            uuid: "GPU-1f2e3d4c-0000-4000-8000-000000000000".into(),
        },
        Body::GpuDevice {
            index: 0,
            utilization_percent: Some(97),
            memory_used_bytes: Some(20 << 30),
            power_watts: Some(512.25),
            sm_clock_mhz: None,
        },
        Body::RecordingFailed {
            reason: "No space left on device (os error 28)".into(),
        },
        Body::GpuProcessesUnavailable {
            reason: "NVML reports the host's process IDs".into(),
        },
        Body::GpuProcess {
            pid: 42,
            index: 0,
            memory_bytes: Some(3 << 30),
            sm_percent: Some(88),
            last_seen_us: Some(1_700_000_000_000_000),
            rank: None,
        },
        Body::GpuProcess {
            pid: 4242,
            index: 0,
            memory_bytes: Some(2 << 30),
            sm_percent: Some(40),
            last_seen_us: Some(1_700_000_000_000_000),
            rank: Some(1),
        },
        Body::Operators(OperatorWindow {
            process: 1,
            steps: 2,
            compute_ms: 412.5,
            every: 10,
            operators: vec![
                OperatorStats {
                    name: "aten::mkldnn_convolution".into(),
                    calls: 106,
                    self_ns: 180_250_000,
                    total_ns: 181_000_000,
                    shapes: "[16, 64, 8, 8] [64, 64, 3, 3]".into(),
                },
                OperatorStats {
                    name: OTHER_OPERATORS.into(),
                    calls: 9,
                    self_ns: 1_500,
                    total_ns: 2_000,
                    shapes: Default::default(),
                },
            ],
            dropped: 3,
        }),
        Body::Kernels(Box::new(kernel_window(vec![KernelStats {
            name: "at::native::vectorized_elementwise_kernel".into(),
            count: 120,
            total_ns: 3_500_000,
            max_ns: 41_000,
            grid: [1024, 2, 1],
            block: [128, 1, 1],
            shapes: 2,
            registers_per_thread: 24,
            shared_bytes: 0,
            grid_histogram: vec![([1024, 2, 1], 100), ([512, 2, 1], 20)],
        }]))),
        Body::Collector(CollectorStatus {
            active: false,
            detail: "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_UNKNOWN".into(),
            kernels_every: 1,
        }),
        Body::GpuPcie {
            index: 0,
            rx_bytes_per_s: Some(25_000_000_000),
            tx_bytes_per_s: None,
        },
        Body::MachineLoad {
            load_1m: 1.93,
            busy_percent: 97.5,
            steal_percent: 0.5,
            others_percent: 12.25,
            cpu_mhz: Some(2600.0),
        },
        Body::WorkerExited {
            exit_code: None,
            signal: Some(9),
            stop_requested: false,
        },
        Body::RankProcess {
            pid: 4243,
            rank: 1,
            local_rank: Some(1),
            world_size: Some(2),
        },
        Body::AttachedEnd { detached: true },
        Body::SessionEnd,
    ]
}

/// Seeded damage for fuzz tests (xorshift: the same cases every run).
pub struct Damage(u64);

impl Damage {
    pub fn new(seed: u64) -> Damage {
        Damage(seed.max(1))
    }

    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }

    /// One to `most` edits of `bytes`, each a bit flipped, a byte removed, a byte of `alphabet` inserted or the rest
    /// cut; never empty.
    pub fn damage(&mut self, bytes: &mut Vec<u8>, alphabet: &[u8], most: usize) {
        for _ in 0..=self.below(most) {
            let at = self.below(bytes.len());
            match self.below(4) {
                0 => bytes[at] ^= 1 << self.below(8),
                1 => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, alphabet[self.below(alphabet.len())]),
                _ => bytes.truncate(at),
            }
            if bytes.is_empty() {
                bytes.push(b'{');
            }
        }
    }
}
