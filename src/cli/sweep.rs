//! `golow sweep`: validates the grid and the session every cell runs (with `golow run`'s own checks), then hands
//! them to the sweep runner, headless or under the sweep view.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use golow_protocol::config::{Mode, Schedule};

use super::options::{
    SessionOptions, Workload, check_batch_size, check_resolution, parse_impls, positive, read_theme,
};
use super::{BadInput, EXIT_INTERRUPTED, EXIT_OK, EXIT_WORKER_FAILED, Failure, failed};
use crate::session::Length;
use crate::sweep::run::{Outcome, StopHandle, Sweep};
use crate::sweep::tracker::{StderrProgress, Tracker};
use crate::sweep::{Cell, RESULTS_CSV, RESULTS_JSON, Results, RowStatus, SweepConfig, cells};
use crate::ui::Wakes;
use crate::ui::sweep_charts::SweepView;

/// Axis values per sweep: enough for 8 … 65536 in powers of two and then some.
const MAX_AXIS_VALUES: usize = 32;

#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub struct SweepArgs {
    /// No TUI: a progress bar with ETA on stderr, the results table on stdout.
    #[arg(long)]
    headless: bool,
    /// Colour theme of the sweep view: dark, light, high-contrast, colorblind, or a path to a theme file.
    #[arg(long, default_value = "dark")]
    theme: String,
    /// Comma-separated implementations: pytorch, compile, torchscript, aoti (eval only), libtorch, aten, cudnn (GPU only).
    #[arg(long = "impl", default_value = "libtorch,pytorch")]
    impls: String,
    /// train: forward, loss, backward and the SGD step, as golow run does; eval: forward and loss, no gradients (what
    /// aoti runs).
    #[arg(long, value_enum, default_value = "train")]
    mode: Mode,
    /// Comma-separated batch sizes, e.g. 8,16,32,64.
    #[arg(long, value_name = "LIST", default_value = "8,16,32,64")]
    batch_sizes: String,
    /// Comma-separated resolutions in pixels [default: the dataset's own].
    #[arg(long, value_name = "LIST")]
    resolutions: Option<String>,
    /// Steps per implementation per cell, warm-up included.
    #[arg(long, default_value_t = 30)]
    steps: i64,
    #[command(flatten)]
    session: SessionOptions,
    /// The sweep's directory [default: sweeps/<UTC time>-<mode>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the sweep in --out, skipping the cells it finished.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Sessions per cell, one after another (each alternating the implementations): the results and figures give
    /// their median with the min–max range.
    #[arg(long, default_value_t = 1, value_name = "N")]
    repeat: i64,
}

/// Sessions per cell at most: a sweep of a few cells repeated this often already runs for hours.
const MAX_REPEAT: i64 = 20;

/// A comma-separated list of positive integers, sorted and without repeats.
fn parse_list(flag: &str, list: &str) -> Result<Vec<u32>, BadInput> {
    let mut values = Vec::new();
    for item in list.split(',').map(str::trim) {
        match item.parse::<u32>() {
            Ok(v) if v > 0 => values.push(v),
            _ => {
                return Err(BadInput(format!(
                    "{flag} '{list}': '{item}' is not a positive whole number (e.g. {flag} 8,16,32)"
                )));
            }
        }
    }
    values.sort_unstable();
    values.dedup();
    if values.len() > MAX_AXIS_VALUES {
        return Err(BadInput(format!(
            "{flag} has {} values; a sweep takes at most {MAX_AXIS_VALUES} per axis",
            values.len()
        )));
    }
    Ok(values)
}

fn default_out(mode: Mode) -> PathBuf {
    let stamp = crate::recording::utc(std::time::SystemTime::now()).replace(['-', ':'], "");
    PathBuf::from("sweeps").join(format!("{stamp}-{}", mode.name()))
}

/// The directory is new, or holds the sweep `--resume` continues; never a sweep it would overwrite.
fn check_out(dir: &Path, resume: bool) -> Result<Option<Results>, BadInput> {
    if dir.exists() && !dir.is_dir() {
        return Err(BadInput(format!(
            "--out {} is a file, not a directory",
            dir.display()
        )));
    }
    let has_results = dir.join(RESULTS_JSON).is_file();
    match (resume, has_results) {
        (true, true) => Results::load(dir).map(Some).map_err(BadInput),
        (true, false) => Err(BadInput(format!(
            "--resume: {} holds no sweep ({RESULTS_JSON} is missing)",
            dir.display()
        ))),
        (false, true) => Err(BadInput(format!(
            "{} already holds a sweep: pass --resume to continue it, or choose another --out",
            dir.display()
        ))),
        (false, false) => Ok(None),
    }
}

