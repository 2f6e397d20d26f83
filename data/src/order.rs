//! The per-epoch sample order. The Python worker reimplements this exactly, so
//! any change here must be mirrored there.

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64: tiny, fast and trivially portable to Python.
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A Fisher-Yates shuffle of `0..n` driven by splitmix64 seeded from `seed` and `epoch`.
pub fn epoch_order(seed: u64, epoch: u64, n: usize) -> Vec<usize> {
    let mut rng = SplitMix64::new(seed.wrapping_add(epoch.wrapping_mul(GAMMA)));
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        // The modulo bias is part of the shared definition; both workers must keep it.
        let j = rng.next_u64() % (i as u64 + 1);
        order.swap(i, j as usize);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_values() {
        // From an independent Python implementation with 64-bit masking.
        assert_eq!(
            epoch_order(42, 0, 1000)[..8],
            [650, 152, 78, 670, 854, 316, 525, 677]
        );
        assert_eq!(
            epoch_order(42, 1, 1000)[..8],
            [909, 38, 522, 828, 145, 52, 177, 147]
        );
    }

    #[test]
    fn is_a_permutation() {
        for n in [0, 1, 2, 1000] {
            let mut order = epoch_order(7, 3, n);
            order.sort_unstable();
            assert_eq!(order, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn epochs_differ() {
        assert_ne!(epoch_order(1, 0, 100), epoch_order(1, 1, 100));
    }
}
