//! Batches from the session's data cache, built with the same tensor operations as the Python worker
//! (index_select → float → /255 → normalise) so every implementation computes on identical inputs.

use std::path::Path;

use tch::{Device, Kind, Tensor};

use golow_data::CacheMeta;
use golow_protocol::config::Mode;

/// One split of the cache, memory-mapped so workers share the page cache instead of copying it.
pub struct CachedSplit {
    images: Tensor,
    labels: Tensor,
    pub count: usize,
}

pub struct DataCache {
    pub train: CachedSplit,
    pub test: CachedSplit,
    mean: Tensor,
    std: Tensor,
}

/// A batch on the host, ready to be copied to the device.
pub struct HostBatch {
    pub inputs: Tensor,
    pub targets: Tensor,
}

impl HostBatch {
    pub fn bytes(&self) -> u64 {
        let size = |t: &Tensor| t.numel() as u64 * t.kind().elt_size_in_bytes() as u64;
        size(&self.inputs) + size(&self.targets)
    }
}

fn map_split(dir: &Path, split: &str, meta: &CacheMeta, count: u64) -> Result<CachedSplit, String> {
    let pixels = i64::from(meta.channels) * i64::from(meta.resolution).pow(2);
    let n = i64::try_from(count).map_err(|_| format!("{split}: count {count} too large"))?;
    let images_path = dir.join(format!("{split}_images.u8"));
    let labels_path = dir.join(format!("{split}_labels.i64"));
    let open = |path: &Path, size: i64, kind: Kind| {
        let name = path
            .to_str()
            .ok_or_else(|| format!("non-UTF-8 path {}", path.display()))?;
        Tensor::f_from_file(name, false, Some(size), (kind, Device::Cpu))
            .map_err(|e| format!("cannot map {}: {e}", path.display()))
    };
    let res = i64::from(meta.resolution);
    let images =
        open(&images_path, n * pixels, Kind::Uint8)?.view([n, i64::from(meta.channels), res, res]);
    let labels = open(&labels_path, n, Kind::Int64)?;
    Ok(CachedSplit {
        images,
        labels,
        count: count as usize,
    })
}

impl DataCache {
    pub fn open(dir: &Path) -> Result<DataCache, String> {
        let meta = golow_data::read_meta(dir).map_err(|e| e.to_string())?;
        let train = map_split(dir, "train", &meta, meta.train_count)?;
        let test = map_split(dir, "test", &meta, meta.test_count)?;
        let channels = i64::from(meta.channels);
        let mean = Tensor::from_slice(&meta.mean).view([1, channels, 1, 1]);
        let std = Tensor::from_slice(&meta.std).view([1, channels, 1, 1]);
        Ok(DataCache {
            train,
            test,
            mean,
            std,
        })
    }

    /// The split a phase reads: training steps read the training split, evaluation the test split.
    pub fn split(&self, phase: Mode) -> &CachedSplit {
        match phase {
            Mode::Train => &self.train,
            Mode::Eval => &self.test,
        }
    }

    pub fn batch(&self, phase: Mode, indices: &[usize], pinned: Option<Device>) -> HostBatch {
        let split = self.split(phase);
        let idx: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
        let idx = Tensor::from_slice(&idx);
        let inputs = split.images.index_select(0, &idx).to_kind(Kind::Float) / 255.0;
        let inputs = (inputs - &self.mean) / &self.std;
        let targets = split.labels.index_select(0, &idx);
        match pinned {
            Some(device) => HostBatch {
                inputs: inputs.pin_memory(device),
                targets: targets.pin_memory(device),
            },
            None => HostBatch { inputs, targets },
        }
    }
}
