//! The framework-free program on libtorch's kernels (`aten`) against the same model trained by libtorch's autograd
//! and optimiser (`libtorch`), from one weights file and the same batches: losses, every gradient, the running
//! statistics and evaluation. What holds here for the program holds for the `cudnn` backend's program too.

use tch::nn::{self, ModuleT, OptimizerConfig};
use tch::{Device, Kind, Tensor};

use super::model::ResNet;
use crate::cudnn::aten::AtenNet;
use crate::cudnn::plan::Plan;
use crate::cudnn::weights;
use golow_protocol::config::{Model, Optimiser};

struct Case {
    model: Model,
    channels: i64,
    classes: i64,
    batch: i64,
    resolution: i64,
}

/// The largest difference between two tensors relative to the largest magnitude of the expected one.
pub(super) fn relative_difference(actual: &Tensor, expected: &Tensor) -> f64 {
    let scale = expected.abs().max().double_value(&[]).max(1e-30);
    (actual - expected).abs().max().double_value(&[]) / scale
}

fn check(case: &Case, steps: usize) {
    let Case {
        model,
        channels,
        classes,
        batch,
        resolution,
    } = *case;
    let label = format!("{model:?} {channels}ch batch {batch} {resolution}px");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weights.safetensors");
    tch::manual_seed(7);
    let init = nn::VarStore::new(Device::Cpu);
    let _ = ResNet::new(&init.root(), model, channels, classes);
    init.save(&path).unwrap();

    let mut vs = nn::VarStore::new(Device::Cpu);
    let reference = ResNet::new(&vs.root(), model, channels, classes);
    vs.load(&path).unwrap();
    let optimiser = Optimiser::default();
    let mut sgd = nn::Sgd {
        momentum: optimiser.momentum,
        dampening: 0.0,
        wd: optimiser.weight_decay,
        nesterov: false,
    }
    .build(&vs, optimiser.lr)
    .unwrap();

    let plan = Plan::new(
        model,
        channels as usize,
        classes as usize,
        batch as usize,
        resolution as usize,
    )
    .unwrap();
    let loaded = weights::load(&path, &plan).unwrap();
    let mut aten = AtenNet::new(plan.clone(), &loaded, optimiser, Device::Cpu);

    tch::manual_seed(11);
    let batches: Vec<(Tensor, Tensor)> = (0..steps)
        .map(|_| {
            (
                Tensor::randn(
                    [batch, channels, resolution, resolution],
                    (Kind::Float, Device::Cpu),
                ),
                Tensor::randint(classes, [batch], (Kind::Int64, Device::Cpu)),
            )
        })
        .collect();
    let variables = vs.variables();
    for (step, (images, targets)) in batches.iter().enumerate() {
        let logits = reference.forward_t(images, true);
        let loss = logits.cross_entropy_for_logits(targets);
        sgd.zero_grad();
        loss.backward();
        let (aten_loss, aten_logits) = aten.train_step(images, targets);
        let (expected, actual) = (loss.double_value(&[]), aten_loss.double_value(&[]));
        assert!(
            ((actual - expected) / expected).abs() <= 1e-5,
            "{label}, step {step}: loss {actual} vs libtorch's {expected}"
        );
        assert!(
            relative_difference(&aten_logits, &logits) <= 1e-5,
            "{label}, step {step}: logits"
        );
        for p in plan.params.iter().filter(|p| p.trainable) {
            let reference_grad = variables[&p.name].grad();
            let grad = aten.gradient(&p.name).unwrap();
            let difference = relative_difference(&grad, &reference_grad);
            assert!(
                difference <= 1e-4,
                "{label}, step {step}: gradient of {} differs by {difference:e}",
                p.name
            );
        }
        sgd.step();
    }
    for p in &plan.params {
        let difference =
            relative_difference(&aten.parameter(&p.name).unwrap(), &variables[&p.name]);
        assert!(
            difference <= 1e-4,
            "{label}: after {steps} steps {} differs by {difference:e}",
            p.name
        );
    }
    // Evaluation on running statistics, with the training batch size and a smaller, partial one.
    for n in [batch, batch / 2 + 1] {
        let (images, targets) = &batches[0];
        let images = images.narrow(0, 0, n);
        let targets = targets.narrow(0, 0, n);
        let logits = tch::no_grad(|| reference.forward_t(&images, false));
        let loss = logits.cross_entropy_for_logits(&targets).double_value(&[]);
        let (aten_loss, aten_logits) = aten.evaluate(&images, &targets);
        let aten_loss = aten_loss.double_value(&[]);
        assert!(
            ((aten_loss - loss) / loss).abs() <= 1e-5,
            "{label}: evaluation of {n}: loss {aten_loss} vs {loss}"
        );
        assert_eq!(
            Vec::<i64>::try_from(aten_logits.argmax(-1, false)).unwrap(),
            Vec::<i64>::try_from(logits.argmax(-1, false)).unwrap(),
            "{label}: evaluation of {n}: predictions"
        );
    }
}

#[test]
fn resnet18_on_one_channel_matches_libtorch_for_20_steps() {
    check(
        &Case {
            model: Model::Resnet18,
            channels: 1,
            classes: 10,
            batch: 6,
            resolution: 28,
        },
        20,
    );
}

#[test]
fn resnet50_on_three_channels_matches_libtorch_for_20_steps() {
    check(
        &Case {
            model: Model::Resnet50,
            channels: 3,
            classes: 10,
            batch: 4,
            resolution: 32,
        },
        20,
    );
}
