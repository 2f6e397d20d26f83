//! The `cudnn` backend against the `aten` backend on one GPU, operation by operation through a training step of
//! ResNet-50 from the same weights and batch: every value an operation writes, every gradient, and every parameter
//! and running statistic after the update. Run by `make gpu-test` (with TF32 off, `NVIDIA_TF32_OVERRIDE=0`, so
//! that both compute in full f32); a failure names the first operation that differs. Also the cudnn level's own
//! operations, timed on the device for the operator breakdown.

use tch::nn::{self};
use tch::{Device, Kind, Tensor};

use super::aten_matches_libtorch::relative_difference;
use super::model::ResNet;
use crate::cudnn::aten::AtenNet;
use crate::cudnn::native::CudnnNet;
use crate::cudnn::plan::Plan;
use crate::cudnn::program::{BufferKind, Program};
use crate::cudnn::weights;
use golow_protocol::config::{Model, Optimiser};

/// How far the cudnn backend's values are from aten's, relative to aten's largest magnitude.
fn off_by(actual: Vec<f32>, expected: &Tensor) -> f64 {
    let expected = expected.to_device(Device::Cpu).flatten(0, -1);
    assert_eq!(actual.len() as i64, expected.size()[0]);
    relative_difference(&Tensor::from_slice(&actual), &expected)
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
    let mut cudnn = CudnnNet::new(plan.clone(), &loaded, Optimiser::default(), 0).unwrap();

    tch::manual_seed(11);
    let size = [batch, channels, resolution, resolution].map(|d| d as i64);
    let images = Tensor::randn(size, (Kind::Float, gpu));
    let targets = Tensor::randint(classes as i64, [batch as i64], (Kind::Int64, gpu));
    let program = Program::train(&plan);
    aten.start_training(&images);
    cudnn.start_training(images.data_ptr() as u64).unwrap();
    for (index, op) in program.ops.iter().enumerate() {
        aten.run_training_op(index, &targets);
        cudnn
            .run_training_op(index, targets.data_ptr() as u64)
            .unwrap_or_else(|e| panic!("op {index} {op:?}: {e}"));
        for buf in op.writes() {
            // Max-pool indices are aten's alone: cuDNN's pooling gradient reads the input and output instead.
            if matches!(program.buffers[buf.0], BufferKind::Indices(_)) {
                continue;
            }
            let difference = off_by(
                cudnn.training_buffer(buf).unwrap(),
                &aten.buffer(buf).expect("aten wrote it"),
            );
            assert!(
                difference <= 1e-3,
                "op {index} {op:?}: buffer {} differs by {difference:.2e} of its largest value",
                buf.0
            );
        }
    }
    for p in &plan.params {
        if p.trainable {
            let difference = off_by(
                cudnn.gradient(&p.name).unwrap().unwrap(),
                &aten.gradient(&p.name).unwrap(),
            );
            assert!(
                difference <= 1e-3,
                "gradient of {}: {difference:.2e}",
                p.name
            );
        }
        let difference = off_by(
            cudnn.parameter(&p.name).unwrap().unwrap(),
            &aten.parameter(&p.name).unwrap(),
        );
        assert!(
            difference <= 1e-4,
            "{} after the update: {difference:.2e}",
            p.name
        );
    }
}

/// The level's own operations, timed on the device during a profiled step: every one of the step's, each named once
/// per kind, and together no longer than the step took.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_profiled_step_times_each_operation_on_the_device() {
    let (channels, classes, batch, resolution) = (3, 10, 8, 64);
    let (plan, loaded) = resnet50(channels, classes, batch, resolution);
    let mut cudnn = CudnnNet::new(plan.clone(), &loaded, Optimiser::default(), 0).unwrap();
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
