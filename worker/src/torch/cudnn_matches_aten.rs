//! The `cudnn` backend against the `aten` backend on one GPU, operation by operation through a training step of
//! ResNet-50 from the same weights and batch, each operation given aten's inputs: every value an operation writes,
//! every gradient, and every parameter and running statistic after the update. Run by `make gpu-test` (with TF32
//! off, `NVIDIA_TF32_OVERRIDE=0`, so that both compute in full f32); a failure lists every difference, the first
//! first. Also the cudnn level's own operations, timed on the device for the operator breakdown.

use tch::nn::{self};
use tch::{Device, Kind, Tensor};

use super::aten_matches_libtorch::relative_difference;
use super::model::ResNet;
use crate::cudnn::aten::AtenNet;
use crate::cudnn::native::CudnnNet;
use crate::cudnn::plan::Plan;
use crate::cudnn::program::{Buf, BufferKind, Op, Program};
use crate::cudnn::weights;
use golow_protocol::config::{GpuPolicy, Model, Optimiser};

/// A tensor's values on the host, flat.
fn host_values(tensor: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(tensor.to_device(Device::Cpu).flatten(0, -1)).expect("an f32 tensor")
}

/// How far the cudnn backend's values are from aten's, relative to aten's largest magnitude; an error when the two
/// hold different numbers of values.
fn off_by(actual: Vec<f32>, expected: &Tensor) -> Result<f64, String> {
    let expected = expected.to_device(Device::Cpu).flatten(0, -1);
    if actual.len() as i64 != expected.size()[0] {
        return Err(format!(
            "{} values against aten's {}",
            actual.len(),
            expected.size()[0]
        ));
    }
    Ok(relative_difference(&Tensor::from_slice(&actual), &expected))
}

/// How far the cudnn level's values of a parameter (or its gradient) are from aten's, or why they cannot be compared.
fn compare(
    actual: Result<Option<Vec<f32>>, String>,
    expected: Option<Tensor>,
) -> Result<f64, String> {
    match (actual, expected) {
        (Ok(Some(actual)), Some(expected)) => off_by(actual, &expected),
        (actual, expected) => Err(format!(
            "cudnn's {:?} values, aten's present: {}",
            actual.map(|a| a.map(|v| v.len())),
            expected.is_some()
        )),
    }
}

/// Every comparison that failed, in the order made, so that one run on a GPU reports them all and names the first.
#[derive(Default)]
struct Differences(Vec<String>);

impl Differences {
    /// Notes `what` when its difference is over `limit` (NaN is), or when it could not be compared at all.
    fn check(
        &mut self,
        what: impl FnOnce() -> String,
        difference: Result<f64, String>,
        limit: f64,
    ) {
        match difference {
            Ok(d) if d <= limit => {}
            Ok(d) => self.0.push(format!(
                "{}: differs by {d:.2e} (limit {limit:.0e})",
                what()
            )),
            Err(e) => self.0.push(format!("{}: {e}", what())),
        }
    }

    fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} differences, the first: {}\n{}",
            self.0.len(),
            self.0[0],
            self.0.join("\n")
        );
    }
}

