//! What `golow run` and `golow sweep` share: the options of the session every run and every cell runs, and their
//! one validation into a [`Plan`], with the checks of the machine they need (CUDA devices, the python, the
//! programs beside golow); and the checks other subcommands share (output paths, the theme file, compared workers).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use golow_data::DatasetSpec;
use golow_protocol::config::{
    CompileMode, DEFAULT_LR, DEFAULT_OPS_EVERY, GpuPolicy, Impl, Mode, Model, Optimiser, Schedule,
    SessionConfig,
};
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use super::BadInput;
use crate::metrics::Endpoint;
use crate::session::{Length, Plan, programs, python};
use crate::store::Store;
use crate::ui::theme::{self, Theme};

/// Above this the data cache alone would not fit a machine's memory for real datasets.
pub const MAX_RESOLUTION: i64 = 2048;
/// Above this no batch fits a machine's memory at any resolution.
pub const MAX_BATCH_SIZE: u64 = 1 << 16;
/// A theme is under a kilobyte; the cap only guards against pointing at a device or a huge file.
const MAX_THEME_BYTES: usize = 1 << 20;

/// A flag's `on` or `off`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// What the workers run and how they are watched: the same for a single run and for every cell of a sweep.
#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub struct SessionOptions {
    /// The network every built-in implementation runs: resnet50 (bottleneck blocks 3-4-6-3) or resnet18 (basic
    /// blocks 2-2-2-2).
    #[arg(long, value_enum, default_value = "resnet50")]
    model: Model,
    /// synthetic, mnist:DIR, cifar10:DIR, stl10:DIR or pascal:DIR.
    #[arg(long, default_value = "synthetic")]
    dataset: String,
    /// Steps reported but excluded from statistics (cuDNN autotuning, allocator warm-up).
    #[arg(long, default_value_t = 2)]
    warmup: i64,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Intra-op threads per worker [default: all cores; divided among workers with --schedule parallel].
    #[arg(long)]
    threads: Option<i64>,
    /// Seeds the initial weights and the order of the samples, the same in every implementation.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Learning rate of the SGD optimiser (momentum 0.9, weight decay 5e-4) every implementation uses.
    #[arg(long, default_value_t = DEFAULT_LR)]
    lr: f64,
    /// Pin host batches (page-locked memory) before the host-to-device copy.
    #[arg(long)]
    pinned: bool,
    /// Python with torch 2.11 for the pytorch and compile workers, and to prepare torchscript's and aoti's model [default: $GOLOW_PYTHON, else the python beside golow (the environment it is installed in), else the .venv of `make build`, else python3 on PATH]; an installed golow-worker uses its torch's libraries.
    #[arg(long)]
    python: Option<PathBuf>,
    /// Process sampling period in milliseconds (at least 50).
    #[arg(long, default_value_t = 100)]
    interval: i64,
    /// Do not load golow's CUPTI collector into the workers (no kernel or copy records).
    #[arg(long)]
    no_cupti: bool,
    /// Trace one window of the CUPTI collector in N (1: every window); between traced windows CUPTI is off and costs
    /// the workers nothing, and kernel totals are of one window in N.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        conflicts_with = "no_cupti"
    )]
    kernels_every: i64,
    /// Record the operators of one step in N (at least 2) past the warm-up: their calls, self and total time (the
    /// operators pane). Profiled steps are kept out of the timing figures.
    #[arg(long, default_value_t = DEFAULT_OPS_EVERY as i64, value_name = "N", conflicts_with = "no_ops")]
    ops_every: i64,
    /// Record no operators (what looking costs is then nothing; see --ops-every).
    #[arg(long)]
    no_ops: bool,
    /// cuDNN times each convolution shape's algorithms once and keeps the fastest, in every level (torch.backends.cudnn.benchmark); off: its heuristics choose.
    #[arg(long, value_enum, default_value = "on", value_name = "on|off")]
    cudnn_benchmark: Switch,
    /// f32 convolutions and matrix products may run in TF32 on the tensor cores, in every level; off: full f32.
    #[arg(long, value_enum, default_value = "on", value_name = "on|off")]
    tf32: Switch,
    /// torch.compile's mode for the compile level (reduce-overhead: CUDA graphs, GPU only).
    #[arg(long, value_enum, default_value = "default")]
    compile_mode: CompileMode,
    /// Give notice when a running worker reports no step (nor forward pass) for this many seconds.
    #[arg(long, default_value_t = golow_protocol::config::DEFAULT_STALL_AFTER_S as i64, value_name = "SECONDS")]
    stall_after: i64,
    /// Run golow itself on this CPU only (its workers keep every CPU); with --threads one below the core count it
    /// leaves the workers' CPUs alone (docs/methodology.md, "The observer effect").
    #[arg(long, value_name = "N")]
    monitor_cpu: Option<i64>,
    /// Serve the session's metrics for Prometheus at http://HOST:PORT/metrics (a port alone listens on 127.0.0.1; port
    /// 0 takes any free one, which golow prints) [default: off].
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
}

