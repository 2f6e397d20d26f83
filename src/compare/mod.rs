//! What `golow compare` decides: the sessions of each side read and checked, what differs between their setups and
//! the machine's conditions, and B against A per worker and metric, judged where that is honest; then one outcome
//! for all the rows, which the CLI maps to an exit code. It reads recordings and sweeps' results, and prints nothing.

mod conditions;
pub mod regression;
mod sessions;
pub mod setup;

use std::path::{Path, PathBuf};

use crate::sweep::{Cell, Results, cells};
use regression::{Judging, Pair, Row};
use sessions::{Session, check_pairs, open_side};

/// What a comparison is asked: the threshold, and the workers paired across names.
pub struct Asked {
    pub threshold: f64,
    pub pairs: Vec<Pair>,
}

/// Rows, and what the reader must know before reading them.
pub struct Judged {
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
}

/// What a comparison's rows say together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing regressed, and every verdict asked for was given.
    Passed,
    /// A metric of a worker regressed.
    Regressed,
    /// Nothing regressed, but these workers got no verdict: a session a side holds too few measured steps (`why`,
    /// the first such row's reason).
    Undecided { workers: Vec<String>, why: String },
}

impl Outcome {
    pub fn of(rows: &[Row]) -> Outcome {
        if rows.iter().any(|r| r.regression) {
            return Outcome::Regressed;
        }
        let mut short: Vec<&Row> = Vec::new();
        for row in rows.iter().filter(|r| r.too_few_steps) {
            if !short.iter().any(|s| s.worker == row.worker) {
                short.push(row);
            }
        }
        let Some(first) = short.first() else {
            return Outcome::Passed;
        };
        Outcome::Undecided {
            workers: short.iter().map(|r| r.worker.clone()).collect(),
            why: first
                .not_judged
                .clone()
                .unwrap_or_else(|| "too few measured steps".into()),
        }
    }
}

/// Recordings B against A, one or several of one setup a side; refused in one line where a recording cannot be
/// read, a side mixes setups, a pair names a worker a session lacks, or the sides have no worker in common.
pub fn recordings(a: &[PathBuf], b: &[PathBuf], asked: &Asked) -> Result<Judged, String> {
    let (sa, sb) = (open_side(a, "A")?, open_side(b, "B")?);
    check_pairs(&asked.pairs, &sa, &sb)?;
    let judged = judge(&sa, &sb, asked);
    if judged.rows.is_empty() {
        return Err(format!(
            "{} and {} have no implementation in common",
            a[0].display(),
            b[0].display()
        ));
    }
    Ok(judged)
}

/// Two sweeps cell by cell: each cell both recorded, with a worker in common, judged as `recordings` judges its
/// sessions (one, or with `--repeat` all of them, so that the verdict weighs their spread). Cells are read and judged
/// one at a time, as the iterator is asked.
pub fn sweeps<'a>(
    a: &'a Path,
    b: &'a Path,
    asked: &'a Asked,
) -> Result<impl Iterator<Item = Result<(Cell, Judged), String>> + 'a, String> {
    let (ra, rb) = (Results::load(a)?, Results::load(b)?);
    let grid = cells(&ra.config.batch_sizes, &ra.config.resolutions);
    Ok(grid.into_iter().filter_map(move |cell| {
        judge_cell(cell, (a, &ra), (b, &rb), asked)
            .transpose()
            .map(|judged| judged.map(|j| (cell, j)))
    }))
}

/// One cell of two sweeps; `None` where a sweep has no recording of it, or the two no worker in common.
fn judge_cell(
    cell: Cell,
    (a, ra): (&Path, &Results),
    (b, rb): (&Path, &Results),
    asked: &Asked,
) -> Result<Option<Judged>, String> {
    let (sa, sb) = (cell_sessions(a, ra, cell)?, cell_sessions(b, rb, cell)?);
    if sa.is_empty() || sb.is_empty() {
        return Ok(None);
    }
    check_pairs(&asked.pairs, &sa, &sb)?;
    let judged = judge(&sa, &sb, asked);
    Ok((!judged.rows.is_empty()).then_some(judged))
}

/// Every session a sweep recorded of `cell`; none where it recorded none.
fn cell_sessions(dir: &Path, results: &Results, cell: Cell) -> Result<Vec<Session>, String> {
    let Some(row) = results
        .rows
        .iter()
        .find(|r| r.cell() == cell && r.recording.is_some())
    else {
        return Ok(Vec::new());
    };
    let files: Vec<&String> = if row.recordings.is_empty() {
        row.recording.iter().collect()
    } else {
        row.recordings.iter().collect()
    };
    files.iter().map(|f| Session::open(&dir.join(f))).collect()
}

