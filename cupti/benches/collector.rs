//! The CUPTI collector's own work, without a GPU: what it does with each record CUPTI hands it and with each window,
//! at libtorch's training rate (ResNet-50 at batch 32 on an H100: about 1,340 kernel launches a step, some 500 of
//! them tch's per-parameter SGD, and a few copies, at about 40 steps a second).
//!
//! One window's records are laid out in the collector's 256 KiB buffers as CUPTI lays them out: each record of a
//! kind takes the bytes CUPTI's own `cuptiActivityGetNextRecord` steps by (found by asking it, from the venv's
//! libcupti, which reads buffers without a driver), with the leading fields of CUDA 13's `CUpti_ActivityKernel10`,
//! `CUpti_ActivityMemcpy5` and `CUpti_ActivityMemset4`. Then, per window, as the collector's thread does: every buffer
//! is read through libcupti into the aggregator (decoding, display names, per-name and per-shape tallies, busy
//! intervals), the window before it is cut (it is sent once its successor has passed) and encoded as the message
//! the monitor receives. Apart, the launching thread's part: taking a buffer from the pool and, once read, putting
//! it back. `GOLOW_BENCH_WINDOWS` (default 30) windows; medians and ranges.

#[path = "../../benches/common/mod.rs"]
mod common;

use std::ffi::CString;
use std::path::PathBuf;
use std::time::Instant;

use cudarc::cupti::sys::{
    CUpti_ActivityKernel10, CUpti_ActivityKind, CUpti_ActivityMemcpy5, CUpti_ActivityMemset4,
};
use golow_cupti::bench::{Aggregator, Api, Filled, MAX_KERNEL_NAMES, Pool, fold};
use golow_protocol::collector::Message;

use common::{env_or, median, spread};

const BUFFER_BYTES: usize = 256 << 10;
const STEPS_PER_WINDOW: u64 = 40;
const KERNELS_PER_STEP: usize = 1_340;
/// The batch's upload and two memsets (the gradients' and the loss's).
const COPIES_PER_STEP: usize = 1;
const MEMSETS_PER_STEP: usize = 2;
/// Distinct kernels in a ResNet-50 training step: convolutions' and batch norms' forward and backward, elementwise
/// kernels of each operation, reductions and the optimiser's.
const DISTINCT_KERNELS: usize = 160;
const WINDOW_NS: u64 = 1_000_000_000;
const STEP_NS: u64 = WINDOW_NS / STEPS_PER_WINDOW;

const KIND_KERNEL: u32 = CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32;
const KIND_MEMCPY: u32 = CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY as u32;
const KIND_MEMSET: u32 = CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET as u32;

/// The venv's libcupti (torch's CUDA wheels, as `make build` installs them).
fn venv_cupti() -> PathBuf {
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/lib");
    std::fs::read_dir(&lib)
        .expect("the venv of `make build`")
        .filter_map(Result::ok)
        .map(|python| {
            python
                .path()
                .join("site-packages/nvidia/cu13/lib/libcupti.so.13")
        })
        .find(|p| p.is_file())
        .expect("the venv has CUDA 13's libcupti")
}

/// The bytes CUPTI steps over for one record of `kind`: the least 8-byte multiple it reads a lone record of in.
fn record_bytes(api: &Api, kind: u32) -> usize {
    let mut slot = vec![0u64; 128];
    slot[0] = u64::from(kind);
    (8..1024)
        .step_by(8)
        .find(|&valid| {
            let mut found = 0;
            // SAFETY: a zeroed 1 KiB buffer whose first record is of `kind`.
            unsafe { api.for_each_record(slot.as_mut_ptr().cast(), valid, |_| found += 1) };
            found == 1
        })
        .expect("CUPTI reads a record of each kind the collector enables")
}