/// What one session runs besides its options: `golow run`'s workers and sizes, or a sweep's at one cell.
pub struct Workload {
    pub impls: Vec<Impl>,
    /// `--cmd` workers: name and shell command.
    pub commands: Vec<(String, String)>,
    pub mode: Mode,
    pub batch_size: u32,
    pub resolution: u32,
    pub length: Length,
    pub schedule: Schedule,
}

impl Workload {
    /// Every worker's name: the implementations, then the commands.
    pub fn workers(&self) -> Vec<String> {
        self.impls
            .iter()
            .map(|i| i.name().to_string())
            .chain(self.commands.iter().map(|(name, _)| name.clone()))
            .collect()
    }
}

impl SessionOptions {
    pub fn dataset(&self) -> Result<DatasetSpec, BadInput> {
        DatasetSpec::parse(&self.dataset).map_err(|e| BadInput(e.to_string()))
    }

    /// Pins golow's own threads with `--monitor-cpu`; call it before the session starts a thread.
    pub fn pin_monitor(&self) -> Result<(), BadInput> {
        let Some(cpu) = self.monitor_cpu else {
            return Ok(());
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let index = usize::try_from(cpu)
            .ok()
            .filter(|&c| c < cpus)
            .ok_or_else(|| {
                BadInput(format!(
                    "--monitor-cpu {cpu}: this machine has CPUs 0 to {}",
                    cpus - 1
                ))
            })?;
        crate::session::affinity::pin_monitor(index)
            .map_err(|why| BadInput(format!("--monitor-cpu {cpu}: {why}")))
    }

    /// The numbers: warm-up steps, sampling interval and learning rate.
    pub fn check(&self) -> Result<(), BadInput> {
        if self.warmup < 0 {
            return Err(BadInput(format!(
                "--warmup cannot be negative (got {})",
                self.warmup
            )));
        }
        check_interval(self.interval)?;
        positive("--stall-after", self.stall_after)?;
        if self.ops_every < 2 {
            return Err(BadInput(format!(
                "--ops-every must be at least 2: profiled steps are kept out of the timing figures (got {}; \
                 --no-ops records no operators)",
                self.ops_every
            )));
        }
        let max_every = golow_protocol::collector::MAX_EVERY;
        if !(1..=i64::from(max_every)).contains(&self.kernels_every) {
            return Err(BadInput(format!(
                "--kernels-every must be between 1 (every window) and {max_every} (got {}): the CUPTI collector \
                 traces one window in N",
                self.kernels_every
            )));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(BadInput(format!(
                "--lr must be a positive number (got {})",
                self.lr
            )));
        }
        Ok(())
    }

    /// Starts `--metrics-addr`'s endpoint serving `store`, and says where it listens; call it after the pinning (its
    /// thread is golow's).
    pub fn metrics(&self, store: &Store) -> Result<Option<Endpoint>, BadInput> {
        metrics_endpoint(self.metrics_addr.as_deref(), store)
    }

    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval.max(0) as u64)
    }

    /// Intra-op threads per worker: `--threads`, or the cores shared among the workers that run at once.
    pub fn threads(&self, schedule: Schedule, workers: usize) -> Result<u32, BadInput> {
        if let Some(t) = self.threads {
            let t = positive("--threads", t)?;
            return u32::try_from(t)
                .ok()
                .filter(|&t| t <= MAX_THREADS)
                .ok_or_else(|| {
                    BadInput(format!("--threads must be at most {MAX_THREADS} (got {t})"))
                });
        }
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let sharing = if schedule == Schedule::Parallel {
            workers
        } else {
            1
        };
        Ok((cores / sharing.max(1)).max(1) as u32)
    }

    /// What `--threads` sets for `--cmd` workers, the way torch reads it: the variables golow's own environment
    /// leaves unset (a user's own setting wins), and nothing without `--threads` or without a `--cmd` worker.
    fn command_env(
        &self,
        threads: u32,
        workload: &Workload,
    ) -> std::collections::BTreeMap<String, String> {
        if self.threads.is_none() || workload.commands.is_empty() {
            return Default::default();
        }
        ["OMP_NUM_THREADS", "MKL_NUM_THREADS"]
            .into_iter()
            .filter(|var| std::env::var_os(var).is_none())
            .map(|var| (var.to_string(), threads.to_string()))
            .collect()
    }

    /// The plan of a session running `workload` with `threads` per worker, after checking what it needs of this
    /// machine: open files, the device, the python of the Python workers, the collector and `golow-worker`.
    pub fn plan(
        &self,
        dataset: DatasetSpec,
        workload: Workload,
        threads: u32,
    ) -> Result<Plan, BadInput> {
        open_files_for(workload.workers().len())?;
        let device = resolve_device(&self.device, crate::telemetry::cuda::device_count)?;
        if device == "cpu"
            && let Some(gpu_only) = workload.impls.iter().find(|i| i.needs_gpu())
        {
            return Err(BadInput(format!(
                "--impl {} runs only on an NVIDIA GPU, and this session's device is the CPU; use --device cuda",
                gpu_only.name()
            )));
        }
        if workload.mode == Mode::Train
            && let Some(eval_only) = workload.impls.iter().find(|i| i.eval_only())
        {
            return Err(BadInput(format!(
                "--impl {} only evaluates (an AOTInductor package has no backward pass); use --mode eval",
                eval_only.name()
            )));
        }
        let compiles = workload.impls.iter().any(|i| i.compiles());
        if compiles && device == "cpu" && self.compile_mode == CompileMode::ReduceOverhead {
            return Err(BadInput(
                "--compile-mode reduce-overhead records CUDA graphs, which need a GPU, and this session's device is the CPU; use --compile-mode default or --device cuda".into(),
            ));
        }
        if let Some(needs) = workload
            .impls
            .iter()
            .find(|i| i.needs_cpp_compiler(device == "cpu"))
        {
            programs::cpp_compiler().map_err(|why| {
                // One that needs a compiler on a GPU too needs it everywhere.
                let there = if needs.needs_cpp_compiler(false) {
                    ""
                } else {
                    " on the CPU"
                };
                BadInput(format!(
                    "--impl {}{there} needs a C++ compiler: {why}",
                    needs.name()
                ))
            })?;
        }
        let mut worker_program = if workload.impls.is_empty() {
            None
        } else {
            Some(programs::worker().map_err(BadInput)?)
        };
        let worker_needs_torch = worker_program
            .as_ref()
            .is_some_and(|worker| !worker.finds_torch_itself);
        let python = if worker_needs_torch || workload.impls.iter().any(|i| i.needs_python()) {
            let python = python::resolve(self.python.clone());
            let torch = python::check(&python).map_err(BadInput)?;
            if let Some(worker) = &mut worker_program {
                worker.use_torch(&torch).map_err(BadInput)?;
            }
            Some(python)
        } else {
            None
        };
        let collector = if self.no_cupti {
            None
        } else {
            Some(programs::collector().map_err(BadInput)?)
        };
        let interposer = if workload.commands.is_empty() {
            None
        } else {
            Some(programs::interposer().map_err(BadInput)?)
        };
        let session = SessionConfig {
            workers: workload.workers(),
            commands: workload.commands.iter().cloned().collect(),
            model: self.model,
            dataset: dataset.to_string(),
            mode: workload.mode,
            batch_size: workload.batch_size,
            resolution: workload.resolution,
            steps: 0,
            warmup: self.warmup.max(0) as u64,
            device,
            threads,
            schedule: workload.schedule,
            seed: self.seed,
            pinned: self.pinned,
            optimiser: Optimiser {
                lr: self.lr,
                ..Optimiser::default()
            },
            gpu_policy: (!workload.impls.is_empty()).then_some(GpuPolicy {
                cudnn_benchmark: self.cudnn_benchmark == Switch::On,
                tf32: self.tf32 == Switch::On,
            }),
            compile_mode: compiles.then_some(self.compile_mode),
            command_env: self.command_env(threads, &workload),
            stall_after_s: self.stall_after.max(1) as u64,
            monotonic_origin_ns: None,
            ops_every: if self.no_ops {
                0
            } else {
                u32::try_from(self.ops_every).unwrap_or(u32::MAX)
            },
            attached: Default::default(),
        };
        Ok(Plan {
            impls: workload.impls,
            commands: workload.commands,
            session,
            dataset,
            length: workload.length,
            python,
            worker_program,
            collector,
            kernels_every: u32::try_from(self.kernels_every).unwrap_or(1),
            interposer,
        })
    }
}

