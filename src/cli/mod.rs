//! The command line: parses and validates, then hands a plan to the session. Bad input gets one line
//! on stderr and exit code 2, before anything is written.

mod sweep;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::recording::{self, Recorder};
use crate::session::{self, Length, Plan, PrepareError};
use crate::state::Summary;
use golow_data::DatasetSpec;
use golow_protocol::config::{Impl, Mode, Model, Optimiser, Schedule, SessionConfig};

pub const EXIT_OK: i32 = 0;
pub const EXIT_WORKER_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;

/// Above this the data cache alone would not fit a machine's memory for real datasets.
pub const MAX_RESOLUTION: i64 = 2048;

#[derive(Parser)]
#[command(
    name = "golow",
    version,
    about = "What does each level of abstraction cost? ResNet in PyTorch, TorchScript and LibTorch, measured side by side"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run implementations side by side and report what each costs.
    Run(Box<RunArgs>),
    /// Replay a recording in the TUI as it was seen (or a sweep directory in the sweep view); --headless prints its summary.
    Replay(ReplayArgs),
    /// Write a recording as a Chrome trace (Perfetto), CSV or JSON.
    Export(ExportArgs),
    /// Compare two recordings (or two sweeps, cell by cell): per implementation, B against A; exit 1 on a regression.
    Compare(CompareArgs),
    /// Run the same session over batch sizes and resolutions: a recording per cell, results.csv/json and figures.
    Sweep(Box<sweep::SweepArgs>),
    /// Print what golow found on this machine: python and torch, libtorch, CUDA, cuDNN, NVML and GPUs.
    Doctor(DoctorArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum ModelArg {
    Resnet50,
    Resnet18,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Train,
    Eval,
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Mode {
        match mode {
            ModeArg::Train => Mode::Train,
            ModeArg::Eval => Mode::Eval,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum ScheduleArg {
    Alternate,
    Parallel,
    Sequential,
}

#[derive(Args)]
#[command(allow_negative_numbers = true)]
struct RunArgs {
    /// No TUI: progress on stderr, summary table on stdout.
    #[arg(long)]
    headless: bool,
    /// Colour theme: dark, light, high-contrast, colorblind, or a path to a theme file.
    #[arg(long, default_value = "dark")]
    theme: String,
    /// Open the TUI on the compare view of these two workers, e.g. --compare libtorch,pytorch.
    #[arg(long, value_name = "A,B")]
    compare: Option<String>,
    /// Comma-separated implementations: pytorch, torchscript, libtorch [default: libtorch,pytorch, or none when --cmd is given].
    #[arg(long = "impl")]
    impls: Option<String>,
    /// Monitor your own command too: NAME='shell command' (repeatable). PyTorch scripts report their
    /// optimiser steps with no code change.
    #[arg(long = "cmd", value_name = "NAME=COMMAND")]
    commands: Vec<String>,
    #[arg(long, value_enum, default_value = "train")]
    mode: ModeArg,
    #[arg(long, default_value_t = 16)]
    batch_size: i64,
    /// Square input size in pixels [default: the dataset's own: synthetic 32, mnist 28, cifar10 32, stl10 96, pascal 224].
    #[arg(long)]
    resolution: Option<i64>,
    /// Steps to run, warm-up included [default: 100].
    #[arg(long, conflicts_with = "epochs")]
    steps: Option<i64>,
    /// Passes over the split the mode reads (training split for train, test split for eval).
    #[arg(long)]
    epochs: Option<i64>,
    /// How workers that share the machine take turns [default: alternate, or parallel with --cmd].
    #[arg(long, value_enum)]
    schedule: Option<ScheduleArg>,
    #[command(flatten)]
    session: SessionOptions,
    /// Write the summary JSON here (README, "Summary JSON").
    #[arg(long)]
    summary_json: Option<PathBuf>,
    /// Record the session here [default: recordings/<UTC time>-<workers>.golow].
    #[arg(long, value_name = "PATH", conflicts_with = "no_record")]
    record: Option<PathBuf>,
    /// Do not record the session.
    #[arg(long)]
    no_record: bool,
}

/// What the workers run and how they are watched: the same for a single run and for every cell of a sweep.
#[derive(Args)]
#[command(allow_negative_numbers = true)]
struct SessionOptions {
    #[arg(long, value_enum, default_value = "resnet50")]
    model: ModelArg,
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
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Learning rate of the SGD optimiser (momentum 0.9, weight decay 5e-4) every implementation uses.
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    /// Pin host batches (page-locked memory) before the host-to-device copy.
    #[arg(long)]
    pinned: bool,
    /// Python with torch 2.11 for the pytorch and torchscript workers [default: $GOLOW_PYTHON, else the .venv of `make build`].
    #[arg(long)]
    python: Option<PathBuf>,
    /// Process sampling period in milliseconds (at least 50).
    #[arg(long, default_value_t = 100)]
    interval: i64,
    /// Do not load golow's CUPTI collector into the workers (no kernel or copy records).
    #[arg(long)]
    no_cupti: bool,
}

#[derive(Args)]
struct ReplayArgs {
    /// A .golow recording, or a sweep's directory.
    file: PathBuf,
    /// No TUI: print the summary table (and write --summary-json).
    #[arg(long)]
    headless: bool,
    /// Write the summary JSON here (with --headless).
    #[arg(long, requires = "headless")]
    summary_json: Option<PathBuf>,
    /// Colour theme: dark, light, high-contrast, colorblind, or a path to a theme file.
    #[arg(long, default_value = "dark")]
    theme: String,
    /// Open on the compare view of these two workers, e.g. --compare libtorch,pytorch.
    #[arg(long, value_name = "A,B")]
    compare: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    ChromeTrace,
    Csv,
    Json,
}

#[derive(Args)]
struct ExportArgs {
    /// A .golow recording.
    file: PathBuf,
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Where to write (never overwritten half-way: written to a temporary file, then renamed).
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Args)]
struct CompareArgs {
    /// The baseline recording, or sweep directory.
    a: PathBuf,
    /// The recording (or sweep directory) compared against it.
    b: PathBuf,
    /// A ratio worse than 1 ± this, and beyond noise, is a regression (TorchBench's 7%).
    #[arg(long, default_value_t = 0.07)]
    threshold: f64,
}

#[derive(Args)]
struct DoctorArgs {
    /// Python to check [default: $GOLOW_PYTHON, else the .venv of `make build`].
    #[arg(long)]
    python: Option<PathBuf>,
}

/// A problem with what the user asked for: one line, exit code 2.
struct BadInput(String);

fn positive(flag: &str, value: i64) -> Result<u64, BadInput> {
    if value < 1 {
        return Err(BadInput(format!("{flag} must be at least 1 (got {value})")));
    }
    Ok(value as u64)
}

/// `NAME=COMMAND` pairs, with names unique among themselves and the implementations.
fn parse_commands(specs: &[String], impls: &[Impl]) -> Result<Vec<(String, String)>, BadInput> {
    let mut commands: Vec<(String, String)> = Vec::new();
    for spec in specs {
        let Some((name, command)) = spec.split_once('=') else {
            return Err(BadInput(format!(
                "--cmd '{spec}' needs the form NAME=COMMAND, e.g. --cmd train='python train.py'"
            )));
        };
        let (name, command) = (name.trim(), command.trim());
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(BadInput(format!(
                "--cmd name '{name}' must be letters, digits, '-' or '_'"
            )));
        }
        if command.is_empty() {
            return Err(BadInput(format!("--cmd {name}= names no command")));
        }
        if impls.iter().any(|i| i.name() == name) || commands.iter().any(|(n, _)| n == name) {
            return Err(BadInput(format!(
                "--cmd name '{name}' is already taken by another worker"
            )));
        }
        commands.push((name.to_string(), command.to_string()));
    }
    Ok(commands)
}

fn parse_impls(list: &str) -> Result<Vec<Impl>, BadInput> {
    let mut impls = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if name == "cudnn" {
            return Err(BadInput(cudnn_unavailable(
                crate::telemetry::cuda::device_count,
            )));
        }
        let i = Impl::parse(name).map_err(BadInput)?;
        if impls.contains(&i) {
            return Err(BadInput(format!("--impl names {name} twice")));
        }
        impls.push(i);
    }
    if impls.is_empty() {
        return Err(BadInput(
            "--impl names no implementation (known: pytorch, torchscript, libtorch)".into(),
        ));
    }
    Ok(impls)
}

/// Why `--impl cudnn` cannot run on this machine (checked before anything touches the driver): its GPU kernels
/// are not written yet (README, "GPU status").
fn cudnn_unavailable(gpus: impl FnOnce() -> Result<usize, String>) -> String {
    match gpus() {
        Err(why) => format!(
            "--impl cudnn needs an NVIDIA GPU, and this machine has none ({why}); use pytorch, torchscript or libtorch"
        ),
        Ok(0) => "--impl cudnn needs an NVIDIA GPU, and the CUDA driver reports none; use pytorch, torchscript or libtorch".into(),
        Ok(_) => "--impl cudnn: its GPU kernels are not part of this build yet (see README, \"GPU status\"); use pytorch, torchscript or libtorch".into(),
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

fn check_resolution(resolution: i64, batch_size: u64, mode: Mode) -> Result<u32, BadInput> {
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

fn check_output_path(flag: &str, path: &std::path::Path) -> Result<(), BadInput> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !parent.is_dir() {
        return Err(BadInput(format!(
            "{flag} {}: directory {} does not exist",
            path.display(),
            parent.display()
        )));
    }
    Ok(())
}

/// Where the session will be recorded, checked before anything runs.
enum RecordTo {
    Nowhere,
    Default,
    Path(PathBuf),
}

fn check_record(record: Option<PathBuf>, no_record: bool) -> Result<RecordTo, BadInput> {
    match (record, no_record) {
        (_, true) => Ok(RecordTo::Nowhere),
        (None, false) => Ok(RecordTo::Default),
        (Some(path), false) => {
            check_output_path("--record", &path)?;
            if path.exists() {
                return Err(BadInput(format!(
                    "--record {} exists: golow never overwrites a recording; choose another path",
                    path.display()
                )));
            }
            Ok(RecordTo::Path(path))
        }
    }
}

struct Validated {
    plan: Plan,
    record: RecordTo,
    /// `None` runs headless.
    tui: Option<TuiOptions>,
    interval: Duration,
    summary_json: Option<PathBuf>,
}

struct TuiOptions {
    theme: crate::ui::theme::Theme,
    compare: Option<(String, String)>,
}

fn parse_compare(pair: &str, workers: &[String]) -> Result<(String, String), BadInput> {
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

fn validate(args: RunArgs) -> Result<Validated, BadInput> {
    let impls = match (&args.impls, args.commands.is_empty()) {
        (Some(list), _) => parse_impls(list)?,
        (None, true) => vec![Impl::Libtorch, Impl::Pytorch],
        (None, false) => Vec::new(),
    };
    let commands = parse_commands(&args.commands, &impls)?;
    let dataset = DatasetSpec::parse(&args.session.dataset).map_err(|e| BadInput(e.to_string()))?;
    let mode = Mode::from(args.mode);
    let batch_size = positive("--batch-size", args.batch_size)?;
    if batch_size > 1 << 16 {
        return Err(BadInput(format!(
            "--batch-size {batch_size} is above golow's limit of 65536"
        )));
    }
    let resolution = check_resolution(
        args.resolution
            .unwrap_or(i64::from(dataset.default_resolution())),
        batch_size,
        mode,
    )?;
    let length = match (args.steps, args.epochs) {
        (_, Some(e)) => Length::Epochs(positive("--epochs", e)?),
        (Some(s), None) => Length::Steps(positive("--steps", s)?),
        (None, None) => Length::Steps(100),
    };
    if args.session.warmup < 0 {
        return Err(BadInput(format!(
            "--warmup cannot be negative (got {})",
            args.session.warmup
        )));
    }
    if args.session.interval < 50 {
        return Err(BadInput(format!(
            "--interval must be at least 50 ms (got {})",
            args.session.interval
        )));
    }
    if !(args.session.lr.is_finite() && args.session.lr > 0.0) {
        return Err(BadInput(format!(
            "--lr must be a positive number (got {})",
            args.session.lr
        )));
    }
    let schedule = match (args.schedule, commands.is_empty()) {
        (Some(ScheduleArg::Alternate), false) => {
            return Err(BadInput(
                "--cmd workers cannot take turns step by step: use --schedule parallel or sequential".into(),
            ));
        }
        (Some(ScheduleArg::Alternate), true) | (None, true) => Schedule::Alternate,
        (Some(ScheduleArg::Parallel), _) | (None, false) => Schedule::Parallel,
        (Some(ScheduleArg::Sequential), _) => Schedule::Sequential,
    };
    let threads = match args.session.threads {
        Some(t) => positive("--threads", t)? as u32,
        None => {
            let cores = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1);
            let sharing = if schedule == Schedule::Parallel {
                impls.len() + commands.len()
            } else {
                1
            };
            (cores / sharing).max(1) as u32
        }
    };
    if let Some(path) = &args.summary_json {
        check_output_path("--summary-json", path)?;
    }
    let record = check_record(args.record, args.no_record)?;
    let worker_names: Vec<String> = impls
        .iter()
        .map(|i| i.name().to_string())
        .chain(commands.iter().map(|(name, _)| name.clone()))
        .collect();
    let theme = crate::ui::theme::load(&args.theme).map_err(|e| BadInput(e.to_string()))?;
    let compare = args
        .compare
        .as_deref()
        .map(|p| parse_compare(p, &worker_names))
        .transpose()?;
    let tui = if args.headless {
        None
    } else {
        if !std::io::stdout().is_terminal() {
            return Err(BadInput(
                "the live view needs a terminal: add --headless to run without one".into(),
            ));
        }
        Some(TuiOptions { theme, compare })
    };
    let device = resolve_device(&args.session.device, crate::telemetry::cuda::device_count)?;
    let python = if impls.iter().any(|i| i.needs_python()) {
        let python = session::python::resolve(args.session.python);
        session::python::check(&python).map_err(BadInput)?;
        Some(python)
    } else {
        None
    };
    let collector = if args.session.no_cupti {
        None
    } else {
        Some(crate::telemetry::cupti::library().map_err(BadInput)?)
    };
    let worker_program = if impls.is_empty() {
        None
    } else {
        Some(worker_program().map_err(BadInput)?)
    };
    let model = match args.session.model {
        ModelArg::Resnet50 => Model::Resnet50,
        ModelArg::Resnet18 => Model::Resnet18,
    };
    let session = SessionConfig {
        workers: worker_names,
        commands: commands.iter().cloned().collect(),
        model,
        dataset: dataset.to_string(),
        mode,
        batch_size: batch_size as u32,
        resolution,
        steps: 0,
        warmup: args.session.warmup as u64,
        device,
        threads,
        schedule,
        seed: args.session.seed,
        pinned: args.session.pinned,
        optimiser: Optimiser {
            lr: args.session.lr,
            ..Optimiser::default()
        },
    };
    Ok(Validated {
        tui,
        record,
        plan: Plan {
            impls,
            commands,
            session,
            dataset,
            length,
            python,
            worker_program,
            collector,
        },
        interval: Duration::from_millis(args.session.interval as u64),
        summary_json: args.summary_json,
    })
}

/// `golow-worker` is installed next to `golow`.
pub fn worker_program() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the golow executable: {e}"))?;
    let worker = exe.with_file_name("golow-worker");
    if !worker.is_file() {
        return Err(format!(
            "{} is missing: golow-worker must sit next to golow (run `make build`)",
            worker.display()
        ));
    }
    Ok(worker)
}

/// Opens the recording file once the session is ready to start, so bad input leaves no file.
fn start_recording(
    to: RecordTo,
    session: &SessionConfig,
) -> Result<Option<(Recorder, recording::Sink)>, String> {
    let path = match to {
        RecordTo::Nowhere => return Ok(None),
        RecordTo::Path(path) => path,
        RecordTo::Default => {
            let dir = PathBuf::from("recordings");
            std::fs::create_dir_all(&dir).map_err(|e| {
                format!(
                    "cannot create {}: {e} (or pass --record PATH or --no-record)",
                    dir.display()
                )
            })?;
            recording::default_path(&dir, &session.workers, std::time::SystemTime::now())
        }
    };
    let header = recording::header_for(session, std::env::args().collect());
    Recorder::create(&path, &header)
        .map(Some)
        .map_err(|e| format!("cannot create the recording {}: {e}", path.display()))
}

fn write_summary(path: Option<&std::path::Path>, summary: &Summary) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let json = serde_json::to_string_pretty(summary).expect("the summary serialises");
    crate::files::write_atomically(path, |file| {
        std::io::Write::write_all(file, json.as_bytes())
    })
    .map_err(|e| format!("cannot write --summary-json {}: {e}", path.display()))
}

/// Why a subcommand stopped: its one line and exit code.
struct Failure {
    code: i32,
    message: String,
}

impl From<BadInput> for Failure {
    fn from(BadInput(message): BadInput) -> Failure {
        Failure {
            code: EXIT_BAD_INPUT,
            message,
        }
    }
}

fn failed(message: String) -> Failure {
    Failure {
        code: EXIT_WORKER_FAILED,
        message,
    }
}

/// The exit code of a subcommand, its failure printed.
fn exit_code(result: Result<i32, Failure>) -> i32 {
    result.unwrap_or_else(|failure| {
        eprintln!("golow: {}", failure.message);
        failure.code
    })
}

fn open_player(file: &std::path::Path) -> Result<recording::Player, BadInput> {
    let player = recording::Player::open(file)
        .map_err(|e| BadInput(format!("cannot replay {}: {e}", file.display())))?;
    if let Some(warning) = player.recording().warning() {
        eprintln!("golow: warning: {}: {warning}", file.display());
    }
    Ok(player)
}

/// Both recordings folded to their end, B's implementations against A's.
fn compare_recordings(
    a: &std::path::Path,
    b: &std::path::Path,
    threshold: f64,
) -> Result<Vec<crate::state::regression::Row>, BadInput> {
    let mut states = Vec::new();
    for file in [a, b] {
        let mut player = open_player(file)?;
        player.run_to_end();
        states.push(player.into_state());
    }
    Ok(crate::state::regression::compare(
        &states[0], &states[1], threshold,
    ))
}

fn replay(args: ReplayArgs) -> Result<i32, Failure> {
    if let Some(path) = &args.summary_json {
        check_output_path("--summary-json", path)?;
    }
    let theme = crate::ui::theme::load(&args.theme).map_err(|e| BadInput(e.to_string()))?;
    if !args.headless && !std::io::stdout().is_terminal() {
        return Err(BadInput(
            "the replay view needs a terminal: add --headless to print the summary".into(),
        )
        .into());
    }
    if args.file.is_dir() {
        if args.summary_json.is_some() {
            return Err(BadInput(format!(
                "{} is a sweep: it has no summary, its results are in {}",
                args.file.display(),
                args.file.join(crate::sweep::RESULTS_JSON).display()
            ))
            .into());
        }
        return sweep::replay(&args.file, args.headless, theme);
    }
    let mut player = open_player(&args.file)?;
    if args.headless {
        player.run_to_end();
        if let Some(damage) = player.damage_warning() {
            eprintln!("golow: warning: {}: {damage}", args.file.display());
        }
        let summary = Summary::from_state(player.state());
        print!("{}", crate::ui::report::table(&summary));
        write_summary(args.summary_json.as_deref(), &summary).map_err(failed)?;
        return Ok(EXIT_OK);
    }
    let workers = &player.recording().header.config.workers;
    let compare = args
        .compare
        .as_deref()
        .map(|p| parse_compare(p, workers))
        .transpose()?;
    player.index_checkpoints();
    let timeline = crate::ui::timeline::Timeline::new(
        player.recording().duration_ms(),
        args.file.display().to_string(),
    );
    recording::serve(player)
        .and_then(|source| {
            let app = crate::ui::app::App::new(theme, compare).replaying(timeline);
            crate::ui::replay::run(app, &source)
        })
        .map_err(|e| failed(format!("the replay failed: {e}")))?;
    Ok(EXIT_OK)
}

fn export(args: ExportArgs) -> Result<i32, Failure> {
    check_output_path("--output", &args.output)?;
    let mut player = open_player(&args.file)?;
    let format = match args.format {
        ExportFormat::ChromeTrace => crate::export::Format::ChromeTrace,
        ExportFormat::Csv => crate::export::Format::Csv,
        ExportFormat::Json => crate::export::Format::Json,
    };
    let header = serde_json::to_value(&player.recording().header).expect("the header serialises");
    let written = crate::files::write_atomically(&args.output, |file| {
        crate::export::export(&header, player.records(), format, file)
    });
    if let Err(e) = written {
        return Err(failed(format!(
            "cannot write {}: {e}",
            args.output.display()
        )));
    }
    if let Some(damage) = player.damage_warning() {
        eprintln!("golow: warning: {}: {damage}", args.file.display());
    }
    Ok(EXIT_OK)
}

fn compare(args: CompareArgs) -> Result<i32, Failure> {
    if !(args.threshold.is_finite() && (0.0..1.0).contains(&args.threshold)) {
        return Err(BadInput(format!(
            "--threshold must be a fraction between 0 and 1, e.g. 0.07 (got {})",
            args.threshold
        ))
        .into());
    }
    match (args.a.is_dir(), args.b.is_dir()) {
        (true, true) => return sweep::compare(&args.a, &args.b, args.threshold),
        (false, false) => {}
        _ => {
            return Err(BadInput(format!(
                "compare takes two recordings or two sweep directories, not one of each ({} and {})",
                args.a.display(),
                args.b.display()
            ))
            .into());
        }
    }
    let rows = compare_recordings(&args.a, &args.b, args.threshold)?;
    if rows.is_empty() {
        return Err(BadInput(format!(
            "{} and {} have no implementation in common",
            args.a.display(),
            args.b.display()
        ))
        .into());
    }
    print!(
        "{}",
        crate::ui::report::regression_table(&rows, args.threshold)
    );
    Ok(if rows.iter().any(|r| r.regression) {
        EXIT_WORKER_FAILED
    } else {
        EXIT_OK
    })
}

fn run(args: RunArgs) -> Result<i32, Failure> {
    let Validated {
        plan,
        record,
        tui,
        interval,
        summary_json,
    } = validate(args)?;
    let prepared = session::prepare(&plan).map_err(|e| match e {
        PrepareError::BadInput(message) => BadInput(message).into(),
        PrepareError::Setup(message) => failed(message),
    })?;
    let (recorder, sink) = start_recording(record, &prepared.session)
        .map_err(BadInput)?
        .unzip();
    let live = tui.is_some();
    let state = match tui {
        Some(TuiOptions { theme, compare }) => {
            let mut app = crate::ui::app::App::new(theme, compare);
            let mut history = None;
            if let Some(r) = &recorder {
                app = app.recording_to(r.path().display().to_string());
                // Scrolling back past what memory holds reads the file being written.
                history = recording::Player::open(r.path())
                    .ok()
                    .and_then(|player| recording::serve(player).ok());
            }
            crate::ui::live::run(&prepared, interval, app, sink, history)
        }
        None => {
            let stderr = std::io::stderr();
            let tty = stderr.is_terminal();
            let progress = crate::ui::progress::Progress::new(stderr, tty);
            let (_controls, control_rx) = tokio::sync::mpsc::unbounded_channel();
            session::run_blocking(
                prepared.session.clone(),
                prepared.workers.clone(),
                interval,
                &mut (progress, sink),
                control_rx,
            )
        }
    };
    let recorded = recorder.map(Recorder::finish);
    let state = state.map_err(|e| failed(format!("the session failed: {e}")))?;
    drop(prepared);
    let summary = Summary::from_state(&state);
    print!("{}", crate::ui::report::table(&summary));
    match recorded {
        Some(Ok(written)) => eprintln!(
            "golow: recorded {} events ({} bytes) to {}",
            written.events,
            written.bytes,
            written.path.display()
        ),
        Some(Err(e)) => return Err(failed(format!("the recording failed: {e}"))),
        None => {}
    }
    write_summary(summary_json.as_deref(), &summary).map_err(failed)?;
    let stopped = summary
        .workers
        .iter()
        .any(|w| w.status == crate::state::WorkerStatus::Stopped);
    let any_failed = summary
        .workers
        .iter()
        .any(|w| w.status == crate::state::WorkerStatus::Failed);
    // Quitting the live view is the user's choice; an interrupted headless run is not a success.
    Ok(if any_failed {
        EXIT_WORKER_FAILED
    } else if stopped && !live {
        EXIT_INTERRUPTED
    } else {
        EXIT_OK
    })
}

/// Clap's message on one line: the error and its hints, without the usage block.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Parses `std::env::args` and runs; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    EXIT_BAD_INPUT
                } else {
                    EXIT_OK
                };
            }
            eprintln!(
                "golow: {} (see golow --help)",
                one_line(&e.render().to_string())
            );
            return EXIT_BAD_INPUT;
        }
    };
    match cli.command {
        Command::Run(args) => exit_code(run(*args)),
        Command::Replay(args) => exit_code(replay(args)),
        Command::Export(args) => exit_code(export(args)),
        Command::Compare(args) => exit_code(compare(args)),
        Command::Sweep(args) => exit_code(sweep::sweep(*args)),
        Command::Doctor(args) => crate::doctor::run(args.python),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(parse_commands(&specs(&["python t.py"]), &[]).is_err());
        assert!(parse_commands(&specs(&["a b=x"]), &[]).is_err());
        assert!(parse_commands(&specs(&["a="]), &[]).is_err());
        assert!(parse_commands(&specs(&["a=x", "a=y"]), &[]).is_err());
        assert!(parse_commands(&specs(&["libtorch=x"]), &[Impl::Libtorch]).is_err());
    }

    #[test]
    fn the_cudnn_reason_says_what_is_missing() {
        let none = cudnn_unavailable(|| Err("no NVIDIA driver (libcuda not found)".into()));
        assert!(
            none.contains("libcuda not found")
                && none.starts_with("--impl cudnn needs an NVIDIA GPU")
        );
        assert!(cudnn_unavailable(|| Ok(1)).contains("not part of this build"));
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
