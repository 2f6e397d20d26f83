//! Everything a session needs before its first worker starts, made once and shared by every worker:
//! the decoded data cache, the initial weights, the scripted model and the Python worker's sources.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::launcher::WorkerCommand;
use super::programs::{self, WorkerProgram};
use golow_data::DatasetSpec;
use golow_protocol::config::{AotiPackage, Impl, Mode, SessionConfig, WorkerConfig};
use golow_protocol::{collector, script};

/// The Python sources, embedded so that the `golow` binary is all a user needs to carry.
const PYTHON_SOURCES: [(&str, &str); 6] = [
    ("worker.py", include_str!("../workers/pytorch/worker.py")),
    (
        "golow_common.py",
        include_str!("../workers/pytorch/golow_common.py"),
    ),
    ("golow_operators.py", OPERATORS_SOURCE),
    ("resnet.py", include_str!("../workers/pytorch/resnet.py")),
    (
        "script_model.py",
        include_str!("../workers/pytorch/script_model.py"),
    ),
    (
        "package_model.py",
        include_str!("../workers/pytorch/package_model.py"),
    ),
];

/// The step hook `--cmd` workers get on PYTHONPATH, laid out so that only `sitecustomize` is importable from the
/// directory on PYTHONPATH: the hook's modules are in a directory no import statement can name (sitecustomize loads
/// them by path), and the optional API (`import golow`) is in one sitecustomize puts last on `sys.path`.
const HOOK_SOURCES: [(&str, &str); 4] = [
    (
        "sitecustomize.py",
        include_str!("../workers/pyhook/sitecustomize.py"),
    ),
    (
        "golow-hook/golow_step_hook.py",
        include_str!("../workers/pyhook/golow-hook/golow_step_hook.py"),
    ),
    ("golow-hook/golow_operators.py", OPERATORS_SOURCE),
    (
        "golow-api/golow.py",
        include_str!("../workers/pyhook/golow-api/golow.py"),
    ),
];

/// The operator recorder the Python levels and the hook share.
const OPERATORS_SOURCE: &str = include_str!("../workers/pytorch/golow_operators.py");

/// How long a run is: a number of steps, or of passes over the split the mode reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Steps(u64),
    Epochs(u64),
}

/// Why preparing failed: the user's input (exit 2) or the environment (exit 1).
#[derive(Debug)]
pub enum PrepareError {
    BadInput(String),
    Setup(String),
}

/// A session's working directory, removed when the session ends, however it ends.
pub struct SessionDir {
    path: PathBuf,
}

impl SessionDir {
    pub fn create() -> std::io::Result<SessionDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("golow-session-{}-{nanos}", std::process::id()));
        // The session's own (weights, configs, the event sockets): readable by its user alone, and never a directory
        // someone else made at that name beforehand.
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&path)?;
        Ok(SessionDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What `prepare` starts from: the validated command line.
#[derive(Clone)]
pub struct Plan {
    pub impls: Vec<Impl>,
    /// `--cmd` workers: name and shell command.
    pub commands: Vec<(String, String)>,
    pub session: SessionConfig,
    pub dataset: DatasetSpec,
    pub length: Length,
    pub python: Option<PathBuf>,
    /// `golow-worker`, when a built-in implementation runs.
    pub worker_program: Option<WorkerProgram>,
    /// The CUPTI collector library injected into every worker; `None` with `--no-cupti`.
    pub collector: Option<PathBuf>,
    /// The collector traces one window in this many (`--kernels-every`).
    pub kernels_every: u32,
    /// The exec interposer preloaded into `--cmd` workers, when there are some.
    pub interposer: Option<PathBuf>,
}

pub struct Prepared {
    /// Held, not read: the directory goes when the prepared session does.
    pub _dir: SessionDir,
    pub session: SessionConfig,
    pub workers: Vec<(String, WorkerCommand)>,
}

fn setup<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> PrepareError + '_ {
    move |e| PrepareError::Setup(format!("{what}: {e}"))
}

