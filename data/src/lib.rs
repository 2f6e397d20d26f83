//! Dataset decoding and the on-disk cache that every worker reads, so that all
//! implementations train on identical bytes: the monitor decodes a dataset once per session and
//! writes the cache, the workers read it and draw batches in the shared data order.

mod cache;
mod cifar10;
mod files;
mod mnist;
mod order;
mod pascal;
mod resize;
mod spec;
mod stl10;
mod synthetic;
#[cfg(test)]
mod testutil;

use std::fmt;
use std::path::Path;

pub use cache::{CacheMeta, read_meta, write_cache};
pub use files::{irregular_kind, open_regular, read_capped};
pub use order::epoch_order;
pub use spec::DatasetSpec;

/// A one-line description of what was wrong with a dataset and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataError(String);

impl DataError {
    fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    fn file(kind: &str, path: &Path, problem: impl fmt::Display) -> Self {
        Self(format!("{kind}: {}: {problem}", path.display()))
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DataError {}

/// Images are `count * channels * resolution * resolution` bytes, NCHW.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub images: Vec<u8>,
    pub labels: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub name: String,
    pub channels: u32,
    pub resolution: u32,
    pub classes: u32,
    pub train: Split,
    pub test: Split,
}

/// Decodes `spec` with every image resized to `resolution` x `resolution`.
pub fn load(spec: &DatasetSpec, resolution: u32) -> Result<Dataset, DataError> {
    if resolution == 0 {
        return Err(DataError::new(format!(
            "{}: resolution 0 is not usable; ask for at least 1 pixel",
            spec.name()
        )));
    }
    match spec {
        DatasetSpec::Synthetic => synthetic::load(resolution),
        DatasetSpec::Mnist(dir) => mnist::load(dir, resolution),
        DatasetSpec::Cifar10(dir) => cifar10::load(dir, resolution),
        DatasetSpec::Stl10(dir) => stl10::load(dir, resolution),
        DatasetSpec::Pascal(dir) => pascal::load(dir, resolution),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_resolution_is_rejected() {
        let err = load(&DatasetSpec::Synthetic, 0).unwrap_err().to_string();
        assert!(err.contains("resolution 0"), "{err}");
    }
}
