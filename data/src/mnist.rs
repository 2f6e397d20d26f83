//! MNIST in the IDX format, raw or gzipped.

use std::path::{Path, PathBuf};

use super::{DataError, Dataset, Split, files, resize};

const KIND: &str = "mnist";
const IMAGE_MAGIC: u32 = 0x0000_0803;
const LABEL_MAGIC: u32 = 0x0000_0801;
const IMAGE_HEADER: usize = 16;
const LABEL_HEADER: usize = 8;

pub(super) fn load(dir: &Path, resolution: u32) -> Result<Dataset, DataError> {
    files::check_dir(KIND, dir)?;
    Ok(Dataset {
        name: KIND.to_string(),
        channels: 1,
        resolution,
        classes: 10,
        train: split(dir, "train", resolution)?,
        test: split(dir, "t10k", resolution)?,
    })
}

fn split(dir: &Path, prefix: &str, resolution: u32) -> Result<Split, DataError> {
    let images_path = locate(dir, prefix, "images", "idx3")?;
    let labels_path = locate(dir, prefix, "labels", "idx1")?;
    let image_bytes = files::read(KIND, &images_path)?;
    let idx = parse_images(&images_path, &image_bytes)?;
    let labels = parse_labels(&labels_path, &files::read(KIND, &labels_path)?)?;
    if labels.len() != idx.count {
        return Err(DataError::file(
            KIND,
            &images_path,
            format!(
                "holds {} images but {} holds {} labels; both files must come from the same release",
                idx.count,
                labels_path.display(),
                labels.len()
            ),
        ));
    }
    let mut images = resize::image_buffer(KIND, idx.count, 1, resolution)?;
    for image in idx
        .pixels
        .chunks_exact(idx.rows as usize * idx.cols as usize)
    {
        resize::append_square(&mut images, image, idx.cols, idx.rows, resolution)?;
    }
    Ok(Split { images, labels })
}

/// Finds `PREFIX-WHAT-IDX-ubyte`, also spelled `PREFIX-WHAT.IDX-ubyte`, either possibly gzipped.
fn locate(dir: &Path, prefix: &str, what: &str, idx: &str) -> Result<PathBuf, DataError> {
    let dashed = format!("{prefix}-{what}-{idx}-ubyte");
    let dotted = format!("{prefix}-{what}.{idx}-ubyte");
    [&dashed, &dotted]
        .into_iter()
        .flat_map(|name| [dir.join(name), dir.join(format!("{name}.gz"))])
        .find(|path| path.is_file())
        .ok_or_else(|| {
            DataError::file(
                KIND,
                &dir.join(&dashed),
                format!("not found (nor {dotted}, nor either with .gz); pass mnist:DIR naming the folder with the four MNIST IDX files"),
            )
        })
}

struct IdxImages<'a> {
    count: usize,
    rows: u32,
    cols: u32,
    pixels: &'a [u8],
}

fn parse_images<'a>(path: &Path, bytes: &'a [u8]) -> Result<IdxImages<'a>, DataError> {
    let fail = |problem: String| Err(DataError::file(KIND, path, problem));
    let Some((header, pixels)) = bytes.split_at_checked(IMAGE_HEADER) else {
        return fail(format!(
            "truncated: {} bytes is shorter than the {IMAGE_HEADER}-byte IDX header; re-download the file",
            bytes.len()
        ));
    };
    let [magic, count, rows, cols] = be_words(header);
    if magic != IMAGE_MAGIC {
        return fail(format!(
            "wrong magic 0x{magic:08x} (expected 0x{IMAGE_MAGIC:08x}); is this an MNIST IDX image file?"
        ));
    }
    if rows == 0 || cols == 0 {
        return fail(format!(
            "header declares {rows}x{cols} images; is this an MNIST IDX image file?"
        ));
    }
    if count == 0 {
        return fail("holds no images; a split needs at least one".to_string());
    }
    let expected = (count as usize)
        .checked_mul(rows as usize)
        .and_then(|n| n.checked_mul(cols as usize));
    match expected {
        Some(expected) if expected == pixels.len() => Ok(IdxImages {
            count: count as usize,
            rows,
            cols,
            pixels,
        }),
        Some(expected) if expected < pixels.len() => fail(format!(
            "{} bytes follow the {count} images of {rows}x{cols} the header declares; is this an MNIST IDX image file?",
            pixels.len() - expected
        )),
        _ => fail(format!(
            "truncated: the header declares {count} images of {rows}x{cols} but only {} pixel bytes follow; re-download the file",
            pixels.len()
        )),
    }
}

