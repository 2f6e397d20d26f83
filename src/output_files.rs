//! Files golow writes whole (summaries, exports, sweep results and figures).

use std::fs::File;
use std::io::{Error, ErrorKind};
use std::path::{Path, PathBuf};

/// What `path` is when golow must not write over it: anything but a regular file or nothing (a symlink, whose
/// target it would replace with a file; a FIFO or device, which it would replace or block on; a directory).
pub fn unwritable_kind(path: &Path) -> Option<&'static str> {
    golow_data::irregular_kind(std::fs::symlink_metadata(path).ok()?.file_type())
}

/// Writes `path` through a temporary file next to it, renamed once complete: a reader never sees half
/// a file, and a failed write leaves nothing behind. Only a regular file or a new path is written. A terminating
/// signal that comes meanwhile is golow's to handle once the file is whole or removed, not its end half-way (`write`
/// may stop early for it: see [`crate::termination`]).
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if let Some(kind) = unwritable_kind(path) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("it is {kind}; golow writes only to a regular file or a new path"),
        ));
    }
    let _catching = crate::termination::catch();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    // A new file of our own: never through a link someone left at the temporary name, and never removing theirs.
    let mut file = File::create_new(&tmp)?;
    let written = write(&mut file)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