/// Runs a preparation step to completion; its stderr tail explains a failure.
fn run_step(what: &str, command: &mut Command) -> Result<(), PrepareError> {
    // SAFETY: only sched_setaffinity runs between fork and exec.
    unsafe {
        command.pre_exec(super::affinity::unpin_child);
    }
    let output = command.output().map_err(setup(what))?;
    if output.status.success() {
        return Ok(());
    }
    let last = super::last_stderr_line(&output);
    Err(PrepareError::Setup(format!(
        "{what} failed ({}): {last}",
        output.status
    )))
}

/// `announce` hears of each step that takes long enough to leave the user wondering (AOTInductor's packaging).
pub fn prepare(plan: &Plan, announce: &mut dyn FnMut(&str)) -> Result<Prepared, PrepareError> {
    let dir = SessionDir::create().map_err(setup("cannot create the session directory"))?;
    let (session, mut workers) = if plan.impls.is_empty() {
        (plan.session.clone(), Vec::new())
    } else {
        prepare_builtin(plan, &dir, announce)?
    };
    if !plan.commands.is_empty() {
        let hook_dir = dir.path().join("pyhook");
        if hook_dir.to_string_lossy().contains(':') {
            return Err(PrepareError::Setup(format!(
                "the session directory's path holds a colon, which PYTHONPATH cannot carry ({}): set TMPDIR to a \
                 directory without one",
                hook_dir.display()
            )));
        }
        write_sources(&hook_dir, &HOOK_SOURCES)?;
        let interposer = plan
            .interposer
            .as_deref()
            .ok_or_else(|| PrepareError::Setup("the exec interposer was not resolved".into()))?;
        for (i, (name, command)) in plan.commands.iter().enumerate() {
            let socket = dir.path().join(format!("events-{i}.sock"));
            if socket.as_os_str().len() >= MAX_SOCKET_PATH {
                return Err(PrepareError::Setup(format!(
                    "the session directory's path is too long for a socket ({}): set TMPDIR to a shorter directory",
                    socket.display()
                )));
            }
            workers.push((
                name.clone(),
                command_worker(command, &hook_dir, interposer, socket, &session),
            ));
        }
    }
    for (_, command) in &mut workers {
        command.collector.clone_from(&plan.collector);
        if plan.collector.is_some() {
            command
                .env
                .push((collector::EVERY_ENV.into(), plan.kernels_every.to_string()));
        }
    }
    Ok(Prepared {
        _dir: dir,
        session,
        workers,
    })
}

fn write_sources(dir: &Path, sources: &[(&str, &str)]) -> Result<(), PrepareError> {
    for (name, source) in sources {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(setup("cannot write the Python sources"))?;
        }
        std::fs::write(path, source).map_err(setup("cannot write the Python sources"))?;
    }
    Ok(())
}

/// What a Unix socket's address holds (`sun_path`, with its terminating zero).
const MAX_SOCKET_PATH: usize = 108;

/// `first`, then what `var` of golow's own environment holds, as a search path (LD_PRELOAD's too: it takes `:`).
fn prepended(first: &Path, var: &str) -> String {
    match std::env::var_os(var).filter(|p| !p.is_empty()) {
        Some(existing) => format!("{}:{}", first.display(), existing.to_string_lossy()),
        None => first.display().to_string(),
    }
}

