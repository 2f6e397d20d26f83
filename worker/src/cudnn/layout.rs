//! Where a step's buffers live in one device allocation (an arena): each buffer is placed by when it is live, its
//! first write to its last read (`Program::lifetimes`), not by its shape, so that two buffers that are never live
//! at once may share bytes. Placement is greedy by size, largest first, each at the lowest offset where it overlaps
//! no buffer already placed that is live at the same time (first fit). Worked out without a GPU, so that what a
//! step will hold is known, and tested, before any memory is touched.

use super::plan::Plan;
use super::program::{BufferKind, Lifetime, Program};

/// Every buffer starts on a boundary cuDNN's and cuBLAS's vectorised kernels take at full speed (cudaMalloc's own).
pub const ALIGNMENT: usize = 256;

/// Device bytes of a buffer: f32 tensors and per-channel values; max-pool indices take none (cuDNN's pooling
/// gradient reads the pooling's input and output instead).
pub fn device_bytes(kind: &BufferKind) -> usize {
    match kind {
        BufferKind::Tensor(s) => 4 * s.elements(),
        BufferKind::Indices(_) => 0,
        BufferKind::Channels(c) => 4 * c,
        BufferKind::Scalar => 4,
    }
}

/// A contiguous range of the arena, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub offset: usize,
    pub bytes: usize,
}

impl Region {
    fn end(&self) -> usize {
        self.offset + self.bytes.next_multiple_of(ALIGNMENT)
    }

    fn overlaps(&self, other: &Region) -> bool {
        self.offset < other.end() && other.offset < self.end()
    }
}

/// The arena of one step: each buffer's region, by `Buf` index, and the arena's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub regions: Vec<Region>,
    pub bytes: usize,
}

impl Layout {
    /// `program`'s buffers, sized as the cudnn backend stores them, placed by their lifetimes.
    pub fn of(program: &Program) -> Layout {
        let sizes: Vec<usize> = program.buffers.iter().map(device_bytes).collect();
        Layout::pack(&sizes, &program.lifetimes())
    }

    /// Buffers of `sizes` bytes, live over `lifetimes`, placed greedily, largest first, each at the lowest offset
    /// that overlaps no placed buffer live at the same time.
    pub fn pack(sizes: &[usize], lifetimes: &[Lifetime]) -> Layout {
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(sizes[i]), lifetimes[i].first, i));
        let mut regions = vec![
            Region {
                offset: 0,
                bytes: 0
            };
            sizes.len()
        ];
        let mut placed: Vec<usize> = Vec::with_capacity(sizes.len());
        let mut bytes = 0;
        for i in order {
            if sizes[i] == 0 {
                continue;
            }
            let mut neighbours: Vec<Region> = placed
                .iter()
                .filter(|&&j| lifetimes[j].overlaps(&lifetimes[i]) && sizes[j] > 0)
                .map(|&j| regions[j])
                .collect();
            neighbours.sort_by_key(|r| r.offset);
            let mut candidate = Region {
                offset: 0,
                bytes: sizes[i],
            };
            for r in &neighbours {
                if candidate.overlaps(r) {
                    candidate.offset = candidate.offset.max(r.end());
                }
            }
            regions[i] = candidate;
            bytes = bytes.max(candidate.end());
            placed.push(i);
        }
        Layout { regions, bytes }
    }

    /// The largest range of the arena outside `taken`: where a convolution's algorithm search may write scratch
    /// while its operands occupy `taken`.
    pub fn largest_free(&self, taken: &[Region]) -> Region {
        let mut taken = taken.to_vec();
        taken.sort_by_key(|r| r.offset);
        let mut best = Region {
            offset: 0,
            bytes: 0,
        };
        let mut start = 0;
        for r in taken.iter().chain(std::iter::once(&Region {
            offset: self.bytes,
            bytes: 0,
        })) {
            if r.offset > start && r.offset - start > best.bytes {
                best = Region {
                    offset: start,
                    bytes: r.offset - start,
                };
            }
            start = start.max(r.end());
        }
        best
    }
}