/// `--metrics-addr` of `run`, `sweep` and `replay`: the endpoint listening, serving `store`, or one line on why it
/// cannot.
pub fn metrics_endpoint(addr: Option<&str>, store: &Store) -> Result<Option<Endpoint>, BadInput> {
    let Some(addr) = addr else { return Ok(None) };
    let addr = crate::metrics::parse_addr(addr).map_err(BadInput)?;
    let endpoint = Endpoint::start(addr, crate::telemetry::machine::host_name(), store.clone())
        .map_err(BadInput)?;
    eprintln!("golow: metrics at http://{}/metrics", endpoint.addr());
    Ok(Some(endpoint))
}

/// The shortest sampling period: /proc's CPU ticks are hundredths of a second.
const MIN_INTERVAL_MS: i64 = 50;

/// `--interval`, checked: the sampling period.
pub fn check_interval(ms: i64) -> Result<Duration, BadInput> {
    if ms < MIN_INTERVAL_MS {
        return Err(BadInput(format!(
            "--interval must be at least {MIN_INTERVAL_MS} ms (got {ms})"
        )));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// More intra-op threads than any machine golow runs on has cores; beyond it a count is a typo (or wraps).
const MAX_THREADS: u32 = 4096;

pub fn positive(flag: &str, value: i64) -> Result<u64, BadInput> {
    if value < 1 {
        return Err(BadInput(format!("{flag} must be at least 1 (got {value})")));
    }
    Ok(value as u64)
}

/// `--cmd` values, `NAME=COMMAND` or a command alone (named after its script), with names unique among themselves
/// and the implementations.
pub fn parse_commands(specs: &[String], impls: &[Impl]) -> Result<Vec<(String, String)>, BadInput> {
    let mut commands: Vec<(String, String)> = Vec::new();
    for spec in specs {
        let taken = |name: &str, commands: &[(String, String)]| {
            impls.iter().any(|i| i.name() == name) || commands.iter().any(|(n, _)| n == name)
        };
        // A word before the first `=` is a name, unless the shell would take it for an environment variable
        // (`CUDA_VISIBLE_DEVICES=0 python train.py`: upper case, as they are); `python train.py --lr=0.1` has none.
        let named = spec.split_once('=').filter(|(name, _)| {
            let name = name.trim();
            !name.is_empty()
                && !name.contains(char::is_whitespace)
                && !name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        });
        let (name, command) = match named {
            Some((name, command)) => {
                let (name, command) = (name.trim(), command.trim());
                if !name.chars().all(name_char) {
                    return Err(BadInput(format!(
                        "--cmd name '{name}' must be letters, digits, '-' or '_'"
                    )));
                }
                if command.is_empty() {
                    return Err(BadInput(format!("--cmd {name}= names no command")));
                }
                if taken(name, &commands) {
                    return Err(BadInput(format!(
                        "--cmd name '{name}' is already taken by another worker"
                    )));
                }
                (name.to_string(), command.to_string())
            }
            None => {
                let command = spec.trim();
                if command.is_empty() {
                    return Err(BadInput("--cmd names no command".into()));
                }
                let base = command_name(command);
                let name = std::iter::once(base.clone())
                    .chain((2..).map(|n| format!("{base}-{n}")))
                    .find(|name| !taken(name, &commands))
                    .unwrap_or(base);
                (name, command.to_string())
            }
        };
        commands.push((name, command));
    }
    Ok(commands)
}

/// What a worker's name may hold: it labels panes, files and metrics.
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// A worker's name for a command given without one: its script's (`python train.py` → `train`, `torchrun
/// --nproc-per-node 2 ddp.py` → `ddp`), else its module's (`python -m pkg.train` → `train`), else its program's.
pub fn command_name(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    let script = words
        .iter()
        .find(|w| w.ends_with(".py"))
        .map(|w| w.rsplit('/').next().unwrap_or(w).trim_end_matches(".py"));
    let module = words
        .windows(2)
        .find(|pair| pair[0] == "-m")
        .map(|pair| pair[1].rsplit('.').next().unwrap_or(pair[1]));
    let program = words
        .iter()
        .find(|w| !w.contains('='))
        .map(|w| w.rsplit('/').next().unwrap_or(w));
    let name: String = script
        .or(module)
        .or(program)
        .unwrap_or_default()
        .chars()
        .filter(|&c| name_char(c))
        .take(32)
        .collect();
    if name.is_empty() { "cmd".into() } else { name }
}

pub fn parse_impls(list: &str) -> Result<Vec<Impl>, BadInput> {
    let mut impls = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let i = Impl::parse(name).map_err(BadInput)?;
        if i.needs_gpu()
            && let Some(why) = no_gpu(crate::telemetry::cuda::device_count)
        {
            return Err(BadInput(format!(
                "--impl {name} needs an NVIDIA GPU, and {why}; use pytorch, compile, torchscript, aoti, libtorch or aten"
            )));
        }
        if impls.contains(&i) {
            return Err(BadInput(format!("--impl names {name} twice")));
        }
        impls.push(i);
    }
    if impls.is_empty() {
        return Err(BadInput(
            "--impl names no implementation (known: pytorch, compile, torchscript, aoti, libtorch, aten, cudnn)"
                .into(),
        ));
    }
    Ok(impls)
}

/// Why a GPU-only implementation cannot run on this machine; `None` when the CUDA driver reports a GPU.
fn no_gpu(gpus: impl FnOnce() -> Result<usize, String>) -> Option<String> {
    match gpus() {
        Err(why) => Some(format!("this machine has none ({why})")),
        Ok(0) => Some("the CUDA driver reports none".into()),
        Ok(_) => None,
    }
}

/// Resolves `auto`, `cpu`, `cuda`, `cuda:N` against the GPUs the CUDA driver reports.
fn resolve_device(
    device: &str,
    gpus: impl FnOnce() -> Result<usize, String>,
) -> Result<String, BadInput> {
    if device == "cpu" {
        return Ok("cpu".into());
    }
    let index = match device {
        "auto" => None,
        "cuda" => Some(0),
        _ => Some(
            device
                .strip_prefix("cuda:")
                .and_then(|i| i.parse::<usize>().ok())
                .ok_or_else(|| {
                    BadInput(format!(
                        "unknown --device '{device}' (expected auto, cpu, cuda or cuda:N)"
                    ))
                })?,
        ),
    };
    let available = gpus();
    match (index, available) {
        (None, Ok(n)) if n > 0 => Ok("cuda:0".into()),
        (None, _) => Ok("cpu".into()),
        (Some(i), Ok(n)) if i < n => Ok(format!("cuda:{i}")),
        (Some(i), Ok(n)) => Err(BadInput(format!(
            "--device {device}: this machine has {n} CUDA device(s), so cuda:{i} does not exist"
        ))),
        (Some(_), Err(why)) => Err(BadInput(format!(
            "--device {device}: no NVIDIA GPU here ({why}); use --device cpu"
        ))),
    }
}

/// A batch size within golow's limit.
pub fn check_batch_size(batch_size: u64) -> Result<u32, BadInput> {
    if batch_size > MAX_BATCH_SIZE {
        return Err(BadInput(format!(
            "--batch-size {batch_size} is above golow's limit of {MAX_BATCH_SIZE}"
        )));
    }
    Ok(batch_size as u32)
}

pub fn check_resolution(resolution: i64, batch_size: u64, mode: Mode) -> Result<u32, BadInput> {
    if resolution < 1 {
        return Err(BadInput(format!(
            "--resolution must be at least 1 (got {resolution})"
        )));
    }
    if resolution > MAX_RESOLUTION {
        return Err(BadInput(format!(
            "--resolution {resolution} is above golow's limit of {MAX_RESOLUTION} px"
        )));
    }
    // ResNet reduces any input to ceil(r/32) squared at its last stage; training batch norm needs more
    // than one value per channel there.
    let last_stage = (resolution + 31) / 32;
    if mode == Mode::Train && batch_size as i64 * last_stage * last_stage < 2 {
        return Err(BadInput(format!(
            "ResNet cannot train at --resolution {resolution} with --batch-size {batch_size}: its last batch norm would see one value per channel (use a batch size of at least 2 or a resolution above 32)"
        )));
    }
    Ok(resolution as u32)
}

pub fn check_output_path(flag: &str, path: &Path) -> Result<(), BadInput> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(BadInput(format!(
            "{flag} {}: directory {} does not exist",
            path.display(),
            parent.display()
        )));
    }
    if let Some(kind) = crate::output_files::unwritable_kind(path) {
        return Err(BadInput(format!(
            "{flag} {}: it is {kind}; golow writes only to a regular file or a new path",
            path.display()
        )));
    }
    Ok(())
}

