//! `golow compare`: two recordings, several of one setup a side, or two sweeps cell by cell; B against A per
//! implementation, after what differs between their setups and conditions; exit 1 on a regression.

use std::path::{Path, PathBuf};

use clap::Args;

use super::replay::{one_session, open_player};
use super::{BadInput, EXIT_OK, EXIT_WORKER_FAILED, Failure};
use crate::recording::format::Header;
use crate::state::conditions::{self, Conditions};
use crate::state::regression::{self, Judging, Row, WorkerFigures};
use crate::state::setup::{self, Setup, WorkerVersions};
use crate::sweep::{Results, cells};
use crate::ui::report::regression_table;
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
}

pub fn compare(args: CompareArgs) -> Result<i32, Failure> {
    if !(args.threshold.is_finite() && (0.0..1.0).contains(&args.threshold)) {
        return Err(BadInput(format!(
            "--threshold must be a fraction between 0 and 1, e.g. 0.07 (got {})",
            args.threshold
        ))
        .into());
    }
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
        ([da], [db]) if da.is_dir() && db.is_dir() => return sweeps(da, db, args.threshold),
        _ => {}
    }
    if let Some(dir) = a.iter().chain(&b).find(|p| p.is_dir()) {
        return Err(BadInput(format!(
            "{} is a directory: compare takes two sweep directories, or recordings only",
            dir.display()
        ))
        .into());
    }
    let (sa, sb) = (sessions(&a, "A")?, sessions(&b, "B")?);
    let judged = judge(&sa, &sb, args.threshold);
    if judged.rows.is_empty() {
        return Err(BadInput(format!(
            "{} and {} have no implementation in common",
            a[0].display(),
            b[0].display()
        ))
        .into());
    }
    say!("{}", printable(&judged.report(args.threshold)));
    Ok(verdict(judged.rows.iter().any(|r| r.regression)))
}

fn verdict(regression: bool) -> i32 {
    if regression {
        EXIT_WORKER_FAILED
    } else {
        EXIT_OK
    }
}

/// A recording read to its end, kept as what a comparison needs of it: its setup, its conditions and each worker's
/// figures; its state is folded and dropped, so that hundreds of sessions a side stay small.
struct Session {
    path: PathBuf,
    header: Header,
    versions: Vec<WorkerVersions>,
    conditions: Option<Conditions>,
    figures: Vec<WorkerFigures>,
}

impl Session {
    fn open(path: &Path) -> Result<Session, BadInput> {
        let mut player = open_player(path)?;
        player.run_to_end();
        one_session(&player, path)?;
        let header = player.recording().header.clone();
        let state = player.into_state();
        Ok(Session {
            path: path.to_path_buf(),
            header,
            versions: setup::versions(&state),
            conditions: state.machine.conditions(),
            figures: regression::figures(&state),
        })
    }

    fn setup(&self) -> Setup<'_> {
        Setup {
            config: &self.header.config,
            machine: &self.header.machine,
            golow_version: &self.header.golow_version,
            versions: &self.versions,
        }
    }
}

/// One side's sessions, which must all be of one setup: their spread is then noise, not a difference.
fn sessions(paths: &[PathBuf], side: &str) -> Result<Vec<Session>, BadInput> {
    let sessions = paths
        .iter()
        .map(|p| Session::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    let first = &sessions[0];
    for other in &sessions[1..] {
        if let Some(d) = setup::differences(&first.setup(), &other.setup()).first() {
            return Err(BadInput(format!(
                "{side}'s sessions are not of one setup: {} in {} and {}; give each side sessions of one setup",
                d.what,
                first.path.display(),
                other.path.display()
            )));
        }
    }
    Ok(sessions)
}

/// Rows, and what the reader must know before reading them.
struct Judged {
    notes: Vec<String>,
    rows: Vec<Row>,
}

impl Judged {
    fn report(&self, threshold: f64) -> String {
        let mut out: String = self.notes.iter().map(|n| format!("{n}\n")).collect();
        out.push_str(&regression_table(&self.rows, threshold));
        out
    }
}

/// B's sessions against A's: setups and conditions first, then the rows, judged where that is honest.
fn judge<'s>(a: &'s [Session], b: &'s [Session], threshold: f64) -> Judged {
    let mut notes = Vec::new();
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
        side_conditions(a, "A", &mut notes),
        side_conditions(b, "B", &mut notes),
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
    let (rows, left_out) = regression::compare(&figures(a), &figures(b), threshold, &judging);
    notes.extend(left_out);
    Judged { notes, rows }
}

/// One line for a side's machine: its sessions' mean conditions, and how many of them ran beside a busy machine.
fn side_conditions(side: &[Session], name: &str, notes: &mut Vec<String>) -> Option<Conditions> {
    let sessions = match side.len() {
        1 => "1 session".to_string(),
        n => format!("{n} sessions"),
    };
    let all: Vec<Conditions> = side.iter().filter_map(|s| s.conditions).collect();
    let mean = Conditions::mean(&all).filter(|_| all.len() == side.len());
    let Some(mean) = mean else {
        notes.push(format!(
            "{name}: {sessions} · the machine's load is not recorded (a recording made before golow read it)"
        ));
        return None;
    };
    let busy: Vec<(&Session, Conditions)> = side
        .iter()
        .filter_map(|s| s.conditions.filter(|c| c.busy().is_some()).map(|c| (s, c)))
        .collect();
    let busiest = busy
        .iter()
        .max_by(|x, y| x.1.others_percent.total_cmp(&y.1.others_percent))
        .and_then(|(s, c)| Some((s.path.display(), c.busy()?)));
    let beside = match (busiest, side.len()) {
        (None, _) => String::new(),
        (Some((_, why)), 1) => format!(" · busy: {why}"),
        (Some((path, why)), _) => format!(
            " · {} of them beside a busy machine, the busiest {path} ({why})",
            busy.len()
        ),
    };
    notes.push(format!("{name}: {sessions} · {}{beside}", mean.describe()));
    Some(mean)
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
        // Every session of the cell: one, or with --repeat all of them, so that the verdict weighs their spread.
        let sessions = |dir: &Path, results: &Results| -> Result<Vec<Session>, BadInput> {
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
        };
        let (sa, sb) = (sessions(a, &ra)?, sessions(b, &rb)?);
        if sa.is_empty() || sb.is_empty() {
            continue;
        }
        let judged = judge(&sa, &sb, threshold);
        if judged.rows.is_empty() {
            continue;
        }
        compared += 1;
        regression |= judged.rows.iter().any(|r| r.regression);
        sayln!("batch {} at {} px", cell.batch_size, cell.resolution);
        say!("{}", printable(&judged.report(threshold)));
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
