//! How far a built-in level is from the hardware: the model's floating-point operations per sample, worked out from
//! its architecture at the session's image size, against the device's peak for the session's math (docs/summary-json.md).
//!
//! The convention: one multiply-add is two FLOPs. Convolutions and the classifier are counted; batch norm, ReLU,
//! pooling and the residual sums are not (under 1% of ResNet-50's operations), as published counts leave them out.
//! A `--cmd` script's model is its own and unknown to golow: it gets no count.

use golow_protocol::config::{Mode, Model, WorkerConfig};

/// Multiply-adds per sample of a model's forward pass, and of the convolution on its input (whose input gradient a
/// training step does not compute).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Macs {
    forward: f64,
    stem: f64,
}

/// A convolution's output side for an input side, as cuDNN and torch compute it; `None` when the input is too small.
fn conv_side(input: u64, kernel: u64, stride: u64) -> Option<u64> {
    let span = (input + 2 * (kernel / 2)).checked_sub(kernel)?;
    Some(span / stride + 1).filter(|&side| side > 0)
}

/// torchvision's ResNet as golow's workers build it (`worker/src/cudnn/plan.rs`): a 7×7 stride-2 stem, a 3×3
/// stride-2 max pool, four stages of basic (ResNet-18) or bottleneck (ResNet-50) blocks with the stride on the 3×3,
/// a 1×1 shortcut where the shape changes, a global average pool and the classifier.
fn resnet_macs(model: Model, channels: u64, classes: u64, resolution: u64) -> Option<Macs> {
    let (depths, bottleneck) = match model {
        Model::Resnet50 => ([3, 4, 6, 3], true),
        Model::Resnet18 => ([2, 2, 2, 2], false),
    };
    let conv = |c_in: u64, c_out: u64, kernel: u64, side: u64| {
        (c_out * c_in * kernel * kernel) as f64 * (side * side) as f64
    };
    let stem_side = conv_side(resolution, 7, 2)?;
    let stem = conv(channels, 64, 7, stem_side);
    let mut side = conv_side(stem_side, 3, 2)?;
    let mut c = 64;
    let mut forward = stem;
    for (stage, depth) in depths.into_iter().enumerate() {
        let width = 64 << stage;
        let c_out = if bottleneck { width * 4 } else { width };
        for block in 0..depth {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            let out = conv_side(side, 3, stride)?;
            forward += if bottleneck {
                conv(c, width, 1, side) + conv(width, width, 3, out) + conv(width, c_out, 1, out)
            } else {
                conv(c, width, 3, out) + conv(width, width, 3, out)
            };
            if stride != 1 || c != c_out {
                forward += conv(c, c_out, 1, out);
            }
            (side, c) = (out, c_out);
        }
    }
    forward += (c * classes) as f64;
    Some(Macs { forward, stem }).filter(|m| m.forward.is_finite())
}

/// What a step of a built-in level computes per sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelFlops {
    /// FLOPs (two per multiply-add) per sample of the step: the forward pass, or in training the forward pass and
    /// the backward pass's gradients of every layer's weights and of every input but the image's.
    pub per_sample: f64,
    /// The forward pass's alone.
    pub forward: f64,
    pub mode: Mode,
}

impl ModelFlops {
    /// The count for a worker's model, channels, classes and resolution; `None` for sizes the network cannot take
    /// or numbers too large to be a real session's.
    pub fn of(config: &WorkerConfig) -> Option<ModelFlops> {
        const MAX_SIDE: u32 = 1 << 16;
        if config.resolution > MAX_SIDE || config.channels > MAX_SIDE || config.classes > 1 << 24 {
            return None;
        }
        let macs = resnet_macs(
            config.model,
            config.channels.into(),
            config.classes.into(),
            config.resolution.into(),
        )?;
        // The backward pass does each layer's multiply-adds twice, once for its weights' gradient and once for its
        // input's, except the stem's input gradient: nothing needs the image's.
        let step_macs = match config.mode {
            Mode::Eval => macs.forward,
            Mode::Train => 3.0 * macs.forward - macs.stem,
        };
        Some(ModelFlops {
            per_sample: 2.0 * step_macs,
            forward: 2.0 * macs.forward,
            mode: config.mode,
        })
    }
}