/// Mangled names shaped like libtorch's (templated, with argument lists), demangled by the collector as CUPTI's are.
fn kernel_names() -> Vec<CString> {
    (0..DISTINCT_KERNELS)
        .map(|i| {
            let name = match i % 4 {
                0 => format!(
                    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEESt5arrayIPcLm{i}EEEEviT0_T1_"
                ),
                1 => format!(
                    "_ZN7cutlass6KernelI{i}cutlass_80_tensorop_s1688gemm_128x128_32x3_nhwc_alignEEvNT_6ParamsE"
                ),
                2 => format!(
                    "_ZN5cudnn17bn_bw_1C11_kernel{i}IffLi512ELb1ELi1EEEv17cudnnTensorStructPKT0_S3_PS1_S5_S5_S5_"
                ),
                _ => format!(
                    "_ZN2at6native{}reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7SumOpsIffEEjfLi4EEEEEvT1_",
                    i + 10
                ),
            };
            CString::new(name).expect("no NUL")
        })
        .collect()
}

/// Buffers filled one record after another, as CUPTI fills them: a record that does not fit starts the next buffer.
struct Packer<'a> {
    buffers: &'a mut [Vec<u8>],
    used: Vec<usize>,
    current: usize,
}

impl Packer<'_> {
    /// Writes `record` into the next `bytes` (CUPTI's size for its kind, at least `T`'s).
    fn put<T>(&mut self, bytes: usize, record: &T) {
        assert!(bytes >= size_of::<T>());
        if self.used[self.current] + bytes > BUFFER_BYTES {
            self.current += 1;
        }
        let at = self.used[self.current];
        self.used[self.current] += bytes;
        let slot = &mut self.buffers[self.current][at..at + bytes];
        // SAFETY: a whole `T` copied into a slot at least as long; records are read unaligned.
        unsafe {
            slot.as_mut_ptr()
                .cast::<T>()
                .write_unaligned(std::ptr::read(record))
        };
    }
}

struct Layout {
    kernel: usize,
    memcpy: usize,
    memset: usize,
}

/// One window's records starting at `t0`, packed into buffers as CUPTI fills them; returns the bytes used in each.
fn fill(buffers: &mut [Vec<u8>], layout: &Layout, names: &[CString], t0: u64) -> Vec<usize> {
    let mut packer = Packer {
        used: vec![0; buffers.len()],
        buffers,
        current: 0,
    };
    let kernel_ns = STEP_NS * 9 / 10 / KERNELS_PER_STEP as u64;
    for step in 0..STEPS_PER_WINDOW {
        let mut t = t0 + step * STEP_NS;
        for _ in 0..COPIES_PER_STEP {
            packer.put(layout.memcpy, &copy_record(t, 19_267_584));
        }
        t += 400_000;
        for m in 0..MEMSETS_PER_STEP {
            packer.put(layout.memset, &memset_record(t + m as u64 * 3_000));
        }
        for k in 0..KERNELS_PER_STEP {
            let name = &names[(k * 7) % names.len()];
            let start = t + k as u64 * kernel_ns;
            packer.put(
                layout.kernel,
                &kernel_record(name, start, start + kernel_ns - 500, k),
            );
        }
    }
    packer.used
}