/// `--compare A,B`: two different workers of the session.
pub fn parse_compare(pair: &str, workers: &[String]) -> Result<(String, String), BadInput> {
    let names: Vec<&str> = pair.split(',').map(str::trim).collect();
    let [a, b] = names[..] else {
        return Err(BadInput(format!(
            "--compare '{pair}' needs two workers, e.g. --compare libtorch,pytorch"
        )));
    };
    for name in [a, b] {
        if !workers.iter().any(|w| w == name) {
            return Err(BadInput(format!(
                "--compare names {name}, which this session does not run (it runs {})",
                workers.join(", ")
            )));
        }
    }
    if a == b {
        return Err(BadInput(format!(
            "--compare needs two different workers (got {a} twice)"
        )));
    }
    Ok((a.to_string(), b.to_string()))
}

/// `--theme`: a built-in theme by name, otherwise the TOML file at that path (so a file called `dark` must be
/// given as `./dark`), read here and handed to the views.
pub fn read_theme(name_or_path: &str) -> Result<Theme, BadInput> {
    load_theme(name_or_path).map_err(|e| BadInput(e.to_string()))
}

fn load_theme(name_or_path: &str) -> Result<Theme, theme::ThemeError> {
    if let Some(theme) = theme::builtin(name_or_path) {
        return Ok(theme);
    }
    let bytes = golow_data::open_regular(Path::new(name_or_path))
        .and_then(|file| golow_data::read_capped(file, MAX_THEME_BYTES as u64))
        .map_err(|error| {
        theme::ThemeError::one_line(if error.kind() == io::ErrorKind::NotFound {
            format!(
                "theme {name_or_path}: no built-in theme of that name ({}) and no such file",
                theme::BUILTIN.join(", ")
            )
        } else if error.kind() == io::ErrorKind::FileTooLarge {
            format!(
                "theme {name_or_path}: the file is over {MAX_THEME_BYTES} bytes, far more than a theme needs; check the path"
            )
        } else {
            format!("theme {name_or_path}: cannot read the file ({error}); check the path and its permissions")
        })
    })?;
    let source = String::from_utf8(bytes).map_err(|error| {
        theme::ThemeError::one_line(format!(
            "theme {name_or_path}: the file is not UTF-8 text ({error}); save it as UTF-8"
        ))
    })?;
    theme::parse(&source, name_or_path)
}

