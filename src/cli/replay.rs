//! `golow replay`: a recording in the TUI as it was seen, or its summary; a sweep's directory in the sweep view, or
//! its results table.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;

use super::options::{check_output_path, metrics_endpoint, parse_compare, read_theme};
use super::run::write_summary;
use super::{BadInput, EXIT_OK, Failure, failed};
use crate::recording::{self, Player};
use crate::state::Summary;
use crate::sweep::{RESULTS_JSON, Results};
use crate::ui::Wakes;
use crate::ui::app::App;
use crate::ui::session_screen::Source;
use crate::ui::sweep_charts::SweepView;
use crate::ui::theme::Theme;
use crate::ui::timeline::Timeline;

#[derive(Args)]
pub struct ReplayArgs {
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
    /// Serve the replayed session's metrics for Prometheus at http://HOST:PORT/metrics, as they were at the player's
    /// position (a port alone listens on 127.0.0.1) [default: off].
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "headless")]
    metrics_addr: Option<String>,
}

/// Refuses a recording found, once read, to hold a second session after the first.
pub fn one_session(player: &Player, file: &Path) -> Result<(), BadInput> {
    match player.second_session() {
        Some(second) => Err(BadInput(format!(
            "cannot replay {}: {second}",
            file.display()
        ))),
        None => Ok(()),
    }
}

/// A recording's player, its warning (a file cut short, an index rebuilt) printed.
pub fn open_player(file: &Path) -> Result<Player, BadInput> {
    let player = Player::open(file)
        .map_err(|e| BadInput(format!("cannot replay {}: {e}", file.display())))?;
    if let Some(warning) = player.recording().warning() {
        eprintln!(
            "golow: warning: {}",
            golow_protocol::text::printable(&format!("{}: {warning}", file.display()))
        );
    }
    Ok(player)
}

pub fn replay(args: ReplayArgs) -> Result<i32, Failure> {
    if let Some(path) = &args.summary_json {
        check_output_path("--summary-json", path)?;
    }
    let theme = read_theme(&args.theme)?;
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
                args.file.join(RESULTS_JSON).display()
            ))
            .into());
        }
        if args.metrics_addr.is_some() {
            return Err(BadInput(format!(
                "{} is a sweep: --metrics-addr serves one session; replay one of its cells",
                args.file.display()
            ))
            .into());
        }
        return sweep(&args.file, args.headless, theme);
    }
    let mut player = open_player(&args.file)?;
    if args.headless {
        player.run_to_end();
        one_session(&player, &args.file)?;
        if let Some(damage) = player.damage_warning() {
            eprintln!(
                "golow: warning: {}",
                golow_protocol::text::printable(&format!("{}: {damage}", args.file.display()))
            );
        }
        let summary = Summary::from_state(&player.state());
        say!(
            "{}",
            golow_protocol::text::printable(&crate::console::tables::table(&summary))
        );
        write_summary(args.summary_json.as_deref(), &summary).map_err(failed)?;
        return Ok(EXIT_OK);
    }
    let workers = &player.recording().header.config.workers;
    let compare = args
        .compare
        .as_deref()
        .map(|p| parse_compare(p, workers))
        .transpose()?;
    let timeline = Timeline::new(
        player.recording().duration_ms(),
        args.file.display().to_string(),
    );
    let store = player.store().clone();
    let _metrics = metrics_endpoint(args.metrics_addr.as_deref(), &store)?;
    let wakes = Wakes::default();
    let replay_failed = |e| failed(format!("the replay failed: {e}"));
    // The player reads the file as the replay plays it: no pass ahead of the first screen.
    let (requests, played) = recording::serve(player, wakes.notifier()).map_err(replay_failed)?;
    let app = App::new(theme, compare).replaying(timeline);
    let source = Source::Recording { player: requests };
    crate::ui::session_screen::run(app, store, source, wakes, crate::ui::FRAME)
        .map_err(replay_failed)?;
    let player = played
        .join()
        .map_err(|_| failed("the replay's player failed".into()))?;
    // A second session is found where the replay reached it; it was not shown, and is said once the view is closed.
    one_session(&player, &args.file)?;
    Ok(EXIT_OK)
}

/// A sweep as it stands, in the sweep view or as the results table.
fn sweep(dir: &Path, headless: bool, theme: Theme) -> Result<i32, Failure> {
    let results = Results::load(dir).map_err(BadInput)?;
    if headless {
        say!(
            "{}",
            golow_protocol::text::printable(&crate::console::tables::sweep_table(&results))
        );
        return Ok(EXIT_OK);
    }
    let view = SweepView::new(theme, results);
    crate::ui::sweep_screen::show(view, dir)
        .map_err(|e| failed(format!("the sweep view failed: {e}")))?;
    Ok(EXIT_OK)
}
