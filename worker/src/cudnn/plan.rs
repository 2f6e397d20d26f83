//! The shape plan of the raw cuDNN ResNet: every convolution, batch norm and pooling with its input and output
//! shapes for one batch size and resolution, and every tensor of the weights file in one contiguous layout. It is
//! worked out once, before any device memory is touched, so that activations and workspaces are allocated once and
//! a resolution the network cannot take is refused with a reason.

use golow_protocol::config::Model;

/// N, C, H, W.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Shape {
    pub fn elements(&self) -> usize {
        self.n * self.c * self.h * self.w
    }
}

/// A convolution without bias (its batch norm follows), as torchvision's ResNet has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv {
    /// The weight's name without `.weight`, e.g. `layer1.0.conv2` or `layer2.0.downsample.0`.
    pub name: String,
    /// The batch norm after it, e.g. `layer1.0.bn2` or `layer2.0.downsample.1`.
    pub batch_norm: String,
    pub kernel: usize,
    pub stride: usize,
    pub pad: usize,
    pub input: Shape,
    pub output: Shape,
}

/// A residual block: its convolutions in order (ReLU after each but the last), the shortcut's, and the sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub convs: Vec<Conv>,
    pub downsample: Option<Conv>,
    pub output: Shape,
}

/// Where one tensor of the weights file lives in the parameter buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub shape: Vec<usize>,
    /// In f32 elements from the start of its buffer (trainable parameters and running statistics have one each).
    pub offset: usize,
    pub trainable: bool,
}

impl Param {
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub input: Shape,
    pub stem: Conv,
    /// After the 3×3, stride-2 max pool.
    pub pooled: Shape,
    pub blocks: Vec<Block>,
    pub features: usize,
    pub classes: usize,
    /// Trainable parameters first (one buffer, so that one SGD kernel updates them all), then running statistics.
    pub params: Vec<Param>,
    pub trainable_elements: usize,
    pub statistics_elements: usize,
}

fn conv_output(input: usize, kernel: usize, stride: usize, pad: usize) -> Option<usize> {
    (input + 2 * pad)
        .checked_sub(kernel)
        .map(|span| span / stride + 1)
}

struct Builder {
    params: Vec<Param>,
    trainable: usize,
    statistics: usize,
}

impl Builder {
    fn param(&mut self, name: String, shape: Vec<usize>, trainable: bool) {
        let elements: usize = shape.iter().product();
        let counter = if trainable {
            &mut self.trainable
        } else {
            &mut self.statistics
        };
        self.params.push(Param {
            name,
            shape,
            offset: *counter,
            trainable,
        });
        *counter += elements;
    }

    fn conv(
        &mut self,
        name: String,
        batch_norm: String,
        input: Shape,
        c_out: usize,
        kernel: usize,
        stride: usize,
    ) -> Result<Conv, String> {
        let pad = kernel / 2;
        let size = |x| conv_output(x, kernel, stride, pad).filter(|&s| s > 0);
        let (Some(h), Some(w)) = (size(input.h), size(input.w)) else {
            return Err(format!(
                "{name} ({kernel}×{kernel}, stride {stride}) gets a {}×{} input, too small for it",
                input.h, input.w
            ));
        };
        self.param(
            format!("{name}.weight"),
            vec![c_out, input.c, kernel, kernel],
            true,
        );
        self.param(format!("{batch_norm}.weight"), vec![c_out], true);
        self.param(format!("{batch_norm}.bias"), vec![c_out], true);
        self.param(format!("{batch_norm}.running_mean"), vec![c_out], false);
        self.param(format!("{batch_norm}.running_var"), vec![c_out], false);
        Ok(Conv {
            name,
            batch_norm,
            kernel,
            stride,
            pad,
            input,
            output: Shape {
                n: input.n,
                c: c_out,
                h,
                w,
            },
        })
    }
}

impl Plan {
    /// The plan for `model` with `channels` input channels and `classes` outputs at this batch size and resolution.
    pub fn new(
        model: Model,
        channels: usize,
        classes: usize,
        batch: usize,
        resolution: usize,
    ) -> Result<Plan, String> {
        let (depths, bottleneck) = match model {
            Model::Resnet50 => ([3, 4, 6, 3], true),
            Model::Resnet18 => ([2, 2, 2, 2], false),
        };
        let expansion = if bottleneck { 4 } else { 1 };
        let mut b = Builder {
            params: Vec::new(),
            trainable: 0,
            statistics: 0,
        };
        let input = Shape {
            n: batch,
            c: channels,
            h: resolution,
            w: resolution,
        };
        let stem = b.conv("conv1".into(), "bn1".into(), input, 64, 7, 2)?;
        let pool = |x| conv_output(x, 3, 2, 1).unwrap_or(0);
        let pooled = Shape {
            h: pool(stem.output.h),
            w: pool(stem.output.w),
            ..stem.output
        };
        let mut x = pooled;
        let mut blocks = Vec::new();
        for (layer, depth) in depths.into_iter().enumerate() {
            let width = 64 << layer;
            for index in 0..depth {
                let stride = if layer > 0 && index == 0 { 2 } else { 1 };
                let prefix = format!("layer{}.{index}", layer + 1);
                let kernels: &[(usize, usize)] = if bottleneck {
                    &[(1, width), (3, width), (1, width * expansion)]
                } else {
                    &[(3, width), (3, width)]
                };
                let strided = usize::from(bottleneck);
                let block_input = x;
                let mut convs = Vec::new();
                for (i, &(kernel, c_out)) in kernels.iter().enumerate() {
                    let s = if i == strided { stride } else { 1 };
                    let conv = b.conv(
                        format!("{prefix}.conv{}", i + 1),
                        format!("{prefix}.bn{}", i + 1),
                        x,
                        c_out,
                        kernel,
                        s,
                    )?;
                    x = conv.output;
                    convs.push(conv);
                }
                let downsample = (stride != 1 || block_input.c != x.c)
                    .then(|| {
                        b.conv(
                            format!("{prefix}.downsample.0"),
                            format!("{prefix}.downsample.1"),
                            block_input,
                            x.c,
                            1,
                            stride,
                        )
                    })
                    .transpose()?;
                blocks.push(Block {
                    convs,
                    downsample,
                    output: x,
                });
            }
        }
        let features = x.c;
        b.param("fc.weight".into(), vec![classes, features], true);
        b.param("fc.bias".into(), vec![classes], true);
        Ok(Plan {
            input,
            stem,
            pooled,
            blocks,
            features,
            classes,
            params: b.params,
            trainable_elements: b.trainable,
            statistics_elements: b.statistics,
        })
    }

