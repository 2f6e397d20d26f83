//! The decoded-dataset cache shared by all workers: raw arrays plus `meta.json`.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{DataError, Dataset, Split};

const FORMAT: &str = "golow-data-cache";
const VERSION: u32 = 1;
const META: &str = "meta.json";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CacheMeta {
    pub format: String,
    pub version: u32,
    pub name: String,
    pub channels: u32,
    pub resolution: u32,
    pub classes: u32,
    pub train_count: u64,
    pub test_count: u64,
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl CacheMeta {
    fn image_bytes(&self) -> Option<u64> {
        u64::from(self.channels).checked_mul(u64::from(self.resolution).checked_pow(2)?)
    }

    /// Each data file with the size `meta.json` implies for it.
    fn expected_files(&self) -> Option<[(&'static str, u64); 4]> {
        let image = self.image_bytes()?;
        Some([
            ("train_images.u8", self.train_count.checked_mul(image)?),
            ("train_labels.i64", self.train_count.checked_mul(8)?),
            ("test_images.u8", self.test_count.checked_mul(image)?),
            ("test_labels.i64", self.test_count.checked_mul(8)?),
        ])
    }
}

/// Writes `ds` into `dir`; `meta.json` is written last so that its presence
/// marks a complete cache.
pub fn write_cache(ds: &Dataset, dir: &Path) -> io::Result<CacheMeta> {
    let channels = ds.channels as usize;
    let plane = ds.resolution as usize * ds.resolution as usize;
    for (split_name, split) in [("train", &ds.train), ("test", &ds.test)] {
        let expected = split.labels.len().checked_mul(channels * plane);
        if channels == 0 || plane == 0 || expected != Some(split.images.len()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: the {split_name} split has {} image bytes for {} labels of {channels}x{res}x{res}",
                    ds.name,
                    split.images.len(),
                    split.labels.len(),
                    res = ds.resolution
                ),
            ));
        }
    }
    fs::create_dir_all(dir)?;
    let (mean, std) = channel_stats(&ds.train, channels, plane);
    let meta = CacheMeta {
        format: FORMAT.to_string(),
        version: VERSION,
        name: ds.name.clone(),
        channels: ds.channels,
        resolution: ds.resolution,
        classes: ds.classes,
        train_count: ds.train.labels.len() as u64,
        test_count: ds.test.labels.len() as u64,
        mean,
        std,
    };
    fs::write(dir.join("train_images.u8"), &ds.train.images)?;
    fs::write(dir.join("train_labels.i64"), le_bytes(&ds.train.labels))?;
    fs::write(dir.join("test_images.u8"), &ds.test.images)?;
    fs::write(dir.join("test_labels.i64"), le_bytes(&ds.test.labels))?;
    let json = serde_json::to_string_pretty(&meta).map_err(io::Error::other)?;
    fs::write(dir.join(META), json)?;
    Ok(meta)
}

/// Reads `meta.json` and checks that the data files beside it have the sizes it implies.
pub fn read_meta(dir: &Path) -> Result<CacheMeta, DataError> {
    let rebuild = format!("delete {} and rebuild the cache", dir.display());
    let path = dir.join(META);
    let text = fs::read_to_string(&path).map_err(|err| {
        DataError::file(
            "cache",
            &path,
            format!("cannot read ({err}); build the cache first"),
        )
    })?;
    let meta: CacheMeta = serde_json::from_str(&text).map_err(|err| {
        DataError::file(
            "cache",
            &path,
            format!("not a valid cache description ({err}); {rebuild}"),
        )
    })?;
    if meta.format != FORMAT || meta.version != VERSION {
        return Err(DataError::file(
            "cache",
            &path,
            format!(
                "format '{}' version {}, expected '{FORMAT}' version {VERSION}; {rebuild}",
                meta.format, meta.version
            ),
        ));
    }
    let files = meta.expected_files().ok_or_else(|| {
        DataError::file("cache", &path, format!("sizes overflow 64 bits; {rebuild}"))
    })?;
    for (name, expected) in files {
        let file = dir.join(name);
        let actual = fs::metadata(&file)
            .map_err(|err| {
                DataError::file("cache", &file, format!("cannot read ({err}); {rebuild}"))
            })?
            .len();
        if actual != expected {
            return Err(DataError::file(
                "cache",
                &file,
                format!("{actual} bytes but {META} implies {expected}; {rebuild}"),
            ));
        }
    }
    Ok(meta)
}

fn le_bytes(labels: &[i64]) -> Vec<u8> {
    labels
        .iter()
        .flat_map(|label| label.to_le_bytes())
        .collect()
}

