//! `golow run`: implementations (and your commands) side by side, in the live view or headless.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use golow_protocol::config::{Impl, Mode, Schedule};

use super::options::{
    SessionOptions, Workload, check_batch_size, check_output_path, check_resolution,
    parse_commands, parse_compare, parse_impls, positive, read_theme,
};
use super::{BadInput, EXIT_INTERRUPTED, EXIT_OK, EXIT_WORKER_FAILED, Failure, failed};
use crate::console::headless_progress::Progress;
use crate::recording;
use crate::session::{Length, OpenError, PrepareError, RecordTo, Session};
use crate::state::{Summary, WorkerStatus};
use crate::store::Store;
use crate::ui::Wakes;
use crate::ui::app::App;
use crate::ui::session_screen::{History, Source};
use crate::ui::theme::Theme;

#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// No TUI: progress on stderr, summary table on stdout.
    #[arg(long)]
    headless: bool,
    /// Colour theme: dark, light, high-contrast, colorblind, or a path to a theme file.
    #[arg(long, default_value = "dark")]
    theme: String,
    /// Open the TUI on the compare view of these two workers, e.g. --compare libtorch,pytorch.
    #[arg(long, value_name = "A,B")]
    compare: Option<String>,
    /// The most frames a second the TUI draws (1 to 30); it draws only when something on screen changed, and never
    /// more often than the sampling interval brings news.
    #[arg(long, default_value_t = 10)]
    fps: i64,
    /// Comma-separated implementations: pytorch, compile, torchscript, aoti (eval only), libtorch, aten, cudnn (GPU only) [default: libtorch,pytorch, or none when --cmd is given].
    #[arg(long = "impl")]
    impls: Option<String>,
    /// Monitor your own command: 'python train.py' (named after its script), or NAME='shell command' with a
    /// lower-case NAME (repeatable). PyTorch scripts report their optimiser steps with no code change; the python
    /// must have torch.
    #[arg(long = "cmd", value_name = "[NAME=]COMMAND")]
    commands: Vec<String>,
    /// train: forward, loss, backward and the SGD step; eval: forward and loss, no gradients (what aoti runs).
    #[arg(long, value_enum, default_value = "train")]
    mode: Mode,
    /// Samples per step, for every built-in implementation.
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
    schedule: Option<Schedule>,
    #[command(flatten)]
    session: SessionOptions,
    #[command(flatten)]
    outputs: Outputs,
    /// Headless: do not pass through what --cmd workers print (by default each line goes to stderr after the
    /// worker's name; the recording keeps it either way).
    #[arg(long)]
    hide_output: bool,
    /// Run the session N times, one after another (headless), each recorded on its own (--record x.golow gives
    /// x-1.golow … x-N.golow, --summary-json likewise), so that `golow compare` can weigh the spread between sessions.
    #[arg(long, default_value_t = 1, value_name = "N")]
    repeat: i64,
}

/// Where a session's summary and recording go: `run` and `attach` share them.
#[derive(Args)]
pub struct Outputs {
    /// Write the summary JSON here (docs/summary-json.md).
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
    /// Record the session here [default: recordings/<UTC time>-<workers>.golow].
    #[arg(long, value_name = "PATH", conflicts_with = "no_record")]
    pub record: Option<PathBuf>,
    /// Do not record the session.
    #[arg(long)]
    pub no_record: bool,
}

/// Sessions `--repeat` runs at most.
const MAX_REPEAT: i64 = 100;

/// `x.golow` → `x-3.golow` for the third of several sessions; the path itself for a single one.
fn numbered(path: &Path, k: u64, of: u64) -> PathBuf {
    if of == 1 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{k}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{k}"),
    };
    path.with_file_name(name)
}

/// The live view's own options; without them the run is headless.
pub struct LiveOptions {
    pub theme: Theme,
    pub compare: Option<(String, String)>,
    pub frame: Duration,
}

const MAX_FPS: i64 = 30;

/// The live view's options, checked; `None` headless. A live view needs a terminal.
pub fn live_options(
    headless: bool,
    theme: Theme,
    compare: Option<(String, String)>,
    fps: i64,
) -> Result<Option<LiveOptions>, BadInput> {
    let frame = frame_of(fps)?;
    if headless {
        return Ok(None);
    }
    if !std::io::stdout().is_terminal() {
        return Err(BadInput(
            "the live view needs a terminal: add --headless to run without one".into(),
        ));
    }
    Ok(Some(LiveOptions {
        theme,
        compare,
        frame,
    }))
}

