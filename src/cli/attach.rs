//! `golow attach PID…`: the live view (or headless summary) of running processes golow did not start, read from
//! /proc and NVML. golow never signals, stops or waits for them; ending the session detaches.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::time::Duration;

use clap::Args;
use golow_protocol::config::{Mode, Model, Optimiser, Schedule, SessionConfig};

use super::options::{
    check_interval, check_output_path, command_name, metrics_endpoint, positive, read_theme,
};
use super::run::{Outputs, live_options, open_failure, record_to, run_opened, what_next};
use super::{BadInput, Failure};
use crate::session::{Session, Target, process_command_line};
use crate::store::Store;
use crate::telemetry::procfs;

#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub struct AttachArgs {
    /// The processes to watch: each with its descendants (DataLoader workers, a launcher's ranks, processes started
    /// later), named after its script as --cmd names it.
    #[arg(value_name = "PID")]
    pids: Vec<String>,
    /// Read the processes from /proc and the GPU only: load no step hook into them.
    #[arg(long)]
    no_hook: bool,
    /// Let go of the named processes: remove the step hook an earlier `golow attach` loaded (as it does itself when
    /// its session ends), and exit.
    #[arg(long, conflicts_with_all = ["no_hook", "headless", "duration"])]
    detach: bool,
    /// No TUI: progress on stderr, summary table on stdout.
    #[arg(long)]
    headless: bool,
    /// Detach after this many seconds [default: when the processes end, or q / Ctrl-C].
    #[arg(long, value_name = "SECONDS")]
    duration: Option<i64>,
    /// Colour theme: dark, light, high-contrast, colorblind, or a path to a theme file.
    #[arg(long, default_value = "dark")]
    theme: String,
    /// The most frames a second the TUI draws (1 to 30).
    #[arg(long, default_value_t = 10)]
    fps: i64,
    /// Process sampling period in milliseconds (at least 50).
    #[arg(long, default_value_t = 100)]
    interval: i64,
    #[command(flatten)]
    outputs: Outputs,
    /// Serve the session's metrics for Prometheus at http://HOST:PORT/metrics (a port alone listens on 127.0.0.1; port
    /// 0 takes any free one, which golow prints) [default: off].
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
}

/// Longest `--duration`: a year, past which a number is a typo (or overflows the clock).
const MAX_DURATION_S: u64 = 365 * 24 * 3600;

pub fn attach(args: AttachArgs) -> Result<i32, Failure> {
    if args.pids.is_empty() {
        if args.detach {
            return Err(BadInput(
                "name the processes to let go of: golow attach --detach PID".into(),
            )
            .into());
        }
        return Ok(super::attach_list::list());
    }
    let targets = targets(&args.pids, !args.no_hook && !args.detach)?;
    if args.detach {
        return Ok(super::attach_list::let_go(&targets));
    }
    let interval = check_interval(args.interval)?;
    let stop_after = args
        .duration
        .map(|s| {
            positive("--duration", s)
                .and_then(|s| {
                    (s <= MAX_DURATION_S).then_some(s).ok_or_else(|| {
                        BadInput(format!(
                            "--duration must be at most {MAX_DURATION_S} s (got {s})"
                        ))
                    })
                })
                .map(Duration::from_secs)
        })
        .transpose()?;
    if let Some(path) = &args.outputs.summary_json {
        check_output_path("--summary-json", path)?;
    }
    let record = record_to(args.outputs.record.as_deref(), args.outputs.no_record, 1)?
        .pop()
        .expect("one session's recording");
    let live = live_options(args.headless, read_theme(&args.theme)?, None, args.fps)?;
    let store = Store::default();
    let _metrics = metrics_endpoint(args.metrics_addr.as_deref(), &store)?;
    let session = Session::attach(
        session_config(&targets),
        targets,
        &record,
        super::command_line(),
        interval,
    )
    .map_err(open_failure)?
    .stop_after(stop_after);
    let (code, recorded) = run_opened(
        session,
        live.as_ref(),
        args.outputs.summary_json.as_deref(),
        true,
        &store,
    )?;
    if let Some(path) = recorded {
        let _ = writeln!(std::io::stderr(), "{}", what_next(&path));
    }
    Ok(code)
}