/// The arithmetic a session's convolutions and matrix products run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Math {
    /// Full f32 on the CUDA cores (`--tf32 off`).
    Fp32,
    /// f32 data rounded to TF32 on the tensor cores (`--tf32 on`, the default).
    Tf32,
    /// Mixed precision on the tensor cores: not what golow's levels run, listed for the published anchors.
    Bf16,
}

impl Math {
    pub fn name(self) -> &'static str {
        match self {
            Math::Fp32 => "FP32",
            Math::Tf32 => "TF32",
            Math::Bf16 => "BF16/FP16",
        }
    }

    /// What every built-in level was told: TF32 on the tensor cores, or full f32.
    pub fn of_session(tf32: bool) -> Math {
        if tf32 { Math::Tf32 } else { Math::Fp32 }
    }
}

/// One GPU's dense peaks in TFLOP/s, from NVIDIA's datasheets. The datasheets give tensor-core figures "with
/// sparsity" (2:4 structured); a dense model gets half of those, which is what is listed here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DevicePeaks {
    pub device: &'static str,
    /// Words every one of which the NVML name must have, lower case, split at spaces and hyphens.
    words: &'static [&'static str],
    /// Words the name must not have (an H100 NVL is not an SXM part).
    unlike: &'static [&'static str],
    pub fp32: f64,
    pub tf32: f64,
    pub bf16: f64,
}

impl DevicePeaks {
    pub fn tflops(&self, math: Math) -> f64 {
        match math {
            Math::Fp32 => self.fp32,
            Math::Tf32 => self.tf32,
            Math::Bf16 => self.bf16,
        }
    }
}

/// The GPUs golow knows the peaks of, the more particular names first.
// Sources (dense figures; tensor-core "with sparsity" figures halved):
// - NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/
//   nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): FP32 19.5, TF32 156, BF16/FP16 312, alike for the 40 and
//   80 GB PCIe and SXM parts.
// - NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet):
//   H100 SXM FP32 67, TF32 989*, BF16 1,979*; H100 NVL FP32 60, TF32 835*, BF16 1,671*; H100 PCIe (the 2022
//   datasheet) FP32 51, TF32 756*, BF16 1,513* (* with sparsity).
// - NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/): H200 SXM FP32 67, TF32 989*,
//   BF16 1,979*; H200 NVL FP32 60, TF32 835*, BF16 1,671*.
// - NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/): FP32 30.3, TF32 120*, BF16 242*.
pub const DEVICES: &[DevicePeaks] = &[
    DevicePeaks {
        device: "H200 NVL",
        words: &["h200", "nvl"],
        unlike: &[],
        fp32: 60.0,
        tf32: 417.5,
        bf16: 835.5,
    },
    DevicePeaks {
        device: "H200 SXM",
        words: &["h200"],
        unlike: &["nvl"],
        fp32: 67.0,
        tf32: 494.5,
        bf16: 989.5,
    },
    DevicePeaks {
        device: "H100 NVL",
        words: &["h100", "nvl"],
        unlike: &[],
        fp32: 60.0,
        tf32: 417.5,
        bf16: 835.5,
    },
    DevicePeaks {
        device: "H100 PCIe",
        words: &["h100", "pcie"],
        unlike: &[],
        fp32: 51.0,
        tf32: 378.0,
        bf16: 756.5,
    },
    DevicePeaks {
        device: "H100 SXM",
        words: &["h100"],
        unlike: &["nvl", "pcie"],
        fp32: 67.0,
        tf32: 494.5,
        bf16: 989.5,
    },
    DevicePeaks {
        device: "A100 PCIe",
        words: &["a100", "pcie"],
        unlike: &[],
        fp32: 19.5,
        tf32: 156.0,
        bf16: 312.0,
    },
    DevicePeaks {
        device: "A100 SXM",
        words: &["a100"],
        unlike: &["pcie"],
        fp32: 19.5,
        tf32: 156.0,
        bf16: 312.0,
    },
    DevicePeaks {
        device: "L4",
        words: &["l4"],
        unlike: &[],
        fp32: 30.3,
        tf32: 60.0,
        bf16: 121.0,
    },
];

/// The peaks of a GPU by its NVML name (`NVIDIA H100 80GB HBM3`, `NVIDIA A100-SXM4-80GB`); `None` for one not in
/// the table, rather than a guess.
pub fn device_peaks(nvml_name: &str) -> Option<&'static DevicePeaks> {
    let name = nvml_name.to_ascii_lowercase();
    let words: Vec<&str> = name.split([' ', '-']).collect();
    let has = |w: &&str| words.contains(w);
    DEVICES
        .iter()
        .find(|d| d.words.iter().all(has) && !d.unlike.iter().any(has))
}