fn frame_of(fps: i64) -> Result<Duration, BadInput> {
    if !(1..=MAX_FPS).contains(&fps) {
        return Err(BadInput(format!(
            "--fps must be between 1 and {MAX_FPS} (got {fps})"
        )));
    }
    Ok(Duration::from_secs(1) / fps as u32)
}

fn workload(args: &RunArgs, default_resolution: u32) -> Result<Workload, BadInput> {
    let impls = match (&args.impls, args.commands.is_empty()) {
        (Some(list), _) => parse_impls(list)?,
        (None, true) => vec![Impl::Libtorch, Impl::Pytorch],
        (None, false) => Vec::new(),
    };
    let commands = parse_commands(&args.commands, &impls)?;
    let batch_size = check_batch_size(positive("--batch-size", args.batch_size)?)?;
    let resolution = check_resolution(
        args.resolution.unwrap_or(i64::from(default_resolution)),
        u64::from(batch_size),
        args.mode,
    )?;
    if impls.is_empty() && (args.steps.is_some() || args.epochs.is_some()) {
        return Err(BadInput(
            "--steps and --epochs size the built-in implementations' runs; a --cmd script runs its own loop to its \
             end (stop it early with Ctrl-C, or q in the live view)"
                .into(),
        ));
    }
    let length = match (args.steps, args.epochs) {
        (_, Some(e)) => Length::Epochs(positive("--epochs", e)?),
        (Some(s), None) => Length::Steps(positive("--steps", s)?),
        (None, None) => Length::Steps(100),
    };
    args.session.check()?;
    let schedule = match (args.schedule, commands.is_empty()) {
        (Some(Schedule::Alternate), false) => {
            return Err(BadInput(
                "--cmd workers cannot take turns step by step: use --schedule parallel or sequential".into(),
            ));
        }
        (Some(schedule), _) => schedule,
        (None, true) => Schedule::Alternate,
        (None, false) => Schedule::Parallel,
    };
    Ok(Workload {
        impls,
        commands,
        mode: args.mode,
        batch_size,
        resolution,
        length,
        schedule,
    })
}

/// Where each of `sessions` is recorded, checked before anything runs.
pub fn record_to(
    record: Option<&Path>,
    no_record: bool,
    sessions: u64,
) -> Result<Vec<RecordTo>, BadInput> {
    (1..=sessions)
        .map(|k| match (record, no_record) {
            (_, true) => Ok(RecordTo::Nowhere),
            (None, false) => Ok(RecordTo::DefaultIn(PathBuf::from("recordings"))),
            (Some(path), false) => {
                let path = numbered(path, k, sessions);
                check_output_path("--record", &path)?;
                if path.exists() {
                    return Err(BadInput(format!(
                        "--record {} exists: golow never overwrites a recording; choose another path",
                        path.display()
                    )));
                }
                Ok(RecordTo::Path(path))
            }
        })
        .collect()
}

/// `--repeat`: how many sessions, checked.
fn repeats(repeat: i64, headless: bool) -> Result<u64, BadInput> {
    if !(1..=MAX_REPEAT).contains(&repeat) {
        return Err(BadInput(format!(
            "--repeat must be between 1 and {MAX_REPEAT} (got {repeat})"
        )));
    }
    if repeat > 1 && !headless {
        return Err(BadInput(
            "--repeat runs its sessions one after another without the live view: add --headless"
                .into(),
        ));
    }
    Ok(repeat as u64)
}

