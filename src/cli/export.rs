//! `golow export`: a recording as a Chrome trace (Perfetto), CSV or JSON, written whole or not at all: a terminating
//! signal (Ctrl-C) stops a long export and leaves no file.

use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use clap::Args;

use super::options::check_output_path;
use super::replay::{one_session, open_player};
use super::{BadInput, EXIT_OK, Failure, failed};
use crate::export::Format;

#[derive(Args)]
pub struct ExportArgs {
    /// A .golow recording.
    file: PathBuf,
    /// chrome-trace: a timeline for Perfetto or chrome://tracing; csv: one row per numeric record; json: every
    /// record, with the header.
    #[arg(long, value_enum)]
    format: Format,
    /// Where to write (never overwritten half-way: written to a temporary file, then renamed); an existing file is
    /// refused unless --force.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file (never the recording being exported): the export is written to a temporary
    /// file beside it and renamed over it, so a failed export leaves the old file as it was.
    #[arg(long)]
    force: bool,
}

pub fn export(args: ExportArgs) -> Result<i32, Failure> {
    check_output_path("--output", &args.output)?;
    // Not even --force replaces the recording being read: golow never overwrites a recording.
    if is_same_file(&args.file, &args.output) {
        return Err(BadInput(format!(
            "--output {} is the recording being exported: golow never overwrites a recording; choose another path",
            args.output.display()
        ))
        .into());
    }
    if !args.force && args.output.symlink_metadata().is_ok() {
        return Err(BadInput(format!(
            "--output {} exists: golow export does not overwrite it; choose another path or add --force",
            args.output.display()
        ))
        .into());
    }
    let mut player = open_player(&args.file)?;
    let header = serde_json::to_value(&player.recording().header).expect("the header serialises");
    // A second session found on the way leaves no file: what was written is removed with the temporary file.
    let written = crate::output_files::write_atomically(&args.output, |file| {
        crate::export::export(
            &header,
            player.records(),
            args.format,
            &mut UntilSignalled(file),
        )?;
        if player.second_session().is_some() {
            return Err(std::io::Error::other("a second session"));
        }
        // A signal after the last write still comes before the rename: the file is then not kept.
        signalled()
    });
    if let Some(signal) = crate::termination::received() {
        return Err(failed(format!(
            "the export was interrupted ({}): {} was not written",
            crate::termination::name(signal),
            args.output.display()
        )));
    }
    one_session(&player, &args.file)?;
    if let Err(e) = written {
        return Err(failed(format!(
            "cannot write {}: {e}",
            args.output.display()
        )));
    }
    if let Some(damage) = player.damage_warning() {
        eprintln!(
            "golow: warning: {}",
            golow_protocol::text::printable(&format!("{}: {damage}", args.file.display()))
        );
    }
    Ok(EXIT_OK)
}

/// A writer that fails once a terminating signal has come, so that a long export stops there.
struct UntilSignalled<W>(W);

impl<W: Write> Write for UntilSignalled<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        signalled()?;
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        signalled()?;
        self.0.flush()
    }
}

fn signalled() -> io::Result<()> {
    match crate::termination::received() {
        Some(signal) => Err(io::Error::other(crate::termination::name(signal))),
        None => Ok(()),
    }
}

/// Whether `a` and `b` are one existing file, however each is spelled.
fn is_same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
