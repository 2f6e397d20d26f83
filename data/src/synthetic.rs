//! A built-in, learnable image set: each class is a colour tint plus a grating
//! of its own orientation and frequency, disguised by random phase, contrast,
//! brightness and strong per-pixel noise.

use std::f32::consts::{PI, TAU};
use std::num::NonZero;
use std::thread;

use super::order::SplitMix64;
use super::{DataError, Dataset, Split, resize};

const KIND: &str = "synthetic";
/// Fixed so every session and every worker sees the same images.
const SEED: u64 = 0x601_0DA7_A5EE_D001;
const CLASSES: usize = 10;
const CHANNELS: usize = 3;
const TRAIN: usize = 2048;
const TEST: usize = 512;
/// The last two tints are grey and differ by less than the brightness jitter,
/// so telling those classes apart needs the grating.
const TINTS: [[f32; CHANNELS]; CLASSES] = [
    [1.0, -0.6, -0.6],
    [-0.6, 1.0, -0.6],
    [-0.6, -0.6, 1.0],
    [1.0, 1.0, -0.8],
    [1.0, -0.8, 1.0],
    [-0.8, 1.0, 1.0],
    [0.8, 0.2, -0.8],
    [-0.2, -0.8, 0.8],
    [0.3, 0.3, 0.3],
    [-0.4, -0.4, -0.4],
];
const TINT: f32 = 0.12;
const GRATING: f32 = 0.22;
const BRIGHTNESS: f32 = 0.1;
const NOISE: f32 = 0.25;

pub(super) fn load(resolution: u32) -> Result<Dataset, DataError> {
    Ok(Dataset {
        name: KIND.to_string(),
        channels: CHANNELS as u32,
        resolution,
        classes: CLASSES as u32,
        train: split(0, TRAIN, resolution)?,
        test: split(TRAIN, TEST, resolution)?,
    })
}

/// Images `first..first + count`; each is seeded by its index alone, so the
/// result does not depend on how the work is spread over threads.
fn split(first: usize, count: usize, resolution: u32) -> Result<Split, DataError> {
    let side = resolution as usize;
    let image_len = CHANNELS * side * side;
    let mut images = resize::image_buffer(KIND, count, CHANNELS as u32, resolution)?;
    images.resize(count * image_len, 0);
    let mut labels = vec![0; count];
    let threads = thread::available_parallelism().map_or(1, NonZero::get);
    let per_thread = count.div_ceil(threads).max(1);
    thread::scope(|scope| {
        let chunks = images
            .chunks_mut(per_thread * image_len)
            .zip(labels.chunks_mut(per_thread));
        for (chunk, (pixels, labels)) in chunks.enumerate() {
            scope.spawn(move || {
                let images = pixels.chunks_exact_mut(image_len).zip(labels);
                for (offset, (image, label)) in images.enumerate() {
                    *label = draw(first + chunk * per_thread + offset, side, image);
                }
            });
        }
    });
    Ok(Split { images, labels })
}

