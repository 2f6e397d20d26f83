use tch::Tensor;
use tch::nn::init::{FanInOut, NonLinearity, NormalOrUniform};
use tch::nn::{self, ModuleT};

use golow_protocol::config::Model;

/// torchvision's initialisation: Kaiming normal, fan-out, for every convolution.
const CONV_INIT: nn::Init = nn::Init::Kaiming {
    dist: NormalOrUniform::Normal,
    fan: FanInOut::FanOut,
    non_linearity: NonLinearity::ReLU,
};

fn conv(p: nn::Path, c_in: i64, c_out: i64, kernel: i64, stride: i64) -> nn::Conv2D {
    let config = nn::ConvConfig {
        stride,
        padding: kernel / 2,
        bias: false,
        ws_init: CONV_INIT,
        ..Default::default()
    };
    nn::conv2d(p, c_in, c_out, kernel, config)
}

fn batch_norm(p: nn::Path, channels: i64) -> nn::BatchNorm {
    let config = nn::BatchNormConfig {
        ws_init: nn::Init::Const(1.0),
        bs_init: nn::Init::Const(0.0),
        ..Default::default()
    };
    nn::batch_norm2d(p, channels, config)
}

/// A residual block: convolutions with batch norm and ReLU between them, plus the shortcut.
#[derive(Debug)]
struct Block {
    convs: Vec<(nn::Conv2D, nn::BatchNorm)>,
    downsample: Option<(nn::Conv2D, nn::BatchNorm)>,
}

impl Block {
    /// `kernels` lists each convolution's kernel and output width; `strided` is the one that carries the stride.
    fn new(p: &nn::Path, c_in: i64, kernels: &[(i64, i64)], strided: usize, stride: i64) -> Block {
        let mut convs = Vec::with_capacity(kernels.len());
        let mut width = c_in;
        for (i, &(kernel, c_out)) in kernels.iter().enumerate() {
            let s = if i == strided { stride } else { 1 };
            let name = format!("conv{}", i + 1);
            let bn = format!("bn{}", i + 1);
            convs.push((
                conv(p / name, width, c_out, kernel, s),
                batch_norm(p / bn, c_out),
            ));
            width = c_out;
        }
        let downsample = (stride != 1 || c_in != width).then(|| {
            let d = p / "downsample";
            (
                conv(&d / 0, c_in, width, 1, stride),
                batch_norm(&d / 1, width),
            )
        });
        Block { convs, downsample }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let last = self.convs.len() - 1;
        let mut out = xs.shallow_clone();
        for (i, (conv, bn)) in self.convs.iter().enumerate() {
            out = out.apply(conv).apply_t(bn, train);
            if i < last {
                out = out.relu();
            }
        }
        let identity = match &self.downsample {
            Some((conv, bn)) => xs.apply(conv).apply_t(bn, train),
            None => xs.shallow_clone(),
        };
        (out + identity).relu()
    }
}

#[derive(Debug)]
pub struct ResNet {
    conv1: nn::Conv2D,
    bn1: nn::BatchNorm,
    layers: Vec<Vec<Block>>,
    fc: nn::Linear,
}

impl ResNet {
    pub fn new(p: &nn::Path, model: Model, channels: i64, classes: i64) -> ResNet {
        let (depths, bottleneck) = match model {
            Model::Resnet50 => ([3, 4, 6, 3], true),
            Model::Resnet18 => ([2, 2, 2, 2], false),
        };
        let expansion = if bottleneck { 4 } else { 1 };
        let mut c_in = 64;
        let mut layers = Vec::with_capacity(4);
        for (i, depth) in depths.into_iter().enumerate() {
            let width = 64 << i;
            let layer_path = p / format!("layer{}", i + 1);
            let blocks = (0..depth)
                .map(|b| {
                    let stride = if i > 0 && b == 0 { 2 } else { 1 };
                    let block_path = &layer_path / b;
                    let block = if bottleneck {
                        let kernels = [(1, width), (3, width), (1, width * expansion)];
                        Block::new(&block_path, c_in, &kernels, 1, stride)
                    } else {
                        Block::new(&block_path, c_in, &[(3, width), (3, width)], 0, stride)
                    };
                    c_in = width * expansion;
                    block
                })
                .collect();
            layers.push(blocks);
        }
        ResNet {
            conv1: conv(p / "conv1", channels, 64, 7, 2),
            bn1: batch_norm(p / "bn1", 64),
            layers,
            fc: nn::linear(p / "fc", c_in, classes, Default::default()),
        }
    }
}