/// A user's command, run by the shell as typed, with golow's step hook first on PYTHONPATH, its events on `socket`,
/// what `--threads` set, and which steps the hook records the operators of. The exec interposer, preloaded into the
/// shell and so into whatever it starts, puts the hook and these variables back into the environment of every program
/// started without them (a python called by its path with a PYTHONPATH of its own, `env -i`, `subprocess`'s `env=`).
fn command_worker(
    command: &str,
    hook_dir: &Path,
    interposer: &Path,
    socket: PathBuf,
    session: &SessionConfig,
) -> WorkerCommand {
    let mut env: Vec<(String, String)> = vec![
        ("PYTHONPATH".into(), prepended(hook_dir, "PYTHONPATH")),
        ("LD_PRELOAD".into(), prepended(interposer, "LD_PRELOAD")),
        (script::HOOK_DIR_ENV.into(), hook_dir.display().to_string()),
        (script::OPS_EVERY_ENV.into(), session.ops_every.to_string()),
        (script::OPS_WARMUP_ENV.into(), session.warmup.to_string()),
    ];
    env.extend(
        session
            .command_env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    // The launcher sets the socket's and the collector's variables; a name that is not set is not put back.
    let kept: Vec<&str> = env
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| !matches!(*name, "PYTHONPATH" | "LD_PRELOAD"))
        .chain([script::SOCKET_ENV, script::EXEC_KEEP_ENV])
        .chain(collector::VARIABLES)
        .collect();
    env.push((script::EXEC_KEEP_ENV.into(), kept.join(":")));
    WorkerCommand {
        program: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), command.into()],
        env,
        collector: None,
        event_socket: Some(socket),
    }
}

type Workers = Vec<(String, WorkerCommand)>;

/// Inductor's cache lives in the session's directory, so a session compiles from cold and leaves nothing behind,
/// unless the user points `TORCHINDUCTOR_CACHE_DIR` elsewhere (the compile events say which it was). torch puts
/// things under `$TMPDIR` whatever the cache (Inductor's precompiled headers; its default cache directory, made by
/// the first optimiser step even in eager mode), so `$TMPDIR` is the session's too.
fn python_env(
    implementation: Impl,
    session_dir: &Path,
) -> Result<Vec<(String, String)>, PrepareError> {
    let mut env = vec![
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        session_tmp(session_dir)?,
    ];
    if implementation.uses_inductor() && std::env::var_os("TORCHINDUCTOR_CACHE_DIR").is_none() {
        let cache = session_dir.join("inductor-cache");
        env.push((
            "TORCHINDUCTOR_CACHE_DIR".into(),
            cache.display().to_string(),
        ));
    }
    Ok(env)
}

/// libtorch's AOTInductor runtime unpacks the package's library under `$TMPDIR`, and leaves it there when the
/// worker is killed: in the session's directory it goes with the session.
fn rust_worker_env(
    implementation: Impl,
    session_dir: &Path,
) -> Result<Vec<(String, String)>, PrepareError> {
    if implementation != Impl::Aoti {
        return Ok(Vec::new());
    }
    Ok(vec![session_tmp(session_dir)?])
}

/// `TMPDIR` inside the session's directory, for what a worker's libraries put there.
fn session_tmp(session_dir: &Path) -> Result<(String, String), PrepareError> {
    let tmp = session_dir.join("tmp");
    std::fs::create_dir_all(&tmp)
        .map_err(setup("cannot create the session's temporary directory"))?;
    Ok(("TMPDIR".into(), tmp.display().to_string()))
}

