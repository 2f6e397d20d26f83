//! `golow report`: the figures of recorded sessions as Markdown tables, folded from the files the way a replay folds
//! them; the guide's GPU tables are this command's output, and a test holds them to it.

use std::path::{Path, PathBuf};

use clap::Args;

use super::replay::{one_session, open_player};
use super::{BadInput, EXIT_OK, Failure};
use crate::console::markdown::{self, Session};
use crate::state::Summary;

/// Kernels listed per worker with --kernel.
const MAX_KERNELS: usize = 8;

#[derive(Args)]
pub struct ReportArgs {
    /// .golow recordings; sessions with the same set-up make one table, each figure their median and range.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Instead of the figures, list each worker's kernels whose names contain this text (e.g. clamp_scalar, ReLU's
    /// kernel in PyTorch): launches, mean time, grids and block.
    #[arg(long, value_name = "TEXT")]
    kernel: Option<String>,
}

pub fn report(args: ReportArgs) -> Result<i32, Failure> {
    if args.kernel.as_deref().is_some_and(str::is_empty) {
        return Err(BadInput("--kernel needs some text to look for in kernel names".into()).into());
    }
    let sessions = args
        .files
        .iter()
        .map(|file| read(file, args.kernel.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let text = match &args.kernel {
        Some(pattern) => markdown::kernels(&sessions, pattern),
        None => markdown::figures(&sessions),
    };
    say!("{}", text.trim_end());
    Ok(EXIT_OK)
}

fn read(file: &Path, kernel: Option<&str>) -> Result<Session, BadInput> {
    if file.is_dir() {
        return Err(BadInput(format!(
            "{} is a directory: golow report reads .golow recordings",
            file.display()
        )));
    }
    let mut player = open_player(file)?;
    player.run_to_end();
    one_session(&player, file)?;
    if let Some(damage) = player.damage_warning() {
        return Err(BadInput(format!(
            "{}: {damage}: its figures would not be the session's; report an undamaged recording",
            file.display()
        )));
    }
    let gpu = player
        .recording()
        .header
        .machine
        .gpus
        .first()
        .map(|g| g.name.clone());
    let config = &player.recording().header.config;
    let mut conditions = vec![format!("{} steps, {} warm-up", config.steps, config.warmup)];
    if config.pinned {
        conditions.push("pinned copies".to_string());
    }
    if let Some(mode) = config
        .compile_mode
        .filter(|_| config.workers.iter().any(|w| w == "compile"))
    {
        conditions.push(format!("torch.compile mode {}", mode.name()));
    }
    let state = player.state();
    let kernels = kernel.map_or_else(Vec::new, |pattern| {
        state
            .workers
            .iter()
            .map(|w| {
                let mut found: Vec<_> = w
                    .gpu_activity
                    .kernels
                    .iter()
                    .filter(|(name, _)| name.contains(pattern))
                    .map(|(name, k)| (name.clone(), k.clone()))
                    .collect();
                found.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(&b.0)));
                found.truncate(MAX_KERNELS);
                (w.name.clone(), found)
            })
            .collect()
    });
    Ok(Session {
        file: file.display().to_string(),
        gpu,
        conditions,
        summary: Summary::from_state(&state),
        kernels,
    })
}