pub fn run(args: RunArgs) -> Result<i32, Failure> {
    let dataset = args.session.dataset()?;
    let workload = workload(&args, dataset.default_resolution())?;
    let workers = workload.workers();
    let threads = args.session.threads(workload.schedule, workers.len())?;
    let sessions = repeats(args.repeat, args.headless)?;
    let summaries: Vec<Option<PathBuf>> = (1..=sessions)
        .map(|k| {
            let path = args
                .outputs
                .summary_json
                .as_deref()
                .map(|p| numbered(p, k, sessions));
            if let Some(path) = &path {
                check_output_path("--summary-json", path)?;
            }
            Ok(path)
        })
        .collect::<Result<_, BadInput>>()?;
    let records = record_to(
        args.outputs.record.as_deref(),
        args.outputs.no_record,
        sessions,
    )?;
    let theme = read_theme(&args.theme)?;
    let compare = args
        .compare
        .as_deref()
        .map(|p| parse_compare(p, &workers))
        .transpose()?;
    let live = live_options(args.headless, theme, compare, args.fps)?;
    let interval = args.session.interval();
    let plan = args.session.plan(dataset, workload, threads)?;
    args.session.pin_monitor()?;
    // One store for every session in turn: `--metrics-addr` serves the running one from it.
    let store = Store::default();
    let _metrics = args.session.metrics(&store)?;
    if !plan.session.command_env.is_empty() {
        let set: Vec<String> = plan
            .session
            .command_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        eprintln!(
            "golow: --threads {threads}: the --cmd workers run with {} (a variable your environment sets is kept)",
            set.join(" ")
        );
    }
    let mut worst = EXIT_OK;
    let mut recorded = Vec::new();
    for (k, (record, summary_json)) in records.iter().zip(&summaries).enumerate() {
        if sessions > 1 {
            sayln!("session {} of {sessions}", k + 1);
        }
        let (code, path) = one_session(
            &plan,
            record,
            interval,
            live.as_ref(),
            summary_json.as_deref(),
            !args.hide_output,
            &store,
        )?;
        recorded.extend(path);
        worst = worst.max(code);
        if code == EXIT_INTERRUPTED || crate::termination::received().is_some() {
            break;
        }
    }
    if sessions > 1 && !recorded.is_empty() {
        let names: Vec<String> = recorded.iter().map(|p| p.display().to_string()).collect();
        sayln!(
            "{} sessions recorded: compare them with another setup's as golow compare {} --vs …",
            recorded.len(),
            golow_protocol::text::printable(&names.join(" "))
        );
    } else if let [path] = recorded.as_slice() {
        let _ = writeln!(std::io::stderr(), "{}", what_next(path));
    }
    Ok(worst)
}

/// One line on what a recording is good for, with commands to paste.
pub fn what_next(recording: &Path) -> String {
    let path = recording.display().to_string();
    match shell_word(&path) {
        Ok(word) => {
            let file = golow_protocol::text::printable(&word);
            format!(
                "golow: next: golow replay {file} (watch it again) · golow export {file} --format chrome-trace -o trace.json \
                 (Perfetto) · golow compare {file} OTHER.golow (after a change)"
            )
        }
        Err(e) => format!(
            "golow: recorded to {}, a path no shell command can name ({e})",
            golow_protocol::text::printable(&path)
        ),
    }
}

/// `word` as a shell reads it back: as it is when it holds nothing the shell treats specially, else quoted; an
/// error for a word no shell can be given (one holding a NUL byte).
fn shell_word(word: &str) -> Result<std::borrow::Cow<'_, str>, shlex::QuoteError> {
    shlex::try_quote(word)
}

/// One session of `plan`, to its end: its summary printed and written, its exit code and where it was recorded.
fn one_session(
    plan: &crate::session::Plan,
    record: &RecordTo,
    interval: Duration,
    live: Option<&LiveOptions>,
    summary_json: Option<&Path>,
    pass_output: bool,
    store: &Store,
) -> Result<(i32, Option<PathBuf>), Failure> {
    // Before the TUI takes the terminal, so said in both modes.
    let mut announce = |what: &str| eprintln!("golow: {what}…");
    let session = Session::open(plan, record, super::command_line(), interval, &mut announce)
        .map_err(open_failure)?;
    run_opened(session, live, summary_json, pass_output, store)
}

/// Why a session could not open, as the command says it.
pub fn open_failure(e: OpenError) -> Failure {
    match e {
        OpenError::Prepare(PrepareError::BadInput(message)) | OpenError::Recording(message) => {
            BadInput(message).into()
        }
        OpenError::Prepare(PrepareError::Setup(message)) => failed(message),
    }
}