/// The most bytes `program`'s buffers hold at any one op: what any placement needs at least.
pub fn peak_live_bytes(program: &Program) -> usize {
    let lifetimes = program.lifetimes();
    (0..program.ops.len())
        .map(|op| {
            program
                .buffers
                .iter()
                .zip(&lifetimes)
                .filter(|(_, l)| l.first <= op && op <= l.last)
                .map(|(kind, _)| device_bytes(kind).next_multiple_of(ALIGNMENT))
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

/// What the cudnn backend holds on the device for a session's steps: the parameters and running statistics, the
/// gradients and SGD's momentum once it trains, and the one arena every step's buffers share (each step's
/// layout is placed in it; the largest decides its size). Convolution workspaces and the CUDA context are not
/// counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    pub parameters: usize,
    pub optimiser: usize,
    pub arena: usize,
}

impl Footprint {
    /// The footprint of running `programs` (each one's batch size, training or evaluation) on `plan`'s network.
    pub fn of(plan: &Plan, programs: &[&Program]) -> Footprint {
        let trainable = 4 * plan.trainable_elements;
        let trains = programs.iter().any(|p| p.train);
        Footprint {
            parameters: trainable + 4 * plan.statistics_elements,
            // Gradients and momentum, one of each per trainable value.
            optimiser: if trains { 2 * trainable } else { 0 },
            arena: programs
                .iter()
                .map(|p| Layout::of(p).bytes)
                .max()
                .unwrap_or(0),
        }
    }

    pub fn total(&self) -> usize {
        self.parameters + self.optimiser + self.arena
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cudnn::program::Buf;
    use golow_protocol::config::Model;

    fn resnet50(batch: usize) -> Plan {
        Plan::new(Model::Resnet50, 3, 1000, batch, 224).unwrap()
    }

    fn programs() -> Vec<Program> {
        [
            Plan::new(Model::Resnet18, 1, 10, 4, 28).unwrap(),
            Plan::new(Model::Resnet50, 3, 10, 2, 32).unwrap(),
            resnet50(32),
        ]
        .iter()
        .flat_map(|plan| [Program::train(plan), Program::eval(plan)])
        .collect()
    }

    /// Bytes of the largest activation (a tensor buffer) of `program`.
    fn largest_activation(program: &Program) -> usize {
        program
            .buffers
            .iter()
            .filter(|k| matches!(k, BufferKind::Tensor(_)))
            .map(device_bytes)
            .max()
            .unwrap()
    }

    /// What the buffers took when each was reused only by a later buffer of the identical shape (the plan before
    /// this layout): one allocation per buffer, taken from those of its kind whose value had been read for the
    /// last time, or new.
    fn reused_by_shape(program: &Program) -> usize {
        let lifetimes = program.lifetimes();
        let mut free: Vec<BufferKind> = Vec::new();
        let mut total = 0;
        for at in 0..program.ops.len() {
            for (b, kind) in program.buffers.iter().enumerate() {
                if lifetimes[b].first == at {
                    match free.iter().position(|k| k == kind) {
                        Some(i) => {
                            free.swap_remove(i);
                        }
                        None => total += device_bytes(kind),
                    }
                }
            }
            for b in &program.last_uses()[at] {
                free.push(program.buffers[b.0]);
            }
        }
        total
    }

    #[test]
    fn buffers_that_share_bytes_are_never_live_at_once() {
        for program in programs() {
            let layout = Layout::of(&program);
            let lifetimes = program.lifetimes();
            for (a, ra) in layout.regions.iter().enumerate() {
                assert!(ra.end() <= layout.bytes && ra.offset % ALIGNMENT == 0);
                assert_eq!(ra.bytes, device_bytes(&program.buffers[a]));
                for (b, rb) in layout.regions.iter().enumerate().skip(a + 1) {
                    if ra.bytes > 0 && rb.bytes > 0 && ra.overlaps(rb) {
                        assert!(
                            !lifetimes[a].overlaps(&lifetimes[b]),
                            "{:?} and {:?} share bytes while both live",
                            Buf(a),
                            Buf(b)
                        );
                    }
                }
            }
            // First fit wastes little over what is live at the busiest op.
            let peak = peak_live_bytes(&program);
            assert!(layout.bytes >= peak);
            assert!(
                layout.bytes as f64 <= 1.15 * peak as f64,
                "{} bytes for {peak} live",
                layout.bytes
            );
        }
    }

    #[test]
    fn the_largest_free_range_avoids_what_is_taken() {
        let layout = Layout {
            regions: Vec::new(),
            bytes: 10 * ALIGNMENT,
        };
        let at = |offset: usize, bytes: usize| Region {
            offset: offset * ALIGNMENT,
            bytes: bytes * ALIGNMENT,
        };
        assert_eq!(layout.largest_free(&[]), at(0, 10));
        assert_eq!(layout.largest_free(&[at(6, 2), at(1, 2)]), at(3, 3));
        assert_eq!(layout.largest_free(&[at(0, 3), at(2, 2)]), at(4, 6));
        assert_eq!(layout.largest_free(&[at(0, 10)]).bytes, 0);
    }

    /// ResNet-50 at 224 px, batch 32 and 128: what the cudnn level holds in evaluation alone is the parameters and
    /// an arena within 1.25× its two largest activations (a residual block's sum and the block input it keeps,
    /// plus the narrower middle ones); nothing for gradients or momentum. Against reuse by identical shape, with
    /// gradients and momentum always there, it is less than half (that plan held 6.4 GiB on an H200 at batch 128
    /// where libtorch held 2.6).
    #[test]
    fn evaluation_holds_the_weights_and_little_more_than_two_activations() {
        for batch in [32, 128] {
            let plan = resnet50(batch);
            let eval = Program::eval(&plan);
            let footprint = Footprint::of(&plan, &[&eval]);
            assert_eq!(footprint.optimiser, 0);
            let bound = footprint.parameters + (2.5 * largest_activation(&eval) as f64) as usize;
            assert!(
                footprint.total() <= bound,
                "batch {batch}: {footprint:?} over {bound}"
            );
            let before =
                footprint.parameters + 8 * plan.trainable_elements + reused_by_shape(&eval);
            assert!(
                2 * footprint.total() < before,
                "batch {batch}: {} against {before}",
                footprint.total()
            );
        }
    }

    /// In training the arena holds what the backward pass reads (the plan's activation estimate) and the first
    /// gradients, over the parameters, gradients and momentum; activations freed as the backward pass goes back
    /// hold the gradients of earlier layers.
    #[test]
    fn training_holds_the_saved_activations_and_the_gradients_in_their_place() {
        for batch in [32, 128] {
            let plan = resnet50(batch);
            let train = Program::train(&plan);
            let footprint = Footprint::of(&plan, &[&train, &Program::eval(&plan)]);
            assert_eq!(footprint.optimiser, 8 * plan.trainable_elements);
            let bound = footprint.parameters
                + footprint.optimiser
                + plan.activation_bytes()
                + 2 * largest_activation(&train);
            assert!(
                footprint.total() <= bound,
                "batch {batch}: {footprint:?} over {bound}"
            );
            let before = footprint.parameters + footprint.optimiser + reused_by_shape(&train);
            assert!(
                footprint.total() < before,
                "batch {batch}: {} against {before}",
                footprint.total()
            );
        }
    }
}
