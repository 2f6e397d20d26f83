//! Files golow writes whole (summaries, exports, sweep results and figures).

use std::fs::File;
use std::path::Path;

/// Writes `path` through a temporary file next to it, renamed once complete: a reader never sees half
/// a file, and a failed write leaves nothing behind.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = File::create(&tmp).and_then(|mut file| {
        write(&mut file)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
