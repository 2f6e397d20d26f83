//! File access shared by the loaders, so that every failure names the dataset and the file.

use std::fs;
use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;

use super::DataError;

pub(super) fn check_dir(kind: &str, dir: &Path) -> Result<(), DataError> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(DataError::file(
            kind,
            dir,
            format!("not a directory; pass {kind}:DIR naming the dataset folder"),
        )),
        Err(err) => Err(DataError::file(
            kind,
            dir,
            format!(
                "cannot open the dataset directory ({err}); pass {kind}:DIR naming the dataset folder"
            ),
        )),
    }
}

/// Reads a whole file, inflating it when its name ends in `.gz`.
pub(super) fn read(kind: &str, path: &Path) -> Result<Vec<u8>, DataError> {
    let raw = fs::read(path)
        .map_err(|err| DataError::file(kind, path, format!("cannot read ({err})")))?;
    if path.extension().is_none_or(|ext| ext != "gz") {
        return Ok(raw);
    }
    let mut inflated = Vec::new();
    GzDecoder::new(raw.as_slice())
        .read_to_end(&mut inflated)
        .map_err(|err| {
            DataError::file(
                kind,
                path,
                format!("corrupt or truncated gzip data ({err}); re-download the file"),
            )
        })?;
    Ok(inflated)
}

/// Lossy, because a stray non-UTF-8 byte in a comment must not reject an otherwise good file.
pub(super) fn read_text(kind: &str, path: &Path) -> Result<String, DataError> {
    Ok(String::from_utf8_lossy(&read(kind, path)?).into_owned())
}