/// The CUDA device index of a torch device name (`cuda`, `cuda:1`); `None` on the CPU.
pub fn cuda_index(device: &str) -> Option<u32> {
    match device.strip_prefix("cuda")? {
        "" => Some(0),
        index => index.strip_prefix(':')?.parse().ok(),
    }
}

/// A built-in worker's achieved rate and its share of the device's peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Efficiency {
    pub model: ModelFlops,
    /// FLOPs per sample times samples per second (the worker's throughput: copy and compute), in TFLOP/s.
    pub achieved_tflops: Option<f64>,
    pub peak: Option<Peak>,
}

/// The device's peak for the session's math.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    pub device: &'static str,
    pub math: Math,
    pub tflops: f64,
}

impl Efficiency {
    /// A worker's figures from its hello (model, sizes, TF32, device), its throughput, and the NVML names of the
    /// machine's GPUs by index; `None` for a worker that sent no hello (a `--cmd` script).
    pub fn of(
        hello: Option<&golow_protocol::event::Hello>,
        samples_per_s: Option<f64>,
        gpu_name: impl Fn(u32) -> Option<String>,
    ) -> Option<Efficiency> {
        let config = &hello?.config;
        let model = ModelFlops::of(config)?;
        let math = Math::of_session(config.gpu_policy.tf32);
        let peak = cuda_index(&config.device)
            .and_then(gpu_name)
            .and_then(|name| device_peaks(&name))
            .map(|d| Peak {
                device: d.device,
                math,
                tflops: d.tflops(math),
            });
        Some(Efficiency {
            model,
            achieved_tflops: samples_per_s.map(|s| s * model.per_sample / 1e12),
            peak,
        })
    }

    /// A worker's figures in a state: its GPU's name as NVML gave it.
    pub fn of_worker(state: &super::State, worker: &super::WorkerState) -> Option<Efficiency> {
        let gpu_name = |index: u32| {
            let device = state.gpu.devices.iter().find(|d| d.index == index)?;
            Some(device.name.clone())
        };
        Efficiency::of(worker.hello.as_ref(), worker.throughput(), gpu_name)
    }

    /// The achieved rate over the peak.
    pub fn share_of_peak(&self) -> Option<f64> {
        Some(self.achieved_tflops? / self.peak?.tflops)
    }
}

/// Published ResNet-50 training rates per GPU, to set golow's beside (docs/summary-json.md).
pub const ANCHORS: &[(&str, f64)] = &[
    // MLPerf Training's ResNet-50 results on H100 systems (closed division): about 7,000 images/s per GPU, mixed
    // precision with DALI.
    ("MLPerf Training, H100, mixed precision, DALI", 7000.0),
    // NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5 README, "Training performance:
    // NVIDIA DGX A100 (8x A100 80GB)", 1 GPU, pytorch-21.03 NGC container.
    ("NVIDIA ResNet-50 v1.5 PyTorch, A100, TF32", 938.0),
    ("NVIDIA ResNet-50 v1.5 PyTorch, A100, AMP", 2470.0),
];