/// Open files a session needs: those open already (a parent may have left some open to golow), golow's own (its
/// runtime, signals, recording, sockets) and, per worker, its pipes, its event socket and its processes' connections.
fn open_files_needed(workers: usize) -> u64 {
    let open = std::fs::read_dir("/proc/self/fd").map_or(3, |entries| entries.count() as u64);
    open + 32 + 16 * workers as u64
}

/// Makes sure a session of `workers` can open the files it needs before anything is written: a soft limit below
/// that is raised as far as the hard limit allows; a hard limit below it is bad input, said in one line (a session
/// short of descriptors would fail half-started).
fn open_files_for(workers: usize) -> Result<(), BadInput> {
    let needed = open_files_needed(workers);
    // `None` is no limit.
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if current >= needed {
        return Ok(());
    }
    if limit.maximum.unwrap_or(u64::MAX) >= needed {
        let raised = Rlimit {
            current: Some(needed),
            ..limit
        };
        // Raising the soft limit up to the hard one is always permitted.
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return Ok(());
        }
    }
    Err(BadInput(format!(
        "a session of {workers} worker{} needs {needed} open files and this shell allows {} (ulimit -n); raise it, e.g. ulimit -n 1024",
        if workers == 1 { "" } else { "s" },
        current
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::theme::tests::{VALID, edited};

    #[test]
    fn a_command_given_alone_is_named_after_its_script_module_or_program() {
        let specs: Vec<String> = [
            "train=python other.py",
            "python train.py --lr=0.1",
            "CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc-per-node 2 /src/ddp-job.py",
            "python -m pkg.finetune",
            "./run_all.sh",
            "python train.py",
        ]
        .map(String::from)
        .to_vec();
        let Ok(named) = parse_commands(&specs, &[Impl::Pytorch]) else {
            panic!("every spec is a command")
        };
        let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "train",
                "train-2",
                "ddp-job",
                "finetune",
                "run_allsh",
                "train-3"
            ]
        );
        assert_eq!(named[0].1, "python other.py");
        assert_eq!(named[1].1, "python train.py --lr=0.1", "run as given");
        assert!(
            named[2].1.starts_with("CUDA_VISIBLE_DEVICES=0,1 torchrun"),
            "an environment assignment stays"
        );
        assert_eq!(command_name("pytorch.py"), "pytorch");
        let Ok(clash) = parse_commands(&["python pytorch.py".into()], &[Impl::Pytorch]) else {
            panic!("a command alone is taken")
        };
        assert_eq!(clash[0].0, "pytorch-2", "a level's name is taken");
    }

    #[test]
    fn builtin_names_load_the_builtin_themes() {
        for name in theme::BUILTIN {
            assert_eq!(load_theme(name).ok(), theme::builtin(name), "{name}");
        }
    }

    #[test]
    fn load_reads_a_theme_file_by_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mine.toml");
        std::fs::write(&path, VALID).expect("write theme");
        let path = path.to_str().expect("utf-8 temp path");
        assert_eq!(load_theme(path), theme::parse(VALID, path));
        assert_eq!(
            load_theme(path).map(|theme| theme.name),
            Ok("sample".to_owned())
        );
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let broken = dir.path().join("broken.toml");
        std::fs::write(&broken, edited(4, "background = \"nope\"")).expect("write theme");
        let broken = broken.to_str().expect("utf-8 temp path");
        assert_eq!(
            load_theme(broken).expect_err("bad colour").to_string(),
            format!(
                "theme {broken}, line 4: colors.background = \"nope\" is not a colour ({})",
                theme::COLOR_HINT
            )
        );

        let latin1 = dir.path().join("latin1.toml");
        std::fs::write(&latin1, b"name = \"caf\xe9\"\n").expect("write theme");
        let latin1 = latin1.to_str().expect("utf-8 temp path");
        let message = load_theme(latin1).expect_err("not UTF-8").to_string();
        assert!(
            message.starts_with(&format!("theme {latin1}: the file is not UTF-8 text")),
            "{message}"
        );

        let huge = dir.path().join("huge.toml");
        std::fs::write(&huge, vec![b'#'; MAX_THEME_BYTES + 1]).expect("write theme");
        let huge = huge.to_str().expect("utf-8 temp path");
        let message = load_theme(huge).expect_err("too large").to_string();
        assert!(
            message.starts_with(&format!("theme {huge}: the file is over ")),
            "{message}"
        );

        let folder = dir.path().to_str().expect("utf-8 temp path");
        let message = load_theme(folder).expect_err("a directory").to_string();
        assert!(
            message.starts_with(&format!("theme {folder}: cannot read the file (")),
            "{message}"
        );
    }

    #[test]
    fn load_of_an_unknown_name_lists_the_builtins() {
        assert_eq!(
            load_theme("nosuch")
                .expect_err("neither built-in nor file")
                .to_string(),
            "theme nosuch: no built-in theme of that name (dark, light, high-contrast, colorblind) and no such file"
        );
    }

    #[test]
    fn device_resolution() {
        let none = || Err::<usize, _>("no driver".to_string());
        let two = || Ok::<usize, String>(2);
        assert_eq!(resolve_device("auto", none).ok(), Some("cpu".into()));
        assert_eq!(resolve_device("auto", two).ok(), Some("cuda:0".into()));
        assert_eq!(resolve_device("cuda:1", two).ok(), Some("cuda:1".into()));
        assert!(resolve_device("cuda:2", two).is_err());
        assert!(resolve_device("cuda", none).is_err());
        assert!(resolve_device("tpu", two).is_err());
    }

    #[test]
    fn resolution_limits() {
        assert!(check_resolution(0, 16, Mode::Train).is_err());
        assert!(check_resolution(32, 1, Mode::Train).is_err());
        assert!(check_resolution(32, 1, Mode::Eval).is_ok());
        assert!(check_resolution(33, 1, Mode::Train).is_ok());
        assert!(check_resolution(8, 2, Mode::Train).is_ok());
        assert!(check_resolution(MAX_RESOLUTION + 1, 2, Mode::Train).is_err());
    }

    #[test]
    fn command_specs() {
        let specs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let parsed = parse_commands(&specs(&["train=python t.py --lr 0.1"]), &[])
            .ok()
            .unwrap();
        assert_eq!(
            parsed,
            vec![("train".to_string(), "python t.py --lr 0.1".to_string())]
        );
        let alone = |spec: &str| parse_commands(&specs(&[spec]), &[]).ok().unwrap();
        assert_eq!(alone("python t.py"), [("t".into(), "python t.py".into())]);
        assert_eq!(
            alone("a b=x"),
            [("a".into(), "a b=x".into())],
            "not a name: a word"
        );
        assert_eq!(
            alone("X=1 ./go"),
            [("go".into(), "X=1 ./go".into())],
            "an environment"
        );
        assert!(parse_commands(&specs(&["my.job=x"]), &[]).is_err());
        assert!(parse_commands(&specs(&["a="]), &[]).is_err());
        assert!(parse_commands(&specs(&["a=x", "a=y"]), &[]).is_err());
        assert!(parse_commands(&specs(&["libtorch=x"]), &[Impl::Libtorch]).is_err());
    }

    #[test]
    fn the_reason_a_gpu_only_level_cannot_run_says_what_is_missing() {
        let none = no_gpu(|| Err("no NVIDIA driver (libcuda not found)".into())).unwrap();
        assert!(none.contains("libcuda not found"), "{none}");
        assert!(no_gpu(|| Ok(0)).unwrap().contains("reports none"));
        assert_eq!(no_gpu(|| Ok(1)), None);
    }

    #[test]
    fn implementation_lists() {
        assert_eq!(
            parse_impls("libtorch, pytorch").ok(),
            Some(vec![Impl::Libtorch, Impl::Pytorch])
        );
        let err = parse_impls("jax").err().unwrap().0;
        assert!(err.contains("jax") && err.contains("torchscript"), "{err}");
        assert!(parse_impls("pytorch,pytorch").is_err());
        assert!(parse_impls(",").is_err());
    }
}
