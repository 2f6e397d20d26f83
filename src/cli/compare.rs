//! `golow compare`: two recordings (or two sweeps, cell by cell), B against A per implementation; exit 1 on a
//! regression.

use std::path::{Path, PathBuf};

use clap::Args;

use super::replay::open_player;
use super::{BadInput, EXIT_OK, EXIT_WORKER_FAILED, Failure};
use crate::state::regression::{self, Row};
use crate::sweep::{Results, cells};
use crate::ui::report::regression_table;
use golow_protocol::text::printable;

#[derive(Args)]
pub struct CompareArgs {
    /// The baseline recording, or sweep directory.
    a: PathBuf,
    /// The recording (or sweep directory) compared against it.
    b: PathBuf,
    /// A ratio worse than 1 ± this, and beyond noise, is a regression (TorchBench's 7%).
    #[arg(long, default_value_t = 0.07)]
    threshold: f64,
}

pub fn compare(args: CompareArgs) -> Result<i32, Failure> {
    if !(args.threshold.is_finite() && (0.0..1.0).contains(&args.threshold)) {
        return Err(BadInput(format!(
            "--threshold must be a fraction between 0 and 1, e.g. 0.07 (got {})",
            args.threshold
        ))
        .into());
    }
    match (args.a.is_dir(), args.b.is_dir()) {
        (true, true) => return sweeps(&args.a, &args.b, args.threshold),
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
    let rows = recordings(&args.a, &args.b, args.threshold)?;
    if rows.is_empty() {
        return Err(BadInput(format!(
            "{} and {} have no implementation in common",
            args.a.display(),
            args.b.display()
        ))
        .into());
    }
    print!("{}", printable(&regression_table(&rows, args.threshold)));
    Ok(verdict(rows.iter().any(|r| r.regression)))
}

fn verdict(regression: bool) -> i32 {
    if regression {
        EXIT_WORKER_FAILED
    } else {
        EXIT_OK
    }
}

/// Both recordings folded to their end, B's implementations against A's.
fn recordings(a: &Path, b: &Path, threshold: f64) -> Result<Vec<Row>, BadInput> {
    let mut states = Vec::new();
    for file in [a, b] {
        let mut player = open_player(file)?;
        player.run_to_end();
        states.push(player.into_state());
    }
    Ok(regression::compare(&states[0], &states[1], threshold))
}

/// The recordings' comparison for every cell both sweeps have, cell by cell.
fn sweeps(a: &Path, b: &Path, threshold: f64) -> Result<i32, Failure> {
    let (ra, rb) = (
        Results::load(a).map_err(BadInput)?,
        Results::load(b).map_err(BadInput)?,
    );
    let mut compared = 0;
    let mut regression = false;
    for cell in cells(&ra.config.batch_sizes, &ra.config.resolutions) {
        let recording = |dir: &Path, results: &Results| {
            results
                .rows
                .iter()
                .find(|r| r.cell() == cell && r.recording.is_some())
                .and_then(|r| r.recording.as_ref())
                .map(|rel| dir.join(rel))
        };
        let (Some(fa), Some(fb)) = (recording(a, &ra), recording(b, &rb)) else {
            continue;
        };
        let rows = recordings(&fa, &fb, threshold)?;
        if rows.is_empty() {
            continue;
        }
        compared += 1;
        regression |= rows.iter().any(|r| r.regression);
        println!("batch {} at {} px", cell.batch_size, cell.resolution);
        print!("{}", printable(&regression_table(&rows, threshold)));
    }
    if compared == 0 {
        return Err(BadInput(format!(
            "{} and {} have no cell with an implementation in common",
            a.display(),
            b.display()
        ))
        .into());
    }
    Ok(verdict(regression))
}
