//! STL-10, binary release: each image is three 96x96 planes stored column-major.

use std::path::Path;

use super::{DataError, Dataset, Split, files, resize};

const KIND: &str = "stl10";
const SIDE: usize = 96;
const PLANE: usize = SIDE * SIDE;
const IMAGE: usize = 3 * PLANE;

pub(super) fn load(dir: &Path, resolution: u32) -> Result<Dataset, DataError> {
    files::check_dir(KIND, dir)?;
    Ok(Dataset {
        name: KIND.to_string(),
        channels: 3,
        resolution,
        classes: 10,
        train: split(dir, "train", resolution)?,
        test: split(dir, "test", resolution)?,
    })
}

fn split(dir: &Path, set: &str, resolution: u32) -> Result<Split, DataError> {
    let images_path = dir.join(format!("{set}_X.bin"));
    let labels_path = dir.join(format!("{set}_y.bin"));
    let pixels = files::read(KIND, &images_path)?;
    let raw_labels = files::read(KIND, &labels_path)?;
    if !pixels.len().is_multiple_of(IMAGE) {
        return Err(DataError::file(
            KIND,
            &images_path,
            format!(
                "truncated: {} bytes is not a whole number of {IMAGE}-byte images; re-download the STL-10 binary release",
                pixels.len()
            ),
        ));
    }
    let count = pixels.len() / IMAGE;
    if count == 0 {
        return Err(DataError::file(
            KIND,
            &images_path,
            "holds no images; a split needs at least one",
        ));
    }
    if raw_labels.len() != count {
        return Err(DataError::file(
            KIND,
            &labels_path,
            format!(
                "holds {} labels but {} holds {count} images; both files must come from the same release",
                raw_labels.len(),
                images_path.display()
            ),
        ));
    }
    let mut labels = Vec::with_capacity(count);
    for (index, &label) in raw_labels.iter().enumerate() {
        if !(1..=10).contains(&label) {
            return Err(DataError::file(
                KIND,
                &labels_path,
                format!(
                    "label {label} at index {index} is outside 1-10; is this an STL-10 label file?"
                ),
            ));
        }
        labels.push(i64::from(label - 1));
    }
    let mut images = resize::image_buffer(KIND, count, 3, resolution)?;
    let mut row_major = vec![0; IMAGE];
    for image in pixels.chunks_exact(IMAGE) {
        transpose_planes(image, &mut row_major);
        resize::append_square(
            &mut images,
            &row_major,
            SIDE as u32,
            SIDE as u32,
            resolution,
        )?;
    }
    Ok(Split { images, labels })
}

fn transpose_planes(column_major: &[u8], row_major: &mut [u8]) {
    for (src, dst) in column_major
        .chunks_exact(PLANE)
        .zip(row_major.chunks_exact_mut(PLANE))
    {
        for (col, column) in src.chunks_exact(SIDE).enumerate() {
            for (row, &value) in column.iter().enumerate() {
                dst[row * SIDE + col] = value;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::TempDir;
    use super::*;

    /// A value that differs when row and column are swapped.
    fn pixel(image: usize, channel: usize, row: usize, col: usize) -> u8 {
        (row * 2 + col * 5 + channel * 31 + image * 7) as u8
    }

    fn column_major(count: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(count * IMAGE);
        for image in 0..count {
            for channel in 0..3 {
                for col in 0..SIDE {
                    bytes.extend((0..SIDE).map(|row| pixel(image, channel, row, col)));
                }
            }
        }
        bytes
    }

    fn valid_dir() -> TempDir {
        let dir = TempDir::new();
        dir.write("train_X.bin", &column_major(2));
        dir.write("train_y.bin", &[1, 10]);
        dir.write("test_X.bin", &column_major(1));
        dir.write("test_y.bin", &[4]);
        dir
    }

    #[test]
    fn loads_and_transposes_to_row_major() {
        let dir = valid_dir();
        let ds = load(dir.path(), 96).unwrap();
        assert_eq!((ds.channels, ds.classes), (3, 10));
        assert_eq!(ds.train.labels, [0, 9]);
        assert_eq!(ds.test.labels, [3]);
        for (image, pixels) in ds.train.images.chunks_exact(IMAGE).enumerate() {
            for (i, &value) in pixels.iter().enumerate() {
                let (channel, row, col) = (i / PLANE, i % PLANE / SIDE, i % SIDE);
                assert_eq!(value, pixel(image, channel, row, col));
            }
        }
        let small = load(dir.path(), 32).unwrap();
        assert_eq!(small.train.images.len(), 2 * 3 * 32 * 32);
        assert_eq!(small.test.images.len(), 3 * 32 * 32);
    }

    #[test]
    fn wrong_size_is_truncation() {
        let dir = valid_dir();
        let path = dir.write("test_X.bin", &column_major(1)[..IMAGE - 3]);
        let err = load(dir.path(), 96).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("stl10: {}: truncated", path.display())),
            "{err}"
        );
    }

    #[test]
    fn bad_labels_and_count_mismatch_are_rejected() {
        let dir = valid_dir();
        for label in [0, 11] {
            dir.write("train_y.bin", &[1, label]);
            let err = load(dir.path(), 96).unwrap_err().to_string();
            assert!(
                err.contains(&format!("train_y.bin: label {label} at index 1")),
                "{err}"
            );
        }
        dir.write("train_y.bin", &[1, 2, 3]);
        let err = load(dir.path(), 96).unwrap_err().to_string();
        assert!(err.contains("train_y.bin: holds 3 labels but"), "{err}");
    }

    #[test]
    fn empty_and_missing_inputs_are_rejected() {
        let dir = valid_dir();
        dir.write("test_X.bin", &[]);
        dir.write("test_y.bin", &[]);
        assert!(
            load(dir.path(), 96)
                .unwrap_err()
                .to_string()
                .contains("holds no images")
        );

        let missing = dir.path().join("nope");
        let err = load(&missing, 96).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("stl10: {}: cannot open", missing.display())),
            "{err}"
        );
    }
}