fn kernel_record(name: &CString, start: u64, end: u64, k: usize) -> CUpti_ActivityKernel10 {
    let mut raw = std::mem::MaybeUninit::<CUpti_ActivityKernel10>::zeroed();
    let p = raw.as_mut_ptr();
    let grid = [64, 128, 256, 1024][k % 4];
    // SAFETY: fields of a zeroed record written through raw pointers; zero is a valid value of every field.
    unsafe {
        std::ptr::addr_of_mut!((*p).kind)
            .write(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        std::ptr::addr_of_mut!((*p).registersPerThread).write(32);
        std::ptr::addr_of_mut!((*p).start).write(start);
        std::ptr::addr_of_mut!((*p).end).write(end);
        std::ptr::addr_of_mut!((*p).streamId).write(7);
        std::ptr::addr_of_mut!((*p).gridX).write(grid);
        std::ptr::addr_of_mut!((*p).gridY).write(1);
        std::ptr::addr_of_mut!((*p).gridZ).write(1);
        std::ptr::addr_of_mut!((*p).blockX).write(128);
        std::ptr::addr_of_mut!((*p).blockY).write(1);
        std::ptr::addr_of_mut!((*p).blockZ).write(1);
        std::ptr::addr_of_mut!((*p).name).write(name.as_ptr());
        raw.assume_init()
    }
}

fn copy_record(start: u64, bytes: u64) -> CUpti_ActivityMemcpy5 {
    let mut raw = std::mem::MaybeUninit::<CUpti_ActivityMemcpy5>::zeroed();
    let p = raw.as_mut_ptr();
    // SAFETY: as for kernels.
    unsafe {
        std::ptr::addr_of_mut!((*p).kind).write(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY);
        std::ptr::addr_of_mut!((*p).copyKind).write(1);
        std::ptr::addr_of_mut!((*p).srcKind).write(2);
        std::ptr::addr_of_mut!((*p).dstKind).write(3);
        std::ptr::addr_of_mut!((*p).bytes).write(bytes);
        std::ptr::addr_of_mut!((*p).start).write(start);
        std::ptr::addr_of_mut!((*p).end).write(start + 390_000);
        std::ptr::addr_of_mut!((*p).streamId).write(13);
        raw.assume_init()
    }
}

fn memset_record(start: u64) -> CUpti_ActivityMemset4 {
    let mut raw = std::mem::MaybeUninit::<CUpti_ActivityMemset4>::zeroed();
    let p = raw.as_mut_ptr();
    // SAFETY: as for kernels.
    unsafe {
        std::ptr::addr_of_mut!((*p).kind).write(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET);
        std::ptr::addr_of_mut!((*p).bytes).write(4 << 20);
        std::ptr::addr_of_mut!((*p).start).write(start);
        std::ptr::addr_of_mut!((*p).end).write(start + 2_000);
        std::ptr::addr_of_mut!((*p).streamId).write(7);
        std::ptr::addr_of_mut!((*p).memoryKind).write(3);
        raw.assume_init()
    }
}

fn summary(values: &mut [f64], unit: &str, decimals: usize) -> String {
    let m = median(values);
    let (lo, hi) = spread(values);
    format!("{m:.decimals$} {unit} ({lo:.decimals$}–{hi:.decimals$})")
}

/// Nanoseconds a lend and a give-back take, the lender's and the collector's sides of one buffer's trip.
fn lending(rounds: usize) -> (f64, f64) {
    let pool = Pool::new(BUFFER_BYTES, 64);
    pool.resize(48);
    let mut filled = Vec::with_capacity(pool.max_buffers());
    let mut lent = Vec::with_capacity(48);
    let (mut lend_ns, mut back_ns) = (0u128, 0u128);
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..45 {
            lent.push(pool.take(4, || {}).expect("a ready buffer"));
        }
        lend_ns += t.elapsed().as_nanos();
        let t = Instant::now();
        for buffer in lent.drain(..) {
            pool.complete(Filled { buffer, valid: 0 });
        }
        pool.take_filled(&mut filled);
        for f in filled.drain(..) {
            pool.give_back(f.buffer);
        }
        back_ns += t.elapsed().as_nanos();
    }
    let per = (rounds * 45) as f64;
    (lend_ns as f64 / per, back_ns as f64 / per)
}