/// The protocol's sample hello, for tests of what a built-in worker's hello makes of its figures.
#[cfg(test)]
pub(crate) fn sample_hello() -> Box<golow_protocol::event::Hello> {
    golow_protocol::samples::every_body()
        .into_iter()
        .find_map(|b| match b {
            golow_protocol::event::Body::Hello(hello) => Some(hello),
            _ => None,
        })
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(model: Model, mode: Mode, resolution: u32, classes: u32) -> WorkerConfig {
        let hello = sample_hello();
        WorkerConfig {
            model,
            mode,
            resolution,
            classes,
            channels: 3,
            ..hello.config
        }
    }

    #[test]
    fn resnet50_at_224_px_is_4_09_billion_multiply_adds_forward() {
        let f = ModelFlops::of(&config(Model::Resnet50, Mode::Eval, 224, 1000)).unwrap();
        // torchvision's published 4.09 "GFLOPS" for ResNet-50 are multiply-adds: 8.18e9 FLOPs.
        assert!((f.forward / 2.0 - 4.09e9).abs() < 0.01e9, "{}", f.forward);
        assert_eq!(f.per_sample, f.forward);
        // ResNet-18's published 1.81 G multiply-adds.
        let r18 = ModelFlops::of(&config(Model::Resnet18, Mode::Eval, 224, 1000)).unwrap();
        assert!(
            (r18.forward / 2.0 - 1.81e9).abs() < 0.01e9,
            "{}",
            r18.forward
        );
    }

    #[test]
    fn a_training_step_is_about_three_forward_passes_less_the_images_gradient() {
        let f = ModelFlops::of(&config(Model::Resnet50, Mode::Train, 224, 1000)).unwrap();
        let times = f.per_sample / f.forward;
        assert!(times > 2.95 && times < 3.0, "{times}");
    }

    #[test]
    fn the_count_follows_the_resolution_and_refuses_what_the_network_cannot_take() {
        let at = |px| ModelFlops::of(&config(Model::Resnet50, Mode::Eval, px, 10));
        let (small, large) = (at(128).unwrap(), at(256).unwrap());
        let quarter = small.forward / large.forward;
        assert!(quarter > 0.24 && quarter < 0.26, "{quarter}");
        assert_eq!(at(0), None);
        assert_eq!(at(u32::MAX), None);
        assert!(
            at(1).is_some(),
            "one pixel survives every stride, as in torch"
        );
    }

    #[test]
    fn nvml_names_find_their_datasheet_row_and_strangers_find_none() {
        let row = |name| device_peaks(name).map(|d| d.device);
        assert_eq!(row("NVIDIA H200"), Some("H200 SXM"));
        assert_eq!(row("NVIDIA H200 NVL"), Some("H200 NVL"));
        assert_eq!(row("NVIDIA H100 80GB HBM3"), Some("H100 SXM"));
        assert_eq!(row("NVIDIA H100 PCIe"), Some("H100 PCIe"));
        assert_eq!(row("NVIDIA H100 NVL"), Some("H100 NVL"));
        assert_eq!(row("NVIDIA A100-SXM4-80GB"), Some("A100 SXM"));
        assert_eq!(row("NVIDIA A100-PCIE-40GB"), Some("A100 PCIe"));
        assert_eq!(row("NVIDIA A100 80GB PCIe"), Some("A100 PCIe"));
        assert_eq!(row("NVIDIA L4"), Some("L4"));
        assert_eq!(row("NVIDIA L40S"), None);
        assert_eq!(row("NVIDIA GH200 480GB"), None);
        assert_eq!(row("Tesla V100-SXM2-16GB"), None);
        let h100 = device_peaks("NVIDIA H100 80GB HBM3").unwrap();
        assert_eq!(
            [Math::Fp32, Math::Tf32, Math::Bf16].map(|m| h100.tflops(m)),
            [67.0, 494.5, 989.5]
        );
    }

    #[test]
    fn the_share_is_the_rate_over_the_peak_of_the_sessions_math_on_the_workers_gpu() {
        let mut hello = sample_hello();
        hello.config = WorkerConfig {
            device: "cuda:1".into(),
            ..config(Model::Resnet50, Mode::Eval, 224, 1000)
        };
        let names = |i: u32| (i == 1).then(|| "NVIDIA H200".to_string());
        let e = Efficiency::of(Some(&hello), Some(1000.0), names).unwrap();
        let achieved = e.achieved_tflops.unwrap();
        assert!((achieved - 8.18).abs() < 0.02, "{achieved}");
        assert_eq!(e.peak.unwrap().math, Math::Tf32);
        assert!((e.share_of_peak().unwrap() - achieved / 494.5).abs() < 1e-12);
        hello.config.gpu_policy.tf32 = false;
        let fp32 = Efficiency::of(Some(&hello), Some(1000.0), names).unwrap();
        assert_eq!(fp32.peak.unwrap().tflops, 67.0);
        hello.config.device = "cpu".into();
        let cpu = Efficiency::of(Some(&hello), Some(1000.0), names).unwrap();
        assert_eq!((cpu.peak, cpu.share_of_peak()), (None, None));
        assert_eq!(Efficiency::of(None, Some(1000.0), names), None);
    }

    #[test]
    fn torch_device_names_give_their_cuda_index() {
        assert_eq!(cuda_index("cuda"), Some(0));
        assert_eq!(cuda_index("cuda:3"), Some(3));
        assert_eq!(cuda_index("cpu"), None);
        assert_eq!(cuda_index("cudax"), None);
    }
}
