//! `golow compare`: two recordings, several of one setup a side, or two sweeps cell by cell; B against A per
//! implementation, after what differs between their setups and conditions; exit 1 on a regression. The judgement is
//! `compare/`'s; here are the arguments, the printing and the exit code.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{BadInput, EXIT_OK, EXIT_WORKER_FAILED, Failure};
use crate::compare::regression::Pair;
use crate::compare::{self, Asked, Outcome};
use crate::console::tables::comparison;
use golow_protocol::text::printable;

#[derive(Args)]
pub struct CompareArgs {
    /// A: the baseline recording (or sweep directory); with --vs, every session of A.
    #[arg(required = true, value_name = "A")]
    a: Vec<PathBuf>,
    /// B: several recordings of one setup, compared with the several of A given before --vs; the verdict then
    /// weighs the spread between sessions.
    #[arg(long, num_args = 1.., value_name = "B")]
    vs: Vec<PathBuf>,
    /// A ratio worse than 1 ± this, and beyond noise, is a regression (TorchBench's 7%).
    #[arg(long, default_value_t = 0.07)]
    threshold: f64,
    /// Compare A's worker OLD with B's worker NEW, of another name (repeatable), e.g. --pair pytorch=compile.
    #[arg(long = "pair", value_name = "OLD=NEW")]
    pairs: Vec<String>,
}

/// `--pair OLD=NEW`s: two names each, none paired twice on its side.
fn parse_pairs(raw: &[String]) -> Result<Vec<Pair>, BadInput> {
    let mut pairs: Vec<Pair> = Vec::new();
    for text in raw {
        let Some((a, b)) = text
            .split_once('=')
            .filter(|(a, b)| !a.is_empty() && !b.is_empty() && !b.contains('='))
        else {
            return Err(BadInput(format!(
                "--pair takes OLD=NEW, a worker of A and one of B, e.g. --pair pytorch=compile (got '{text}')"
            )));
        };
        if let Some(twice) = pairs.iter().find(|p| p.a == a || p.b == b) {
            let (side, name) = if twice.a == a { ("A", a) } else { ("B", b) };
            return Err(BadInput(format!(
                "--pair pairs {side}'s {name} twice ({}={} and {text}): pair each worker once",
                twice.a, twice.b
            )));
        }
        pairs.push(Pair {
            a: a.to_string(),
            b: b.to_string(),
        });
    }
    Ok(pairs)
}

pub fn compare(args: CompareArgs) -> Result<i32, Failure> {
    if !(args.threshold.is_finite() && (0.0..1.0).contains(&args.threshold)) {
        return Err(BadInput(format!(
            "--threshold must be a fraction between 0 and 1, e.g. 0.07 (got {})",
            args.threshold
        ))
        .into());
    }
    let asked = Asked {
        threshold: args.threshold,
        pairs: parse_pairs(&args.pairs)?,
    };
    let (a, b) = match (args.a.as_slice(), args.vs.is_empty()) {
        ([a, b], true) => (vec![a.clone()], vec![b.clone()]),
        (_, true) => {
            return Err(BadInput(format!(
                "compare takes two recordings (A B), or several a side (A1 A2 … --vs B1 B2 …); it was given {}",
                match args.a.len() {
                    1 => "one path".to_string(),
                    n => format!("{n} paths"),
                }
            ))
            .into());
        }
        _ => (args.a, args.vs),
    };
    match (a.as_slice(), b.as_slice()) {
        ([da], [db]) if da.is_dir() && db.is_dir() => return sweeps(da, db, &asked),
        _ => {}
    }
    if let Some(dir) = a.iter().chain(&b).find(|p| p.is_dir()) {
        return Err(BadInput(format!(
            "{} is a directory: compare takes two sweep directories, or recordings only",
            dir.display()
        ))
        .into());
    }
    let judged = compare::recordings(&a, &b, &asked).map_err(BadInput)?;
    say!("{}", printable(&comparison(&judged, asked.threshold)));
    exit_code(Outcome::of(&judged.rows))
}

/// Exit 1 on a regression; else a verdict that could not be given for too few measured steps is refused in one line;
/// else 0.
fn exit_code(outcome: Outcome) -> Result<i32, Failure> {
    match outcome {
        Outcome::Passed => Ok(EXIT_OK),
        Outcome::Regressed => Ok(EXIT_WORKER_FAILED),
        Outcome::Undecided { workers, why } => Err(BadInput(format!(
            "no verdict on {}: {why} in a session a side; run longer sessions, or compare several a side (--vs)",
            workers.join(", ")
        ))
        .into()),
    }
}

/// Two sweeps' comparison, printed cell by cell as each is judged.
fn sweeps(a: &Path, b: &Path, asked: &Asked) -> Result<i32, Failure> {
    let mut compared = 0;
    let mut rows = Vec::new();
    for judged in compare::sweeps(a, b, asked).map_err(BadInput)? {
        let (cell, judged) = judged.map_err(BadInput)?;
        compared += 1;
        sayln!("batch {} at {} px", cell.batch_size, cell.resolution);
        say!("{}", printable(&comparison(&judged, asked.threshold)));
        rows.extend(judged.rows);
    }
    if compared == 0 {
        return Err(BadInput(format!(
            "{} and {} have no cell with an implementation in common",
            a.display(),
            b.display()
        ))
        .into());
    }
    exit_code(Outcome::of(&rows))
}