fn parse_labels(path: &Path, bytes: &[u8]) -> Result<Vec<i64>, DataError> {
    let fail = |problem: String| Err(DataError::file(KIND, path, problem));
    let Some((header, labels)) = bytes.split_at_checked(LABEL_HEADER) else {
        return fail(format!(
            "truncated: {} bytes is shorter than the {LABEL_HEADER}-byte IDX header; re-download the file",
            bytes.len()
        ));
    };
    let [magic, count] = be_words(header);
    if magic != LABEL_MAGIC {
        return fail(format!(
            "wrong magic 0x{magic:08x} (expected 0x{LABEL_MAGIC:08x}); is this an MNIST IDX label file?"
        ));
    }
    if (count as usize) > labels.len() {
        return fail(format!(
            "truncated: the header declares {count} labels but only {} bytes follow; re-download the file",
            labels.len()
        ));
    }
    if (count as usize) < labels.len() {
        return fail(format!(
            "{} bytes follow the {count} labels the header declares; is this an MNIST IDX label file?",
            labels.len() - count as usize
        ));
    }
    if let Some((index, label)) = labels.iter().enumerate().find(|(_, label)| **label > 9) {
        return fail(format!(
            "label {label} at index {index} is not a digit 0-9; is this an MNIST label file?"
        ));
    }
    Ok(labels.iter().map(|&label| i64::from(label)).collect())
}