impl ModuleT for ResNet {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = xs
            .apply(&self.conv1)
            .apply_t(&self.bn1, train)
            .relu()
            .max_pool2d([3, 3], [2, 2], [1, 1], [1, 1], false);
        for block in self.layers.iter().flatten() {
            x = block.forward_t(&x, train);
        }
        x.adaptive_avg_pool2d([1, 1]).flatten(1, -1).apply(&self.fc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    fn parameter_count(model: Model) -> (usize, i64) {
        let vs = nn::VarStore::new(Device::Cpu);
        let _ = ResNet::new(&vs.root(), model, 3, 1000);
        let trainable: i64 = vs
            .trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum();
        (vs.variables().len(), trainable)
    }

    #[test]
    fn parameter_counts_match_torchvision() {
        // torchvision: resnet50 has 25,557,032 parameters, resnet18 11,689,512.
        assert_eq!(parameter_count(Model::Resnet50).1, 25_557_032);
        assert_eq!(parameter_count(Model::Resnet18).1, 11_689_512);
    }

    #[test]
    fn names_follow_torchvision() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _ = ResNet::new(&vs.root(), Model::Resnet50, 3, 10);
        let vars = vs.variables();
        for name in [
            "conv1.weight",
            "bn1.running_var",
            "layer1.0.downsample.0.weight",
            "layer4.2.conv3.weight",
            "layer3.5.bn2.bias",
            "fc.bias",
        ] {
            assert!(vars.contains_key(name), "missing {name}");
        }
        assert!(!vars.contains_key("layer1.1.downsample.0.weight"));
    }

    #[test]
    fn forward_gives_one_logit_row_per_sample() {
        let vs = nn::VarStore::new(Device::Cpu);
        let net = ResNet::new(&vs.root(), Model::Resnet18, 1, 7);
        let x = Tensor::zeros([2, 1, 28, 28], (Kind::Float, Device::Cpu));
        assert_eq!(net.forward_t(&x, true).size(), vec![2, 7]);
    }

    /// The cuDNN implementation's plan names, shapes and splits the parameters exactly as this model does, and
    /// reads the weights file this model writes (the one `golow-worker init-weights` writes) to the same values.
    #[test]
    fn the_cudnn_plan_lays_out_and_loads_this_model_s_weights() {
        use crate::cudnn::{plan::Plan, weights};
        for model in [Model::Resnet50, Model::Resnet18] {
            tch::manual_seed(3);
            let vs = nn::VarStore::new(Device::Cpu);
            let _ = ResNet::new(&vs.root(), model, 3, 10);
            let plan = Plan::new(model, 3, 10, 2, 64).unwrap();
            let vars = vs.variables();
            let trainable: Vec<Tensor> = vs.trainable_variables();
            assert_eq!(plan.params.len(), vars.len());
            for p in &plan.params {
                let t = &vars[&p.name];
                let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
                assert_eq!(shape, p.shape, "{}", p.name);
                let is_trainable = trainable.iter().any(|v| v.data_ptr() == t.data_ptr());
                assert_eq!(is_trainable, p.trainable, "{}", p.name);
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("weights.safetensors");
            vs.save(&path).unwrap();
            let loaded = weights::load(&path, &plan).unwrap();
            for name in [
                "conv1.weight",
                "layer2.0.downsample.0.weight",
                "fc.bias",
                "bn1.running_var",
            ] {
                let p = plan.params.iter().find(|p| p.name == name).unwrap();
                let buffer = if p.trainable {
                    &loaded.trainable
                } else {
                    &loaded.statistics
                };
                let expected = Vec::<f32>::try_from(vars[name].flatten(0, -1)).unwrap();
                assert_eq!(
                    &buffer[p.offset..p.offset + p.elements()],
                    expected.as_slice(),
                    "{name}"
                );
            }
        }
    }
}