/// The header of a session that attached to `targets`: their names and pids, watched side by side; the built-in
/// workers' settings are none of its business (the summary leaves them out).
fn session_config(targets: &[(String, Target)]) -> SessionConfig {
    SessionConfig {
        workers: targets.iter().map(|(name, _)| name.clone()).collect(),
        commands: BTreeMap::new(),
        model: Model::Resnet50,
        dataset: String::new(),
        mode: Mode::Train,
        batch_size: 0,
        resolution: 0,
        steps: 0,
        warmup: 0,
        device: String::new(),
        threads: 0,
        schedule: Schedule::Parallel,
        seed: 0,
        pinned: false,
        optimiser: Optimiser::default(),
        gpu_policy: None,
        compile_mode: None,
        command_env: BTreeMap::new(),
        stall_after_s: golow_protocol::config::DEFAULT_STALL_AFTER_S,
        monotonic_origin_ns: None,
        ops_every: 0,
        attached: targets
            .iter()
            .map(|(name, target)| (name.clone(), target.pid))
            .collect(),
    }
}

/// The processes the command line names, each checked and named: its script's name, with its pid where two share
/// one.
fn targets(pids: &[String], load_hook: bool) -> Result<Vec<(String, Target)>, BadInput> {
    let own = own_line();
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for word in pids {
        let pid = word
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&pid| pid > 0)
            .ok_or_else(|| {
                BadInput(format!(
                    "'{word}' is not a process ID (a positive whole number, as ps and pgrep print it)"
                ))
            })?;
        if !seen.insert(pid) {
            return Err(BadInput(format!(
                "process {pid} is named twice: name each process once"
            )));
        }
        found.push((pid, check(pid, &own, load_hook)?));
    }
    let bases: Vec<String> = found
        .iter()
        .map(|&(pid, _)| command_name(&process_command_line(pid).join(" ")))
        .collect();
    Ok(found
        .iter()
        .zip(&bases)
        .map(|(&(pid, target), base)| {
            let shared = bases.iter().filter(|b| *b == base).count() > 1;
            let name = if shared {
                format!("{base}-{pid}")
            } else {
                base.clone()
            };
            (name, target)
        })
        .collect())
}

/// golow's own process and its ancestors: a session watching them would watch itself.
fn own_line() -> HashSet<u32> {
    let mut line = HashSet::new();
    let mut pid = std::process::id();
    while pid != 0 && line.insert(pid) {
        pid = procfs::identity(pid).map_or(0, |id| id.parent);
    }
    line
}

/// `pid` as a process golow can attach to, or the one line that says why not.
fn check(pid: u32, own: &HashSet<u32>, load_hook: bool) -> Result<Target, BadInput> {
    let identity = procfs::identity(pid)
        .ok_or_else(|| BadInput(format!("process {pid} is gone (no /proc/{pid})")))?;
    if procfs::thread_group(pid) != Some(pid) {
        return Err(BadInput(format!(
            "{pid} is a thread, not a process: name its process (the Tgid in /proc/{pid}/status)"
        )));
    }
    if identity.zombie {
        return Err(BadInput(format!(
            "process {pid} has exited (a zombie its parent has not reaped)"
        )));
    }
    if identity.kernel_thread {
        return Err(BadInput(format!(
            "process {pid} is a kernel thread: golow attaches to programs"
        )));
    }
    if own.contains(&pid) {
        let whose = if pid == std::process::id() {
            "golow itself"
        } else {
            "one of golow's ancestors (the shell or program that started it)"
        };
        return Err(BadInput(format!(
            "process {pid} is {whose}: golow cannot watch itself"
        )));
    }
    if load_hook && let Some(why) = crate::session::watched_by_golow(pid) {
        return Err(BadInput(format!(
            "{why} (golow attach --no-hook {pid} reads it from /proc and the GPU alone)"
        )));
    }
    Ok(Target {
        pid,
        start: identity.start,
        load_hook,
    })
}