pub fn sweep(args: SweepArgs) -> Result<i32, Failure> {
    let batch_sizes = parse_list("--batch-sizes", &args.batch_sizes)?;
    let dataset = args.session.dataset()?;
    let resolutions = match &args.resolutions {
        Some(list) => parse_list("--resolutions", list)?,
        None => vec![dataset.default_resolution()],
    };
    for &b in &batch_sizes {
        check_batch_size(u64::from(b))?;
        for &r in &resolutions {
            check_resolution(i64::from(r), u64::from(b), args.mode)?;
        }
    }
    let theme = read_theme(&args.theme)?;
    if !args.headless && !std::io::stdout().is_terminal() {
        return Err(BadInput(
            "the sweep view needs a terminal: add --headless to run without one".into(),
        )
        .into());
    }
    let dir = args.out.clone().unwrap_or_else(|| default_out(args.mode));
    let earlier = check_out(&dir, args.resume)?;
    let impls = parse_impls(&args.impls)?;
    let steps = positive("--steps", args.steps)?;
    if !(1..=MAX_REPEAT).contains(&args.repeat) {
        return Err(BadInput(format!(
            "--repeat {} is not a number of sessions per cell between 1 and {MAX_REPEAT}",
            args.repeat
        ))
        .into());
    }
    let repeat = args.repeat as u32;
    args.session.check()?;
    // Every cell runs the session of the first, at its own batch size and resolution.
    let workload = Workload {
        impls,
        commands: Vec::new(),
        mode: args.mode,
        batch_size: batch_sizes[0],
        resolution: resolutions[0],
        length: Length::Steps(steps),
        schedule: Schedule::Alternate,
    };
    let threads = args.session.threads(Schedule::Alternate, 1)?;
    let interval = args.session.interval();
    let plan = args.session.plan(dataset, workload, threads)?;
    args.session.pin_monitor()?;
    let store = crate::store::Store::default();
    let _metrics = args.session.metrics(&store)?;
    let s = &plan.session;
    let config = SweepConfig {
        impls: s.workers.clone(),
        model: s.model,
        dataset: s.dataset.clone(),
        mode: s.mode,
        steps,
        warmup: s.warmup,
        device: s.device.clone(),
        pinned: s.pinned,
        seed: s.seed,
        batch_sizes: batch_sizes.clone(),
        resolutions: resolutions.clone(),
        repeat,
    };
    let mut results = match earlier {
        Some(earlier) => {
            if let Some(why) = config.incompatible_with(&earlier.config) {
                return Err(BadInput(format!(
                    "--resume: {} measured something else ({why})",
                    dir.display()
                ))
                .into());
            }
            Results {
                config: config.clone(),
                ..earlier
            }
        }
        None => Results::new(config),
    };
    let sweep = Sweep {
        plan,
        cells: cells(&batch_sizes, &resolutions),
        dir: dir.clone(),
        interval,
        command_line: super::command_line(),
        store,
        repeat,
    };
    let tracker = Tracker::new(
        &crate::sweep::run::todo(&sweep, &results),
        results.config.impls.len(),
        steps * u64::from(repeat),
    );
    let asked: Vec<Cell> = sweep.cells.clone();
    let (outcome, results) = if args.headless {
        let mut progress = StderrProgress::new(tracker, std::io::stderr().is_terminal());
        let outcome =
            crate::sweep::run::run(&sweep, &mut results, &mut progress, &StopHandle::default());
        progress.finish();
        (outcome, results)
    } else {
        let view = SweepView::new(theme, results.clone());
        let wakes = Wakes::default();
        let (running, updates) = crate::sweep::run::start(sweep, results, wakes.notifier())
            .map_err(|e| failed(format!("the sweep view failed: {e}")))?;
        let shown =
            crate::ui::sweep_screen::run(view, tracker, updates, running.stop.clone(), wakes);
        let ended = running
            .finish()
            .map_err(|e| failed(format!("the sweep view failed: {e}")))?;
        shown.map_err(|e| failed(format!("the sweep view failed: {e}")))?;
        ended
    };
    let outcome = outcome.map_err(failed)?;
    // The results are saved; a terminal that a hang-up closed fails these lines, which is no reason to stop.
    let _ = write!(
        std::io::stdout(),
        "{}",
        golow_protocol::text::printable(&crate::console::tables::sweep_table(&results))
    );
    let _ = writeln!(
        std::io::stderr(),
        "golow: sweep results in {} ({} and {})",
        dir.display(),
        RESULTS_JSON,
        RESULTS_CSV
    );
    let failed_rows = results
        .rows
        .iter()
        .any(|r| r.status == RowStatus::Failed && asked.contains(&r.cell()));
    Ok(match outcome {
        Outcome::Interrupted => EXIT_INTERRUPTED,
        Outcome::Finished if failed_rows => EXIT_WORKER_FAILED,
        Outcome::Finished => EXIT_OK,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_without_repeats_and_bad_items_are_named() {
        assert_eq!(
            parse_list("--batch-sizes", "32, 8,16,8").ok().unwrap(),
            [8, 16, 32]
        );
        let BadInput(why) = parse_list("--resolutions", "32,x").err().unwrap();
        assert!(why.contains("'x' is not a positive whole number"), "{why}");
        assert!(parse_list("--batch-sizes", "0").is_err());
        assert!(parse_list("--batch-sizes", "").is_err());
    }
}
