//! File access shared by the loaders, so that every failure names the dataset and the file.

use std::fs::{self, File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
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

/// More than any file of a supported dataset holds (STL-10's test images, the largest, are 276 MB): a file beyond
/// it, or a `.gz` inflating beyond it, is not one.
const MAX_FILE_BYTES: u64 = 512 << 20;

/// Opens `path` for reading if it is a regular file (after symlinks); a FIFO, device, socket or directory is
/// refused at once rather than read from (or waited on) for ever.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    // O_NONBLOCK changes nothing for a regular file's reads.
    match irregular_kind(file.metadata()?.file_type()) {
        None => Ok(file),
        Some(what) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it is {what}, not a regular file"),
        )),
    }
}

/// What a file that is not a regular one is, in words (`a FIFO`); `None` for a regular file.
pub fn irregular_kind(kind: FileType) -> Option<&'static str> {
    match () {
        _ if kind.is_file() => None,
        _ if kind.is_symlink() => Some("a symbolic link"),
        _ if kind.is_dir() => Some("a directory"),
        _ if kind.is_fifo() => Some("a FIFO"),
        _ if kind.is_block_device() || kind.is_char_device() => Some("a device"),
        _ if kind.is_socket() => Some("a socket"),
        _ => Some("not a regular file"),
    }
}

/// Reads at most `max` bytes of `reader`; more is an error, not an allocation.
pub fn read_capped(reader: impl Read, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {max} bytes"),
        ));
    }
    Ok(bytes)
}

/// Reads a whole file, inflating it when its name ends in `.gz`.
pub(super) fn read(kind: &str, path: &Path) -> Result<Vec<u8>, DataError> {
    let raw = open_regular(path)
        .and_then(|file| read_capped(file, MAX_FILE_BYTES))
        .map_err(|err| DataError::file(kind, path, format!("cannot read ({err})")))?;
    if path.extension().is_none_or(|ext| ext != "gz") {
        return Ok(raw);
    }
    read_capped(GzDecoder::new(raw.as_slice()), MAX_FILE_BYTES).map_err(|err| {
        let what = if err.kind() == io::ErrorKind::FileTooLarge {
            format!(
                "inflates to more than {MAX_FILE_BYTES} bytes, more than any dataset file holds"
            )
        } else {
            format!("corrupt or truncated gzip data ({err}); re-download the file")
        };
        DataError::file(kind, path, what)
    })
}

/// Lossy, because a stray non-UTF-8 byte in a comment must not reject an otherwise good file.
pub(super) fn read_text(kind: &str, path: &Path) -> Result<String, DataError> {
    Ok(String::from_utf8_lossy(&read(kind, path)?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_read_stops_one_byte_past_the_cap() {
        assert_eq!(read_capped(&[7u8; 16][..], 16).unwrap().len(), 16);
        let endless = std::io::repeat(1);
        let err = read_capped(endless, 1 << 20).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
    }

    #[test]
    fn only_regular_files_are_opened() {
        assert!(open_regular(Path::new("/proc/self/status")).is_ok());
        let dir = open_regular(Path::new("/")).unwrap_err();
        assert!(dir.to_string().contains("it is a directory"), "{dir}");
        let device = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(device.to_string().contains("it is a device"), "{device}");
    }
}
