//! The sessions of a side: each recording read to its end and kept as what a comparison needs of it, the side checked
//! to be of one setup, and the workers `--pair` names checked to be in every session.

use std::path::{Path, PathBuf};

use super::regression::{self, Pair, WorkerFigures};
use super::setup::{self, Setup, WorkerVersions};
use crate::recording::Player;
use crate::recording::format::Header;
use crate::state::conditions::Conditions;

/// A recording read to its end, kept as what a comparison needs of it: its setup, its conditions, each worker's
/// figures and what damage cost it; its state is folded and dropped, so that hundreds of sessions a side stay small.
pub struct Session {
    pub path: PathBuf,
    header: Header,
    versions: Vec<WorkerVersions>,
    pub conditions: Option<Conditions>,
    pub figures: Vec<WorkerFigures>,
    /// What was skipped of the file (damaged frames or lines, a cut, an index rebuilt), in one line.
    pub damage: Option<String>,
}

impl Session {
    /// The recording at `path`, or why it cannot be compared, in one line.
    pub fn open(path: &Path) -> Result<Session, String> {
        let refused = |e: &dyn std::fmt::Display| format!("cannot compare {}: {e}", path.display());
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

    pub fn setup(&self) -> Setup<'_> {
        Setup {
            config: &self.header.config,
            machine: &self.header.machine,
            golow_version: &self.header.golow_version,
            versions: &self.versions,
        }
    }
}

/// One side's sessions, which must all be of one setup: their spread is then noise, not a difference.
pub fn open_side(paths: &[PathBuf], side: &str) -> Result<Vec<Session>, String> {
    let sessions = paths
        .iter()
        .map(|p| Session::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    let first = &sessions[0];
    for other in &sessions[1..] {
        if let Some(d) = setup::differences(&first.setup(), &other.setup()).first() {
            return Err(format!(
                "{side}'s sessions are not of one setup: {} in {} and {}; give each side sessions of one setup",
                d.what,
                first.path.display(),
                other.path.display()
            ));
        }
    }
    Ok(sessions)
}

/// Every pair's workers in every session of their side.
pub fn check_pairs(pairs: &[Pair], a: &[Session], b: &[Session]) -> Result<(), String> {
    for pair in pairs {
        for (side, sessions, name) in [("A", a, &pair.a), ("B", b, &pair.b)] {
            let Some(lacking) = sessions
                .iter()
                .find(|s| !s.figures.iter().any(|w| &w.name == name))
            else {
                continue;
            };
            let ran: Vec<&str> = lacking.figures.iter().map(|w| w.name.as_str()).collect();
            return Err(format!(
                "--pair {}={}: {side}'s {} has no worker {name} (it ran {})",
                pair.a,
                pair.b,
                lacking.path.display(),
                ran.join(", ")
            ));
        }
    }
    Ok(())
}