/// An opened session, live or headless, to its end: its summary printed and written, its exit code and where it was
/// recorded.
pub fn run_opened(
    session: Session,
    live: Option<&LiveOptions>,
    summary_json: Option<&Path>,
    pass_output: bool,
    store: &Store,
) -> Result<(i32, Option<PathBuf>), Failure> {
    let finished = match live {
        Some(options) => watch(session, options, store)?,
        None => {
            let mut progress = Progress::new(std::io::stderr().is_terminal(), pass_output);
            let (_controls, control_rx) = tokio::sync::mpsc::unbounded_channel();
            let finished = session.run(store, &mut progress, control_rx);
            drop(progress);
            finished
        }
    };
    let summary = finished.summary.map_err(failed)?;
    // The summary is written whatever became of the recording (it may well go to another disk), and before the table
    // is printed to a terminal that a hang-up may have closed: printing there fails, and is not a reason to stop.
    let summary_written = write_summary(summary_json, &summary);
    let _ = write!(
        std::io::stdout(),
        "{}",
        golow_protocol::text::printable(&crate::console::tables::table(&summary))
    );
    let recorded = match finished.recorded {
        Some(Ok(written)) => {
            let _ = writeln!(
                std::io::stderr(),
                "golow: recorded {} events ({} bytes) to {}",
                written.events,
                written.bytes,
                golow_protocol::text::printable(&written.path.display().to_string())
            );
            Some(written.path)
        }
        Some(Err(e)) => {
            summary_written.map_err(failed)?;
            return Err(failed(format!(
                "the recording failed: {e} (what was written before replays; the summary was written)"
            )));
        }
        None => None,
    };
    summary_written.map_err(failed)?;
    let stopped = summary
        .workers
        .iter()
        .any(|w| w.status == WorkerStatus::Stopped);
    let any_failed = summary
        .workers
        .iter()
        .any(|w| w.status == WorkerStatus::Failed);
    // Quitting the live view is the user's choice; an interrupted headless run is not a success. (One a signal
    // ended exits as that signal would have: `cli::exit_code` says so for every subcommand.)
    let code = if any_failed {
        EXIT_WORKER_FAILED
    } else if stopped && live.is_none() {
        EXIT_INTERRUPTED
    } else {
        EXIT_OK
    };
    Ok((code, recorded))
}

/// The session in the live view until the user quits.
fn watch(
    session: Session,
    options: &LiveOptions,
    store: &Store,
) -> Result<crate::session::Finished, Failure> {
    let mut app = App::new(options.theme.clone(), options.compare.clone());
    let wakes = Wakes::default();
    let mut history = None;
    if let Some(path) = session.recording() {
        app = app.recording_to(path.display().to_string());
        // Scrolling back past what memory holds reads the file being written.
        history = recording::Player::open(path).ok().and_then(|player| {
            let store = player.store().clone();
            let (requests, _) = recording::serve(player, wakes.notifier()).ok()?;
            Some(History { requests, store })
        });
    }
    let running = session
        .start(store.clone(), wakes.notifier())
        .map_err(|e| failed(format!("the session failed: {e}")))?;
    let controls = running.controls.clone();
    let source = Source::Session { controls, history };
    let shown = crate::ui::session_screen::run(app, store.clone(), source, wakes, options.frame);
    let finished = running.finish();
    // A terminal lost with no signal to say why (stdin closed): the view stopped the session, whose summary and
    // recording are still kept.
    if let Err(e) = shown {
        let _ = writeln!(
            std::io::stderr(),
            "golow: the terminal was lost ({e}); the workers were stopped"
        );
    }
    Ok(finished)
}

pub fn write_summary(path: Option<&std::path::Path>, summary: &Summary) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let json = serde_json::to_string_pretty(summary).expect("the summary serialises");
    crate::output_files::write_atomically(path, |file| {
        std::io::Write::write_all(file, json.as_bytes())
    })
    .map_err(|e| format!("cannot write --summary-json {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_next_names_the_recording_as_a_shell_reads_it_back() {
        let line = what_next(Path::new(
            "recordings/20261121T221837Z-libtorch-pytorch.golow",
        ));
        assert!(
            line.starts_with(
                "golow: next: golow replay recordings/20261121T221837Z-libtorch-pytorch.golow "
            ),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        for command in ["golow export ", "golow compare "] {
            assert!(line.contains(command), "{line}");
        }
    }

    #[test]
    fn a_shell_word_reads_back_as_the_word() {
        let plain = "recordings/20261121T221837Z-libtorch-pytorch.golow";
        assert_eq!(shell_word(plain).unwrap(), plain);
        for word in [
            plain,
            "runs/a b.golow",
            "it's.golow",
            "$HOME.golow",
            "`id`.golow",
            "a\"b\\c.golow",
            "!x^y*?[z]{a,b}~#;&|<>().golow",
            "tab\there\nnewline.golow",
            "\u{e9}t\u{e9}.golow",
            "-n",
            "",
        ] {
            let quoted = shell_word(word).unwrap();
            assert_eq!(
                shlex::split(&quoted),
                Some(vec![word.to_string()]),
                "{quoted}"
            );
            let printed = std::process::Command::new("/bin/sh")
                .args(["-c", &format!("printf %s {quoted}")])
                .output()
                .unwrap();
            assert!(printed.status.success(), "{quoted}");
            assert_eq!(String::from_utf8_lossy(&printed.stdout), word, "{quoted}");
        }
    }

    #[test]
    fn a_path_no_shell_can_name_is_said_in_one_line() {
        let line = what_next(Path::new("runs/a\0b.golow"));
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.contains("no shell command can name"), "{line}");
        assert!(!line.contains('\0'), "{line}");
    }
}