/// Per-channel mean and population std of pixel/255 over `split`, via
/// histograms so that the sums are exact. A constant channel gets std 1 so
/// that normalising by it stays finite.
fn channel_stats(split: &Split, channels: usize, plane: usize) -> (Vec<f32>, Vec<f32>) {
    let mut histograms = vec![[0u64; 256]; channels];
    for image in split.images.chunks_exact(channels * plane) {
        for (histogram, pixels) in histograms.iter_mut().zip(image.chunks_exact(plane)) {
            for &pixel in pixels {
                histogram[usize::from(pixel)] += 1;
            }
        }
    }
    histograms
        .iter()
        .map(|histogram| {
            let weighted = || {
                histogram
                    .iter()
                    .zip(0u32..)
                    .map(|(&n, v)| (n as f64, f64::from(v) / 255.0))
            };
            let total: f64 = weighted().map(|(n, _)| n).sum();
            if total == 0.0 {
                return (0.0, 1.0);
            }
            let mean = weighted().map(|(n, x)| n * x).sum::<f64>() / total;
            let variance = weighted().map(|(n, x)| n * (x - mean).powi(2)).sum::<f64>() / total;
            let std = variance.sqrt();
            (mean as f32, if std > 0.0 { std as f32 } else { 1.0 })
        })
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::super::testutil::TempDir;
    use super::*;

    /// Two 2-channel 1x1 train images: channel 0 is {0, 255}, channel 1 is constant 51.
    fn tiny() -> Dataset {
        Dataset {
            name: "tiny".to_string(),
            channels: 2,
            resolution: 1,
            classes: 3,
            train: Split {
                images: vec![0, 51, 255, 51],
                labels: vec![2, -1],
            },
            test: Split {
                images: vec![7, 8, 9, 10, 11, 12],
                labels: vec![0, 1, 2],
            },
        }
    }

    #[test]
    fn round_trips_with_right_sizes_and_stats() {
        let dir = TempDir::new();
        let cache = dir.path().join("nested").join("cache");
        let meta = write_cache(&tiny(), &cache).unwrap();
        assert_eq!(meta, read_meta(&cache).unwrap());
        assert_eq!((meta.format.as_str(), meta.version), (FORMAT, VERSION));
        assert_eq!((meta.train_count, meta.test_count, meta.classes), (2, 3, 3));
        assert_eq!(meta.mean, [0.5, 0.2]);
        assert_eq!(meta.std, [0.5, 1.0]);

        let read = |name: &str| fs::read(cache.join(name)).unwrap();
        assert_eq!(read("train_images.u8"), [0, 51, 255, 51]);
        assert_eq!(read("test_images.u8").len(), 6);
        let labels = read("train_labels.i64");
        assert_eq!(labels[..8], 2i64.to_le_bytes());
        assert_eq!(labels[8..], (-1i64).to_le_bytes());
        assert_eq!(read("test_labels.i64").len(), 24);
    }

    #[test]
    fn stats_match_a_direct_computation() {
        let images: Vec<u8> = (0..3 * 2 * 4).map(|i| (i * 37 % 256) as u8).collect();
        let split = Split {
            images: images.clone(),
            labels: vec![0; 3],
        };
        let (mean, std) = channel_stats(&split, 2, 4);
        for channel in 0..2 {
            let values: Vec<f64> = images
                .chunks_exact(8)
                .flat_map(|image| &image[channel * 4..channel * 4 + 4])
                .map(|&v| f64::from(v) / 255.0)
                .collect();
            let m = values.iter().sum::<f64>() / values.len() as f64;
            let s =
                (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / values.len() as f64).sqrt();
            assert!((f64::from(mean[channel]) - m).abs() < 1e-6);
            assert!((f64::from(std[channel]) - s).abs() < 1e-6);
        }
    }

    #[test]
    fn inconsistent_dataset_is_refused() {
        let mut ds = tiny();
        ds.test.images.pop();
        let dir = TempDir::new();
        let err = write_cache(&ds, dir.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("test split"), "{err}");
    }

    #[test]
    fn stale_or_broken_caches_are_reported() {
        let dir = TempDir::new();
        let err = read_meta(dir.path()).unwrap_err().to_string();
        assert!(err.contains("meta.json: cannot read"), "{err}");

        write_cache(&tiny(), dir.path()).unwrap();
        dir.write("test_images.u8", &[1, 2]);
        let err = read_meta(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("test_images.u8: 2 bytes but meta.json implies 6"),
            "{err}"
        );

        dir.write("meta.json", b"{\"format\": 3}");
        let err = read_meta(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a valid cache description"), "{err}");

        let mut meta = write_cache(&tiny(), dir.path()).unwrap();
        meta.version = 2;
        dir.write(
            "meta.json",
            serde_json::to_string(&meta).unwrap().as_bytes(),
        );
        let err = read_meta(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("version 2, expected 'golow-data-cache' version 1"),
            "{err}"
        );
    }
}