fn be_words<const N: usize>(header: &[u8]) -> [u32; N] {
    let mut words = [0; N];
    for (word, chunk) in words.iter_mut().zip(header.chunks_exact(4)) {
        if let &[a, b, c, d] = chunk {
            *word = u32::from_be_bytes([a, b, c, d]);
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::super::testutil::TempDir;
    use super::*;

    fn idx_images(magic: u32, count: u32, side: u32) -> Vec<u8> {
        let mut bytes = [magic, count, side, side]
            .iter()
            .flat_map(|word| word.to_be_bytes())
            .collect::<Vec<_>>();
        bytes.extend((0..count * side * side).map(|i| (i % 251) as u8));
        bytes
    }

    fn idx_labels(labels: &[u8]) -> Vec<u8> {
        let mut bytes = [LABEL_MAGIC, labels.len() as u32]
            .iter()
            .flat_map(|word| word.to_be_bytes())
            .collect::<Vec<_>>();
        bytes.extend_from_slice(labels);
        bytes
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    /// Writes a valid set (3 train, 2 test images) with names built by `name`.
    fn write_set(dir: &TempDir, name: impl Fn(&str) -> String, gz: bool) {
        let encode = |bytes: Vec<u8>| if gz { gzip(&bytes) } else { bytes };
        let suffix = if gz { ".gz" } else { "" };
        let files = [
            ("train-images", "idx3", idx_images(IMAGE_MAGIC, 3, 28)),
            ("train-labels", "idx1", idx_labels(&[5, 0, 9])),
            ("t10k-images", "idx3", idx_images(IMAGE_MAGIC, 2, 28)),
            ("t10k-labels", "idx1", idx_labels(&[7, 1])),
        ];
        for (base, idx, bytes) in files {
            dir.write(
                &format!("{}{suffix}", name(&format!("{base}-{idx}"))),
                &encode(bytes),
            );
        }
    }

    fn dashed(stem: &str) -> String {
        format!("{stem}-ubyte")
    }

    fn load_err(dir: &TempDir) -> String {
        load(dir.path(), 28).unwrap_err().to_string()
    }

    #[test]
    fn loads_raw_and_gzipped_sets() {
        for gz in [false, true] {
            let dir = TempDir::new();
            write_set(&dir, dashed, gz);
            let ds = load(dir.path(), 28).unwrap();
            assert_eq!(
                (ds.name.as_str(), ds.channels, ds.classes),
                ("mnist", 1, 10)
            );
            assert_eq!(ds.train.labels, [5, 0, 9]);
            assert_eq!(ds.test.labels, [7, 1]);
            assert_eq!(ds.train.images, idx_images(IMAGE_MAGIC, 3, 28)[16..]);

            let small = load(dir.path(), 14).unwrap();
            assert_eq!(small.resolution, 14);
            assert_eq!(small.train.images.len(), 3 * 14 * 14);
            assert_eq!(small.test.images.len(), 2 * 14 * 14);
        }
    }

    #[test]
    fn accepts_the_dotted_spelling() {
        let dir = TempDir::new();
        write_set(&dir, |stem| dashed(stem).replacen("-idx", ".idx", 1), false);
        assert_eq!(load(dir.path(), 28).unwrap().train.labels.len(), 3);
    }

    #[test]
    fn wrong_magic_names_the_file() {
        let dir = TempDir::new();
        write_set(&dir, dashed, false);
        let path = dir.write("train-images-idx3-ubyte", &idx_images(0, 3, 28));
        assert_eq!(
            load_err(&dir),
            format!(
                "mnist: {}: wrong magic 0x00000000 (expected 0x00000803); is this an MNIST IDX image file?",
                path.display()
            )
        );
    }

    #[test]
    fn truncated_files_are_rejected() {
        let dir = TempDir::new();
        write_set(&dir, dashed, false);
        let full = idx_images(IMAGE_MAGIC, 2, 28);
        dir.write("t10k-images-idx3-ubyte", &full[..full.len() - 1]);
        let err = load_err(&dir);
        assert!(err.contains("t10k-images-idx3-ubyte: truncated"), "{err}");

        dir.write("t10k-images-idx3-ubyte", &full[..10]);
        assert!(load_err(&dir).contains("truncated"));

        dir.write("t10k-images-idx3-ubyte", &full);
        dir.write("t10k-labels-idx1-ubyte", &idx_labels(&[7, 1])[..9]);
        let err = load_err(&dir);
        assert!(err.contains("t10k-labels-idx1-ubyte: truncated"), "{err}");
    }

    #[test]
    fn truncated_gzip_is_rejected() {
        let dir = TempDir::new();
        write_set(&dir, dashed, true);
        let full = gzip(&idx_images(IMAGE_MAGIC, 3, 28));
        dir.write("train-images-idx3-ubyte.gz", &full[..full.len() / 2]);
        let err = load_err(&dir);
        assert!(
            err.contains("train-images-idx3-ubyte.gz: corrupt or truncated gzip"),
            "{err}"
        );
    }

    #[test]
    fn bad_labels_and_count_mismatch_are_rejected() {
        let dir = TempDir::new();
        write_set(&dir, dashed, false);
        dir.write("train-labels-idx1-ubyte", &idx_labels(&[5, 10, 9]));
        let err = load_err(&dir);
        assert!(
            err.contains("train-labels-idx1-ubyte: label 10 at index 1"),
            "{err}"
        );

        dir.write("train-labels-idx1-ubyte", &idx_labels(&[5, 0]));
        let err = load_err(&dir);
        assert!(err.contains("holds 3 images but"), "{err}");
        assert!(err.contains("holds 2 labels"), "{err}");
    }

    #[test]
    fn empty_and_missing_inputs_are_rejected() {
        let dir = TempDir::new();
        write_set(&dir, dashed, false);
        dir.write("t10k-images-idx3-ubyte", &idx_images(IMAGE_MAGIC, 0, 28));
        assert!(load_err(&dir).contains("holds no images"));

        std::fs::remove_file(dir.path().join("t10k-images-idx3-ubyte")).unwrap();
        let err = load_err(&dir);
        assert!(err.contains("t10k-images-idx3-ubyte: not found"), "{err}");

        let missing = dir.path().join("nope");
        let err = load(&missing, 28).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("mnist: {}: cannot open", missing.display())),
            "{err}"
        );
    }
}