/// ResNet-50's plan for a batch, and seeded initial weights in its layout, as the session writes and reads them.
fn resnet50(
    channels: usize,
    classes: usize,
    batch: usize,
    resolution: usize,
) -> (Plan, weights::Weights) {
    let model = Model::Resnet50;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weights.safetensors");
    tch::manual_seed(7);
    let init = nn::VarStore::new(Device::Cpu);
    let _ = ResNet::new(&init.root(), model, channels as i64, classes as i64);
    init.save(&path).unwrap();
    let plan = Plan::new(model, channels, classes, batch, resolution).unwrap();
    let loaded = weights::load(&path, &plan).unwrap();
    (plan, loaded)
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cudnn_follows_aten_op_by_op_on_the_gpu() {
    let (channels, classes, batch, resolution) = (3, 10, 8, 64);
    let (plan, loaded) = resnet50(channels, classes, batch, resolution);
    let gpu = Device::Cuda(0);
    let mut aten = AtenNet::new(plan.clone(), &loaded, Optimiser::default(), gpu);
    // Full f32 in both, for libtorch's kernels and the cudnn level's own, whatever the environment says.
    let policy = GpuPolicy {
        cudnn_benchmark: true,
        tf32: false,
    };
    super::apply_gpu_policy(policy).unwrap();
    let mut cudnn = CudnnNet::new(plan.clone(), &loaded, Optimiser::default(), policy, 0).unwrap();

    tch::manual_seed(11);
    let size = [batch, channels, resolution, resolution].map(|d| d as i64);
    let images = Tensor::randn(size, (Kind::Float, gpu));
    let targets = Tensor::randint(classes as i64, [batch as i64], (Kind::Int64, gpu));
    let program = Program::train(&plan);
    aten.start_training(&images);
    cudnn.start_training(images.data_ptr() as u64).unwrap();
    let mut differences = Differences::default();
    for (index, op) in program.ops.iter().enumerate() {
        // Each operation is checked on aten's inputs, not on the cudnn level's own: rounding apart, the two pass a
        // ReLU's mask over a value near zero differently now and then, and every operation after would differ for
        // that one value (a first run on an H200 saw 407 differences flow from one ReLU backward this way). The
        // twenty-step comparison of losses (tests/gpu.rs) checks how far the two drift when each runs its own.
        let inputs: Vec<(Buf, Option<Vec<f32>>)> = op
            .reads()
            .into_iter()
            .filter(|buf| !matches!(program.buffers[buf.0], BufferKind::Indices(_)))
            .map(|buf| (buf, aten.buffer(buf).map(|t| host_values(&t))))
            .collect();
        aten.run_training_op(index, &targets);
        for (buf, values) in inputs {
            let given = match values {
                Some(values) => cudnn.set_training_buffer(buf, &values),
                None => Err("aten has no value for it".to_string()),
            };
            if let Err(e) = given {
                differences
                    .0
                    .push(format!("op {index} {op:?}: input buffer {}: {e}", buf.0));
            }
        }
        if let Err(e) = cudnn.run_training_op(index, targets.data_ptr() as u64) {
            differences.0.push(format!("op {index} {op:?} failed: {e}"));
            break;
        }
        // The max pool's gradient is not compared: where a window holds equal values (all zeros after the stem's
        // ReLU) cuDNN and aten may route the gradient to different ones of them. The ReLU backward that follows
        // zeroes those positions and is compared. Max-pool indices are aten's alone: cuDNN's pooling gradient
        // reads the input and output instead.
        if matches!(op, Op::MaxPoolBackward { .. }) {
            continue;
        }
        for buf in op.writes() {
            if matches!(program.buffers[buf.0], BufferKind::Indices(_)) {
                continue;
            }
            let difference = match (cudnn.training_buffer(buf), aten.buffer(buf)) {
                (Ok(actual), Some(expected)) => off_by(actual, &expected),
                (Err(e), _) => Err(format!("cudnn's buffer unreadable: {e}")),
                (_, None) => Err("aten wrote no such buffer".to_string()),
            };
            differences.check(
                || format!("op {index} {op:?}, buffer {}", buf.0),
                difference,
                1e-3,
            );
        }
    }
    for p in &plan.params {
        if p.trainable {
            let difference = compare(cudnn.gradient(&p.name), aten.gradient(&p.name));
            differences.check(|| format!("gradient of {}", p.name), difference, 1e-3);
        }
        let difference = compare(cudnn.parameter(&p.name), aten.parameter(&p.name));
        differences.check(|| format!("{} after the update", p.name), difference, 1e-4);
    }
    differences.assert_none();
}

/// The level's own operations, timed on the device during a profiled step: every one of the step's, each named once
/// per kind, and together no longer than the step took.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_profiled_step_times_each_operation_on_the_device() {
    let (channels, classes, batch, resolution) = (3, 10, 8, 64);
    let (plan, loaded) = resnet50(channels, classes, batch, resolution);
    let mut cudnn = CudnnNet::new(
        plan.clone(),
        &loaded,
        Optimiser::default(),
        GpuPolicy::default(),
        0,
    )
    .unwrap();
    let gpu = Device::Cuda(0);
    let size = [batch, channels, resolution, resolution].map(|d| d as i64);
    let images = Tensor::randn(size, (Kind::Float, gpu));
    let targets = Tensor::randint(classes as i64, [batch as i64], (Kind::Int64, gpu));
    let step = |net: &mut CudnnNet| {
        net.train_step(images.data_ptr() as u64, targets.data_ptr() as u64)
            .unwrap();
        tch::Cuda::synchronize(0);
    };
    step(&mut cudnn);
    assert!(cudnn.take_operations().is_empty(), "nothing timed unasked");
    cudnn.time_operations(true);
    let began = std::time::Instant::now();
    step(&mut cudnn);
    let wall_ns = began.elapsed().as_nanos() as u64;
    cudnn.time_operations(false);
    let timed = cudnn.take_operations();
    let calls: u64 = timed.iter().map(|t| t.1).sum();
    assert_eq!(calls as usize, Program::train(&plan).ops.len(), "{timed:?}");
    let conv = timed
        .iter()
        .find(|t| t.0 == "aten::cudnn_convolution")
        .unwrap();
    assert_eq!(conv.1, 53);
    let device_ns: u64 = timed.iter().map(|t| t.2).sum();
    assert!(
        device_ns > 0 && device_ns <= wall_ns,
        "{device_ns} ns on the device in a step of {wall_ns} ns: {timed:?}"
    );
    step(&mut cudnn);
    assert!(cudnn.take_operations().is_empty(), "timing stopped");
}