    /// The same network for another batch size (the last, partial batch of a pass over a split).
    pub fn with_batch(&self, n: usize) -> Plan {
        let mut plan = self.clone();
        let resize = |s: &mut Shape| s.n = n;
        resize(&mut plan.input);
        resize(&mut plan.pooled);
        for conv in std::iter::once(&mut plan.stem).chain(
            plan.blocks
                .iter_mut()
                .flat_map(|b| b.convs.iter_mut().chain(b.downsample.as_mut())),
        ) {
            resize(&mut conv.input);
            resize(&mut conv.output);
        }
        for block in &mut plan.blocks {
            resize(&mut block.output);
        }
        plan
    }

    pub fn convs(&self) -> impl Iterator<Item = &Conv> {
        std::iter::once(&self.stem).chain(
            self.blocks
                .iter()
                .flat_map(|b| b.convs.iter().chain(b.downsample.as_ref())),
        )
    }

    /// Bytes of the activations a training step keeps for the backward pass: every convolution's output and its
    /// batch-normalised copy, the pooled stem, and the logits.
    pub fn activation_bytes(&self) -> usize {
        let convs: usize = self.convs().map(|c| 2 * c.output.elements()).sum();
        4 * (convs + self.pooled.elements() + self.input.n * self.classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_match_torchvision() {
        let count = |model| {
            Plan::new(model, 3, 1000, 1, 224)
                .unwrap()
                .trainable_elements
        };
        assert_eq!(count(Model::Resnet50), 25_557_032);
        assert_eq!(count(Model::Resnet18), 11_689_512);
    }

    #[test]
    fn shapes_shrink_as_torchvision_s_do() {
        let plan = Plan::new(Model::Resnet50, 3, 10, 32, 224).unwrap();
        assert_eq!((plan.stem.output.h, plan.pooled.h), (112, 56));
        let last = plan.blocks.last().unwrap().output;
        assert_eq!(
            last,
            Shape {
                n: 32,
                c: 2048,
                h: 7,
                w: 7
            }
        );
        assert_eq!(plan.blocks.len(), 16);
        assert_eq!(plan.convs().count(), 53);
        // CIFAR-sized input ends at one pixel, as torchvision's model does.
        let small = Plan::new(Model::Resnet18, 3, 10, 8, 32).unwrap();
        assert_eq!(
            (small.blocks.last().unwrap().output.h, small.features),
            (1, 512)
        );
    }

    #[test]
    fn the_layout_is_contiguous_trainable_first_and_named_like_torchvision() {
        let plan = Plan::new(Model::Resnet50, 3, 10, 1, 64).unwrap();
        let mut next = (0, 0);
        for p in &plan.params {
            let counter = if p.trainable {
                &mut next.0
            } else {
                &mut next.1
            };
            assert_eq!(p.offset, *counter, "{}", p.name);
            *counter += p.elements();
        }
        assert_eq!(next, (plan.trainable_elements, plan.statistics_elements));
        // Names against torchvision's: the libtorch model's test compares every one (golow-worker's tests).
        let names: Vec<&str> = plan.params.iter().map(|p| p.name.as_str()).collect();
        assert!(names.contains(&"layer1.0.downsample.0.weight"));
        assert!(!names.contains(&"layer1.1.downsample.0.weight"));
        let fc = plan.params.iter().find(|p| p.name == "fc.weight").unwrap();
        assert_eq!(fc.shape, [10, 2048]);
    }

    #[test]
    fn another_batch_size_changes_only_the_batch() {
        let plan = Plan::new(Model::Resnet50, 3, 10, 16, 32).unwrap();
        assert_eq!(
            plan.with_batch(5),
            Plan::new(Model::Resnet50, 3, 10, 5, 32).unwrap()
        );
    }

    #[test]
    fn a_resolution_too_small_is_refused_with_where() {
        let why = Plan::new(Model::Resnet50, 3, 10, 1, 0).unwrap_err();
        assert!(why.contains("conv1") && why.contains("too small"), "{why}");
        assert!(Plan::new(Model::Resnet18, 1, 10, 4, 28).is_ok());
    }

    #[test]
    fn a_training_step_s_activations_grow_with_the_batch() {
        let a = Plan::new(Model::Resnet50, 3, 1000, 32, 224).unwrap();
        let b = Plan::new(Model::Resnet50, 3, 1000, 64, 224).unwrap();
        assert_eq!(2 * a.activation_bytes(), b.activation_bytes());
        // Convolution outputs and their normalised copies alone: about 2.7 GiB at batch 32, 224 px (some 11 million
        // floats per image per copy), below the 4–6 GiB frameworks hold with gradients and workspaces.
        assert!(
            (2 << 30..4 << 30).contains(&a.activation_bytes()),
            "{}",
            a.activation_bytes()
        );
    }
}
