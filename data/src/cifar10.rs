//! CIFAR-10, binary release: records of one label byte and a 3x32x32 channel-major image.

use std::path::{Path, PathBuf};

use super::{DataError, Dataset, Split, files, resize};

const KIND: &str = "cifar10";
const SIDE: u32 = 32;
const RECORD: usize = 1 + 3 * (SIDE * SIDE) as usize;

pub(super) fn load(dir: &Path, resolution: u32) -> Result<Dataset, DataError> {
    files::check_dir(KIND, dir)?;
    let train_paths: Vec<PathBuf> = (1..=5)
        .map(|i| dir.join(format!("data_batch_{i}.bin")))
        .filter(|path| path.is_file())
        .collect();
    if train_paths.is_empty() {
        return Err(DataError::file(
            KIND,
            &dir.join("data_batch_1.bin"),
            "not found (nor data_batch_2..5.bin); pass cifar10:DIR naming the cifar-10-batches-bin folder of the binary CIFAR-10 release",
        ));
    }
    Ok(Dataset {
        name: KIND.to_string(),
        channels: 3,
        resolution,
        classes: 10,
        train: split(&train_paths, resolution)?,
        test: split(&[dir.join("test_batch.bin")], resolution)?,
    })
}

fn split(paths: &[PathBuf], resolution: u32) -> Result<Split, DataError> {
    let mut batches = Vec::with_capacity(paths.len());
    for path in paths {
        let bytes = files::read(KIND, path)?;
        if !bytes.len().is_multiple_of(RECORD) {
            return Err(DataError::file(
                KIND,
                path,
                format!(
                    "truncated: {} bytes is not a whole number of {RECORD}-byte records; re-download the binary CIFAR-10 release",
                    bytes.len()
                ),
            ));
        }
        if bytes.is_empty() {
            return Err(DataError::file(
                KIND,
                path,
                "holds no images; a split needs at least one",
            ));
        }
        batches.push((path, bytes));
    }
    let count = batches.iter().map(|(_, bytes)| bytes.len() / RECORD).sum();
    let mut images = resize::image_buffer(KIND, count, 3, resolution)?;
    let mut labels = Vec::with_capacity(count);
    for (path, bytes) in &batches {
        let records = bytes.chunks_exact(RECORD).filter_map(<[u8]>::split_first);
        for (index, (&label, pixels)) in records.enumerate() {
            if label > 9 {
                return Err(DataError::file(
                    KIND,
                    path,
                    format!(
                        "record {index} has label {label}, expected 0-9; is this the binary CIFAR-10 (not CIFAR-100) release?"
                    ),
                ));
            }
            labels.push(i64::from(label));
            resize::append_square(&mut images, pixels, SIDE, SIDE, resolution)?;
        }
    }
    Ok(Split { images, labels })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::TempDir;
    use super::*;

    fn records(labels: &[u8]) -> Vec<u8> {
        labels
            .iter()
            .flat_map(|&label| {
                std::iter::once(label)
                    .chain((0..RECORD - 1).map(move |i| (i / 1024) as u8 * 100 + label))
            })
            .collect()
    }

    fn valid_dir() -> TempDir {
        let dir = TempDir::new();
        dir.write("data_batch_1.bin", &records(&[3, 4]));
        dir.write("data_batch_3.bin", &records(&[9, 0]));
        dir.write("test_batch.bin", &records(&[1]));
        dir
    }

    #[test]
    fn loads_present_batches_in_order() {
        let dir = valid_dir();
        let ds = load(dir.path(), 32).unwrap();
        assert_eq!((ds.channels, ds.classes, ds.resolution), (3, 10, 32));
        assert_eq!(ds.train.labels, [3, 4, 9, 0]);
        assert_eq!(ds.test.labels, [1]);
        let second = &ds.train.images[RECORD - 1..2 * (RECORD - 1)];
        assert_eq!(second[..1024], [4; 1024]);
        assert_eq!(second[2048..], [204; 1024]);

        let small = load(dir.path(), 16).unwrap();
        assert_eq!(small.train.images.len(), 4 * 3 * 16 * 16);
        assert_eq!(small.test.images[256..512], [101; 256]);
    }

    #[test]
    fn wrong_size_is_truncation() {
        let dir = valid_dir();
        let mut bytes = records(&[1]);
        bytes.pop();
        let path = dir.write("test_batch.bin", &bytes);
        let err = load(dir.path(), 32).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("cifar10: {}: truncated", path.display())),
            "{err}"
        );
    }

    #[test]
    fn bad_label_names_the_file() {
        let dir = valid_dir();
        dir.write("data_batch_3.bin", &records(&[9, 10]));
        let err = load(dir.path(), 32).unwrap_err().to_string();
        assert!(
            err.contains("data_batch_3.bin: record 1 has label 10"),
            "{err}"
        );
    }

    #[test]
    fn empty_and_missing_inputs_are_rejected() {
        let dir = valid_dir();
        dir.write("test_batch.bin", &[]);
        assert!(
            load(dir.path(), 32)
                .unwrap_err()
                .to_string()
                .contains("holds no images")
        );

        std::fs::remove_file(dir.path().join("test_batch.bin")).unwrap();
        let err = load(dir.path(), 32).unwrap_err().to_string();
        assert!(err.contains("test_batch.bin: cannot read"), "{err}");

        let empty = TempDir::new();
        let err = load(empty.path(), 32).unwrap_err().to_string();
        assert!(err.contains("data_batch_1.bin: not found"), "{err}");

        let missing = empty.path().join("nope");
        let err = load(&missing, 32).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("cifar10: {}:", missing.display())),
            "{err}"
        );
    }
}