fn main() {
    let windows: usize = env_or("GOLOW_BENCH_WINDOWS", 30);
    // SAFETY: set before any other thread runs.
    unsafe { std::env::set_var(golow_protocol::collector::LIBRARY_ENV, venv_cupti()) };
    let api = Api::load().expect("libcupti loads");
    let layout = Layout {
        kernel: record_bytes(&api, KIND_KERNEL),
        memcpy: record_bytes(&api, KIND_MEMCPY),
        memset: record_bytes(&api, KIND_MEMSET),
    };
    assert!(layout.kernel >= size_of::<CUpti_ActivityKernel10>());
    let names = kernel_names();
    let records_per_window =
        STEPS_PER_WINDOW as usize * (KERNELS_PER_STEP + COPIES_PER_STEP + MEMSETS_PER_STEP);
    let bytes_per_window = STEPS_PER_WINDOW as usize
        * (KERNELS_PER_STEP * layout.kernel
            + COPIES_PER_STEP * layout.memcpy
            + MEMSETS_PER_STEP * layout.memset);
    let mut buffers = vec![vec![0u8; BUFFER_BYTES]; bytes_per_window.div_ceil(BUFFER_BYTES) + 1];
    let mut aggregator = Aggregator::new(WINDOW_NS, MAX_KERNEL_NAMES);
    let (mut read_ms, mut cut_ms, mut encode_ms, mut per_record_ns) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut message_bytes = 0;
    let t0 = 1_000_000_000_000u64;
    // One window to warm the display-name cache, as a running collector has; then the measured ones.
    for w in 0..=windows {
        let start = t0 + w as u64 * WINDOW_NS;
        let used = fill(&mut buffers, &layout, &names, start);
        let mut seen = 0;
        for (buffer, &valid) in buffers.iter_mut().zip(&used) {
            // SAFETY: `valid` bytes of records laid out as CUPTI lays them out.
            unsafe { api.for_each_record(buffer.as_mut_ptr(), valid, |_| seen += 1) };
        }
        assert_eq!(seen, records_per_window, "CUPTI reads every record");
        let read = Instant::now();
        for (buffer, &valid) in buffers.iter_mut().zip(&used) {
            // SAFETY: as above.
            unsafe { fold(&api, &mut aggregator, buffer.as_mut_ptr(), valid) };
        }
        let read = read.elapsed();
        if w == 0 {
            continue;
        }
        let cut = Instant::now();
        let window = aggregator.cut(start);
        let cut = cut.elapsed();
        let encode = Instant::now();
        let message = serde_json::to_vec(&Message::Kernels(window)).expect("encodes");
        let encode = encode.elapsed();
        message_bytes = message.len();
        read_ms.push(read.as_secs_f64() * 1e3);
        cut_ms.push(cut.as_secs_f64() * 1e3);
        encode_ms.push(encode.as_secs_f64() * 1e3);
        per_record_ns.push(read.as_nanos() as f64 / records_per_window as f64);
    }
    let mut total_ms: Vec<f64> = (0..windows)
        .map(|i| read_ms[i] + cut_ms[i] + encode_ms[i])
        .collect();
    let mut share: Vec<f64> = total_ms
        .iter()
        .map(|ms| ms / (WINDOW_NS as f64 / 1e6) * 100.0)
        .collect();
    let (lend_ns, back_ns) = lending(2_000);
    let buffers_per_window = bytes_per_window.div_ceil(BUFFER_BYTES);
    println!(
        "The collector's own work at libtorch's training rate: {KERNELS_PER_STEP} kernel launches, {COPIES_PER_STEP} \
         copy and {MEMSETS_PER_STEP} memsets a step, {STEPS_PER_WINDOW} steps a second, {DISTINCT_KERNELS} distinct \
         kernels; {windows} windows of 1 s"
    );
    println!(
        "  records as CUPTI lays them out: kernels {} bytes, copies {}, memsets {}; {records_per_window} records, \
         {:.1} MB, {buffers_per_window} buffers of 256 KiB a window",
        layout.kernel,
        layout.memcpy,
        layout.memset,
        bytes_per_window as f64 / 1e6
    );
    println!(
        "  reading a record (libcupti's walk, decoding, display name, tallies, busy intervals): {}",
        summary(&mut per_record_ns, "ns", 1)
    );
    println!(
        "  a window: reading its records {}, cutting it {}, encoding it ({message_bytes} bytes) {}",
        summary(&mut read_ms, "ms", 2),
        summary(&mut cut_ms, "ms", 3),
        summary(&mut encode_ms, "ms", 3)
    );
    println!(
        "  in all {} a window, {} of one core, on the collector's thread",
        summary(&mut total_ms, "ms", 2),
        summary(&mut share, "%", 2)
    );
    println!(
        "  the launching thread's part, lending a buffer from the pool: {lend_ns:.0} ns a buffer, {:.1} µs a window \
         ({buffers_per_window} buffers); the collector's, putting it back: {back_ns:.0} ns a buffer",
        lend_ns * buffers_per_window as f64 / 1e3
    );
}