/// Fills `image` (NCHW, `side` x `side`) and returns its class.
fn draw(index: usize, side: usize, image: &mut [u8]) -> i64 {
    let mut rng = SplitMix64::new(SplitMix64::new(SEED ^ index as u64).next_u64());
    let class = (rng.next_u64() % CLASSES as u64) as usize;
    let angle = class as f32 * PI / CLASSES as f32 + 0.05 * symmetric(&mut rng);
    let cycles = 3.0 + 1.5 * (class % 3) as f32;
    let phase = TAU * unit(&mut rng);
    let amplitude = 255.0 * GRATING * (0.6 + 0.4 * unit(&mut rng));
    let brightness = BRIGHTNESS * symmetric(&mut rng);
    let (kx, ky) = (TAU * cycles * angle.cos(), TAU * cycles * angle.sin());
    let coord = |i: usize| (i as f32 + 0.5) / side as f32 - 0.5;
    // sin(kx*x + ky*y + phase) split into per-column and per-row factors keeps
    // trigonometry out of the per-pixel loop.
    let (sin_x, cos_x): (Vec<f32>, Vec<f32>) = (0..side).map(|x| (kx * coord(x)).sin_cos()).unzip();
    let mut grating = Vec::with_capacity(side * side);
    for y in 0..side {
        let (sin_y, cos_y) = (ky * coord(y) + phase).sin_cos();
        grating.extend(
            sin_x
                .iter()
                .zip(&cos_x)
                .map(|(sx, cx)| sx * cos_y + cx * sin_y),
        );
    }
    let mut noise = vec![0u8; side * side];
    let tint = TINTS.get(class).copied().unwrap_or_default();
    for (plane, tint) in image.chunks_exact_mut(side * side).zip(tint) {
        for chunk in noise.chunks_mut(8) {
            for (byte, random) in chunk.iter_mut().zip(rng.next_u64().to_le_bytes()) {
                *byte = random;
            }
        }
        // Noise byte n adds NOISE * (2n - 255); the constant part lives in `level`,
        // and the extra 0.5 rounds in the truncating cast.
        let level = 255.0 * (0.5 + TINT * tint + brightness - NOISE) + 0.5;
        for ((pixel, grating), &noise) in plane.iter_mut().zip(&grating).zip(&noise) {
            let value = level + amplitude * grating + 2.0 * NOISE * f32::from(noise);
            // The float-to-int cast saturates, clamping to 0..=255.
            *pixel = value as u8;
        }
    }
    class as i64
}

fn unit(rng: &mut SplitMix64) -> f32 {
    (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32
}

fn symmetric(rng: &mut SplitMix64) -> f32 {
    2.0 * unit(rng) - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_deterministic_with_the_requested_shape() {
        let a = load(13).unwrap();
        assert_eq!(a, load(13).unwrap());
        assert_eq!((a.channels, a.classes, a.resolution), (3, 10, 13));
        assert_eq!(a.train.labels.len(), TRAIN);
        assert_eq!(a.test.labels.len(), TEST);
        assert_eq!(a.train.images.len(), TRAIN * 3 * 13 * 13);
        assert_eq!(a.test.images.len(), TEST * 3 * 13 * 13);
        assert_ne!(a.train.images[..507], a.train.images[507..1014]);
    }

    #[test]
    fn classes_are_roughly_balanced() {
        let ds = load(4).unwrap();
        for labels in [&ds.train.labels, &ds.test.labels] {
            let expected = labels.len() / CLASSES;
            for class in 0..CLASSES as i64 {
                let n = labels.iter().filter(|&&l| l == class).count();
                assert!(
                    n > expected * 2 / 3 && n < expected * 4 / 3,
                    "class {class}: {n}"
                );
            }
        }
    }

    /// Classes must differ: a nearest-mean-colour classifier fit on train
    /// should be far above chance on test.
    #[test]
    fn classes_are_separable() {
        let side = 16;
        let ds = load(side as u32).unwrap();
        let colour = |image: &[u8]| -> Vec<f64> {
            image
                .chunks_exact(side * side)
                .map(|plane| plane.iter().map(|&v| f64::from(v)).sum::<f64>() / plane.len() as f64)
                .collect()
        };
        let mut centroids = vec![vec![0.0; CHANNELS]; CLASSES];
        let mut counts = vec![0.0; CLASSES];
        for (image, &label) in ds
            .train
            .images
            .chunks_exact(3 * side * side)
            .zip(&ds.train.labels)
        {
            for (sum, value) in centroids[label as usize].iter_mut().zip(colour(image)) {
                *sum += value;
            }
            counts[label as usize] += 1.0;
        }
        for (centroid, count) in centroids.iter_mut().zip(&counts) {
            centroid.iter_mut().for_each(|v| *v /= count);
        }
        let nearest = |c: &[f64]| {
            let distance =
                |k: &Vec<f64>| k.iter().zip(c).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
            (0..CLASSES)
                .min_by(|&a, &b| distance(&centroids[a]).total_cmp(&distance(&centroids[b])))
        };
        let correct = ds
            .test
            .images
            .chunks_exact(3 * side * side)
            .zip(&ds.test.labels)
            .filter(|(image, label)| nearest(&colour(image)) == Some(**label as usize))
            .count();
        assert!(correct * 2 > TEST, "{correct}/{TEST} correct");
    }
}
