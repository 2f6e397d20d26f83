//! `golow compare`: two recordings, several of one setup a side, or two sweeps cell by cell; B against A per
//! implementation, after what differs between their setups and conditions; exit 1 on a regression.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{BadInput, EXIT_OK, EXIT_WORKER_FAILED, Failure};
use crate::compare::regression::{self, Judging, Pair, Row, WorkerFigures};
use crate::compare::setup::{self, Setup, WorkerVersions};
use crate::console::tables::regression_table;
use crate::recording::Player;
use crate::recording::format::Header;
use crate::state::conditions::{self, Conditions};
use crate::sweep::{Results, cells};
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

/// What a comparison is asked: the threshold, and the workers paired across names.
struct Asked {
    threshold: f64,
    pairs: Vec<Pair>,
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

/// Every pair's workers in every session of their side.
fn check_pairs(pairs: &[Pair], a: &[Session], b: &[Session]) -> Result<(), BadInput> {
    for pair in pairs {
        for (side, sessions, name) in [("A", a, &pair.a), ("B", b, &pair.b)] {
            let Some(lacking) = sessions
                .iter()
                .find(|s| !s.figures.iter().any(|w| &w.name == name))
            else {
                continue;
            };
            let ran: Vec<&str> = lacking.figures.iter().map(|w| w.name.as_str()).collect();
            return Err(BadInput(format!(
                "--pair {}={}: {side}'s {} has no worker {name} (it ran {})",
                pair.a,
                pair.b,
                lacking.path.display(),
                ran.join(", ")
            )));
        }
    }
    Ok(())
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
    let (sa, sb) = (sessions(&a, "A")?, sessions(&b, "B")?);
    check_pairs(&asked.pairs, &sa, &sb)?;
    let judged = judge(&sa, &sb, &asked);
    if judged.rows.is_empty() {
        return Err(BadInput(format!(
            "{} and {} have no implementation in common",
            a[0].display(),
            b[0].display()
        ))
        .into());
    }
    say!("{}", printable(&judged.report(args.threshold)));
    verdict(&judged.rows)
}

/// Exit 1 on a regression; else a verdict that could not be given for too few measured steps is refused in one line;
/// else 0.
fn verdict(rows: &[Row]) -> Result<i32, Failure> {
    if rows.iter().any(|r| r.regression) {
        return Ok(EXIT_WORKER_FAILED);
    }
    let mut short: Vec<&Row> = Vec::new();
    for row in rows.iter().filter(|r| r.too_few_steps) {
        if !short.iter().any(|s| s.worker == row.worker) {
            short.push(row);
        }
    }
    let Some(first) = short.first() else {
        return Ok(EXIT_OK);
    };
    let workers: Vec<&str> = short.iter().map(|r| r.worker.as_str()).collect();
    Err(BadInput(format!(
        "no verdict on {}: {} in a session a side; run longer sessions, or compare several a side (--vs)",
        workers.join(", "),
        first.not_judged.as_deref().unwrap_or("too few measured steps")
    ))
    .into())
}

/// A recording read to its end, kept as what a comparison needs of it: its setup, its conditions, each worker's
/// figures and what damage cost it; its state is folded and dropped, so that hundreds of sessions a side stay small.
struct Session {
    path: PathBuf,
    header: Header,
    versions: Vec<WorkerVersions>,
    conditions: Option<Conditions>,
    figures: Vec<WorkerFigures>,
    /// What was skipped of the file (damaged frames or lines, a cut, an index rebuilt), in one line.
    damage: Option<String>,
}

impl Session {
    fn open(path: &Path) -> Result<Session, BadInput> {
        let refused =
            |e: &dyn std::fmt::Display| BadInput(format!("cannot compare {}: {e}", path.display()));
        let mut player = Player::open(path).map_err(|e| refused(&e))?;
        player.run_to_end();
        if let Some(second) = player.second_session() {
            return Err(refused(&second));
        }
        let header = player.recording().header.clone();
        let said: Vec<String> = [player.recording().warning(), player.damage_warning()]
            .into_iter()
            .flatten()
            .collect();
        let state = player.into_state();
        Ok(Session {
            path: path.to_path_buf(),
            header,
            versions: setup::versions(&state),
            conditions: state.machine.conditions(),
            figures: regression::figures(&state),
            damage: (!said.is_empty()).then(|| said.join("; ")),
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
fn sweeps(a: &Path, b: &Path, asked: &Asked) -> Result<i32, Failure> {
    let (ra, rb) = (
        Results::load(a).map_err(BadInput)?,
        Results::load(b).map_err(BadInput)?,
    );
    let mut compared = 0;
    let mut rows = Vec::new();
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
        check_pairs(&asked.pairs, &sa, &sb)?;
        let judged = judge(&sa, &sb, asked);
        if judged.rows.is_empty() {
            continue;
        }
        compared += 1;
        sayln!("batch {} at {} px", cell.batch_size, cell.resolution);
        say!("{}", printable(&judged.report(asked.threshold)));
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
    verdict(&rows)
}
