//! What cuDNN and cuBLAS do not do, as CUDA C compiled at run time by NVRTC: the softmax cross-entropy and its
//! gradient, the spreading of the global average pool's gradient, and the SGD update fused over the whole
//! contiguous parameter buffer. NVRTC needs no GPU, so the compilation is tested on any machine.

use cudarc::nvrtc::{self, CompileOptions, Ptx};

/// The kernels of the source below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    CrossEntropyPerSample,
    MeanOf,
    CrossEntropyGrad,
    SpreadMean,
    Sgd,
}

impl Kernel {
    /// Every kernel; a kernel's position here is its `as usize`.
    pub const ALL: [Kernel; 5] = [
        Kernel::CrossEntropyPerSample,
        Kernel::MeanOf,
        Kernel::CrossEntropyGrad,
        Kernel::SpreadMean,
        Kernel::Sgd,
    ];

    /// Its entry point's name in the source.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::CrossEntropyPerSample => "cross_entropy_per_sample",
            Kernel::MeanOf => "mean_of",
            Kernel::CrossEntropyGrad => "cross_entropy_grad",
            Kernel::SpreadMean => "spread_mean",
            Kernel::Sgd => "sgd",
        }
    }
}

/// Threads per block of the per-sample kernels (a power of two: their reductions halve it).
pub const SAMPLE_THREADS: u32 = 256;

const SOURCE: &str = r#"
#define SAMPLE_THREADS 256
#define NEG_INFINITY __int_as_float(0xff800000)
#define QUIET_NAN __int_as_float(0x7fffffff)

// Max and sum over a block of SAMPLE_THREADS threads, in shared memory.
__device__ float block_max(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = SAMPLE_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
        __syncthreads();
    }
    float r = scratch[0];
    __syncthreads();
    return r;
}

__device__ float block_sum(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = SAMPLE_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    float r = scratch[0];
    __syncthreads();
    return r;
}

// The row's maximum and log of the sum of exp(x - max): log softmax(x)[k] = x[k] - max - log_sum.
__device__ void log_sum_exp(const float* row, int classes, float* scratch, float* max_out, float* log_sum_out) {
    float m = NEG_INFINITY;
    for (int k = threadIdx.x; k < classes; k += SAMPLE_THREADS) m = fmaxf(m, row[k]);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int k = threadIdx.x; k < classes; k += SAMPLE_THREADS) s += expf(row[k] - m);
    s = block_sum(s, scratch);
    *max_out = m;
    *log_sum_out = logf(s);
}

// One block per sample: losses[i] = -log softmax(logits[i])[targets[i]] (NaN for a target out of range).
extern "C" __global__ void cross_entropy_per_sample(const float* logits, const long long* targets, int classes,
                                                    float* losses) {
    __shared__ float scratch[SAMPLE_THREADS];
    const float* row = logits + (size_t)blockIdx.x * classes;
    float m, log_sum;
    log_sum_exp(row, classes, scratch, &m, &log_sum);
    if (threadIdx.x == 0) {
        long long t = targets[blockIdx.x];
        losses[blockIdx.x] = (t < 0 || t >= classes) ? QUIET_NAN : -(row[t] - m - log_sum);
    }
}

// out[0] = the mean of values[0..n], summed in order by one thread (n is a batch size).
extern "C" __global__ void mean_of(const float* values, int n, float* out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < n; ++i) s += values[i];
        out[0] = s / n;
    }
}

// One block per sample: grad[i] = (softmax(logits[i]) - one_hot(targets[i])) / n, the mean loss's gradient.
extern "C" __global__ void cross_entropy_grad(const float* logits, const long long* targets, int classes, int n,
                                              float* grad) {
    __shared__ float scratch[SAMPLE_THREADS];
    const float* row = logits + (size_t)blockIdx.x * classes;
    float* g = grad + (size_t)blockIdx.x * classes;
    float m, log_sum;
    log_sum_exp(row, classes, scratch, &m, &log_sum);
    long long t = targets[blockIdx.x];
    for (int k = threadIdx.x; k < classes; k += SAMPLE_THREADS) {
        float p = expf(row[k] - m - log_sum);
        g[k] = (p - (k == t ? 1.0f : 0.0f)) / n;
    }
}

// The global average pool's backward: every pixel of a channel gets that channel's gradient / pixels.
extern "C" __global__ void spread_mean(const float* grad_output, float* grad_input, int pixels, long long total) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        grad_input[i] = grad_output[i / pixels] / pixels;
    }
}

// torch.optim.SGD (dampening 0, not Nesterov) over the flat parameter buffer: d = g + wd * p; the momentum buffer
// starts as d, then b = m * b + d; p -= lr * b.
extern "C" __global__ void sgd(float* params, const float* grads, float* momentum_buffer, long long count, float lr,
                               float momentum, float weight_decay, int first) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        float d = grads[i] + weight_decay * params[i];
        float b = first ? d : momentum * momentum_buffer[i] + d;
        momentum_buffer[i] = b;
        params[i] -= lr * b;
    }
}
"#;

/// NVRTC's architecture name for a GPU of compute capability `major.minor`: the device's own where NVRTC knows
/// it, else PTX for the oldest architecture this CUDA supports, which the driver compiles for any newer GPU.
pub fn architecture(major: i32, minor: i32) -> &'static str {
    match (major, minor) {
        (7, 5) => "sm_75",
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (12, 0) => "sm_120",
        _ => "compute_75",
    }
}

/// The kernels as PTX for `arch`; NVRTC's log on failure.
pub fn compile(arch: &'static str) -> Result<String, String> {
    super::libraries::preload(super::libraries::NVRTC)?;
    let ptx = nvrtc::compile_ptx_with_opts(
        SOURCE,
        CompileOptions {
            arch: Some(arch),
            // IEEE division and square roots, no flush of denormals: as close to libtorch's kernels as C gets.
            prec_div: Some(true),
            prec_sqrt: Some(true),
            ftz: Some(false),
            name: Some("golow_kernels.cu".into()),
            ..Default::default()
        },
    )
    .map_err(|e| format!("NVRTC could not compile golow's kernels for {arch}: {e:?}"))?;
    Ok(Ptx::to_src(&ptx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_compile_to_ptx_for_the_h100_with_every_entry_point() {
        let ptx = compile(architecture(9, 0)).unwrap();
        assert!(
            ptx.contains(".target sm_90"),
            "{}",
            &ptx[..ptx.len().min(400)]
        );
        for (index, kernel) in Kernel::ALL.into_iter().enumerate() {
            assert_eq!(kernel as usize, index);
            let entry = kernel.name();
            assert!(
                ptx.contains(&format!(".entry {entry}(")),
                "no entry point {entry}"
            );
        }
    }

    #[test]
    fn an_unknown_gpu_gets_ptx_the_driver_can_compile_forward() {
        assert_eq!(architecture(9, 0), "sm_90");
        let ptx = compile(architecture(99, 9)).unwrap();
        assert!(ptx.contains(".target sm_75"));
    }
}