/// B's sessions against A's: damage, setups and conditions first, then the rows, judged where that is honest.
fn judge<'s>(a: &'s [Session], b: &'s [Session], asked: &Asked) -> Judged {
    let mut notes = Vec::new();
    for (name, side) in [("A", a), ("B", b)] {
        for session in side {
            if let Some(damage) = &session.damage {
                notes.push(format!(
                    "{name}: {} is damaged: {damage}",
                    session.path.display()
                ));
            }
        }
    }
    let mut judging = Judging::default();
    let differences = setup::differences(&a[0].setup(), &b[0].setup());
    if !differences.is_empty() {
        let said: Vec<String> = differences.iter().map(|d| d.describe()).collect();
        notes.push(format!("setups differ: {}", said.join(", ")));
    }
    let said = |pick: fn(&setup::Difference) -> bool| -> Option<String> {
        let picked: Vec<String> = differences
            .iter()
            .filter(|d| pick(d))
            .map(|d| d.describe())
            .collect();
        (!picked.is_empty()).then(|| picked.join(", "))
    };
    if let Some(work) = said(setup::Difference::changes_work) {
        notes.push(format!(
            "A and B did different work ({work}): their figures are shown, none is judged"
        ));
        judging.all = Some(work);
    } else if let Some(steps) = said(setup::Difference::changes_steps) {
        notes.push(
            "a step of A and one of B hold different work: per-sample time and throughput are judged, per-step figures are not"
                .into(),
        );
        judging.per_step = Some(steps);
    }
    let (ca, cb) = (
        conditions::of_side(a, "A", &mut notes),
        conditions::of_side(b, "B", &mut notes),
    );
    if let (Some(ca), Some(cb)) = (ca, cb) {
        let differ = conditions::differences(&ca, &cb);
        if !differ.is_empty() {
            notes.push(format!(
                "conditions differ: {}; times are shown but not judged",
                differ.join("; ")
            ));
            judging.times = Some("conditions differ".into());
        }
    }
    if a.len() == 1 && b.len() == 1 {
        notes.push(
            "1 session a side: intervals cover the noise within each session, not between sessions; for a verdict that \
             covers both, record several (golow run --repeat 3) and compare them all (golow compare A1 A2 A3 --vs B1 B2 B3)"
                .into(),
        );
    } else {
        notes.push(format!(
            "figures are geometric means over sessions; intervals come from the spread between the {} and {} sessions",
            a.len(),
            b.len()
        ));
    }
    let figures = |side: &'s [Session]| {
        side.iter()
            .map(|s| s.figures.as_slice())
            .collect::<Vec<_>>()
    };
    let (rows, left_out) = regression::compare(
        &figures(a),
        &figures(b),
        asked.threshold,
        &judging,
        &asked.pairs,
    );
    notes.extend(left_out);
    Judged { notes, rows }
}

#[cfg(test)]
mod tests {
    use super::regression::{Unit, Worse};
    use super::*;

    fn row(worker: &str, regression: bool, too_few: Option<&str>) -> Row {
        Row {
            worker: worker.into(),
            metric: "median step time (ms)",
            unit: Unit::Ms,
            a: Some(10.0),
            b: Some(10.0),
            ratio: None,
            worse: Worse::Higher,
            regression,
            not_judged: too_few.map(String::from),
            too_few_steps: too_few.is_some(),
        }
    }

    #[test]
    fn a_regression_outweighs_a_missing_verdict_and_each_short_worker_is_named_once() {
        let short = |worker| {
            row(
                worker,
                false,
                Some("too few measured steps (7 in A; 11 needed)"),
            )
        };
        assert_eq!(
            Outcome::of(&[row("libtorch", false, None)]),
            Outcome::Passed
        );
        assert_eq!(
            Outcome::of(&[short("aten"), row("libtorch", true, None)]),
            Outcome::Regressed
        );
        assert_eq!(
            Outcome::of(&[
                short("aten"),
                short("aten"),
                row("libtorch", false, None),
                short("cudnn")
            ]),
            Outcome::Undecided {
                workers: vec!["aten".into(), "cudnn".into()],
                why: "too few measured steps (7 in A; 11 needed)".into()
            }
        );
    }
}