/// The files the built-in implementations share (data cache, weights, scripted model) and their commands.
fn prepare_builtin(
    plan: &Plan,
    dir: &SessionDir,
    announce: &mut dyn FnMut(&str),
) -> Result<(SessionConfig, Workers), PrepareError> {
    let dataset = golow_data::load(&plan.dataset, plan.session.resolution)
        .map_err(|e| PrepareError::BadInput(e.to_string()))?;
    let data_dir = dir.path().join("data");
    let meta = golow_data::write_cache(&dataset, &data_dir)
        .map_err(setup("cannot write the data cache"))?;
    drop(dataset);

    let (split_name, split_count) = match plan.session.mode {
        Mode::Train => ("training", meta.train_count),
        Mode::Eval => ("test", meta.test_count),
    };
    let per_epoch = split_count / u64::from(plan.session.batch_size);
    if per_epoch == 0 {
        return Err(PrepareError::BadInput(format!(
            "--batch-size {} is larger than the {split_name} split of {} ({split_count} samples)",
            plan.session.batch_size, plan.dataset
        )));
    }
    let steps = match plan.length {
        Length::Steps(n) => n,
        Length::Epochs(n) => n.saturating_mul(per_epoch),
    };
    if steps <= plan.session.warmup {
        return Err(PrepareError::BadInput(format!(
            "{steps} steps leave nothing to measure after {} warm-up steps: raise --steps/--epochs or lower --warmup",
            plan.session.warmup
        )));
    }
    let mut session = plan.session.clone();
    session.steps = steps;

    let python_dir = dir.path().join("pytorch");
    write_sources(&python_dir, &PYTHON_SOURCES)?;

    let needs_script = plan.impls.contains(&Impl::Torchscript);
    let needs_package = plan.impls.contains(&Impl::Aoti);
    let config = WorkerConfig {
        model: session.model,
        mode: session.mode,
        dataset: session.dataset.clone(),
        data_dir,
        weights: dir.path().join("weights.safetensors"),
        torchscript: needs_script.then(|| dir.path().join("resnet.torchscript.pt")),
        aoti: needs_package.then(|| AotiPackage {
            package: dir.path().join("resnet.pt2"),
            packaging: dir.path().join("packaging.json"),
        }),
        channels: meta.channels,
        classes: meta.classes,
        batch_size: session.batch_size,
        resolution: session.resolution,
        steps,
        warmup: session.warmup,
        device: session.device.clone(),
        threads: session.threads,
        seed: session.seed,
        pinned: session.pinned,
        optimiser: session.optimiser,
        gpu_policy: session.gpu_policy.unwrap_or_default(),
        compile_mode: session.compile_mode.unwrap_or_default(),
        ops_every: session.ops_every,
        ops_library: (session.ops_every > 0 && plan.impls.iter().any(|i| i.is_python()))
            .then(programs::ops_library)
            .flatten(),
    };
    let config_path = dir.path().join("config.json");
    let json =
        serde_json::to_string_pretty(&config).map_err(setup("cannot encode the worker config"))?;
    std::fs::write(&config_path, json).map_err(setup("cannot write the worker config"))?;
    let config_arg = config_path.display().to_string();
    let worker_program = plan
        .worker_program
        .clone()
        .ok_or_else(|| PrepareError::Setup("golow-worker was not resolved".into()))?;

    run_step(
        "writing the initial weights",
        &mut worker_program.command(["init-weights", "--config", &config_arg]),
    )?;
    let python = || {
        plan.python.clone().ok_or_else(|| {
            PrepareError::Setup("no python was resolved for a Python implementation".into())
        })
    };
    if needs_script {
        run_step(
            "scripting the model for torchscript",
            Command::new(python()?)
                .arg(python_dir.join("script_model.py"))
                .args(["--config", &config_arg])
                .envs(python_env(Impl::Torchscript, dir.path())?),
        )?;
    }
    if needs_package {
        let what = "compiling the model ahead of time for aoti (torch.export, AOTInductor)";
        announce(what);
        run_step(
            what,
            Command::new(python()?)
                .arg(python_dir.join("package_model.py"))
                .args(["--config", &config_arg])
                .envs(python_env(Impl::Aoti, dir.path())?),
        )?;
    }

    let mut workers = Vec::new();
    for &implementation in &plan.impls {
        let command = match implementation {
            Impl::Pytorch | Impl::Compile => WorkerCommand {
                program: python()?,
                args: vec![
                    python_dir.join("worker.py").display().to_string(),
                    "--impl".into(),
                    implementation.name().into(),
                    "--config".into(),
                    config_arg.clone(),
                ],
                env: python_env(implementation, dir.path())?,
                collector: None,
                event_socket: None,
            },
            Impl::Libtorch | Impl::Torchscript | Impl::Aoti | Impl::Aten | Impl::Cudnn => {
                WorkerCommand {
                    program: worker_program.path.clone(),
                    args: vec![
                        "run".into(),
                        "--impl".into(),
                        implementation.name().into(),
                        "--config".into(),
                        config_arg.clone(),
                    ],
                    env: [
                        worker_program.env.clone(),
                        rust_worker_env(implementation, dir.path())?,
                    ]
                    .concat(),
                    collector: None,
                    event_socket: None,
                }
            }
        };
        workers.push((implementation.name().to_string(), command));
    }
    Ok((session, workers))
}
