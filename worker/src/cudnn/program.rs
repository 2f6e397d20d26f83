//! The training and evaluation step of the framework-free ResNet as an explicit program: every forward operation,
//! the hand-written backward of each in reverse order (gradients added where the residual branches join), and the
//! SGD update. It is worked out once from the shape plan for one batch size. Each value it computes has a buffer of
//! its own (in-place operations write over their operand's); when each buffer is first written and last read is
//! `Program::lifetimes`, from which a backend frees a value after its last reader (`aten`) or lays the buffers out
//! in one allocation, overlapping those never live at once (`layout`, for `cudnn`). In evaluation batch norm
//! writes over its input, as nothing reads the convolution's output again.
//!
//! Two backends run the same program: `aten` (libtorch's CPU and CUDA kernels without autograd) and `cudnn`.

use super::plan::{Conv, Param, Plan, Shape};

/// A buffer of the program, an index into `Program::buffers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Buf(pub usize);

/// What a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferKind {
    /// f32, N×C×H×W (features are N×C×1×1, logits N×classes×1×1).
    Tensor(Shape),
    /// Where each max-pool output came from, one integer per output element.
    Indices(Shape),
    /// f32 per channel: a batch norm's batch mean or inverse standard deviation, kept for its backward pass.
    Channels(usize),
    /// The batch's mean loss, one f32.
    Scalar,
}

impl BufferKind {
    /// N×C×H×W of a tensor or of max-pool indices; `None` for per-channel values and the loss.
    pub fn shape(&self) -> Option<Shape> {
        match *self {
            BufferKind::Tensor(s) | BufferKind::Indices(s) => Some(s),
            BufferKind::Channels(_) | BufferKind::Scalar => None,
        }
    }
}

/// When a buffer is in use: from the op that first writes it to the op that last reads it, as indices into
/// `Program::ops` (the batch is loaded before the first op; the logits and loss are read after the last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    pub first: usize,
    pub last: usize,
}

impl Lifetime {
    pub fn overlaps(&self, other: &Lifetime) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// A convolution and the batch norm after it, with where their parameters live in the plan's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub conv: Conv,
    /// Offsets in the trainable buffer.
    pub weight: usize,
    pub scale: usize,
    pub shift: usize,
    /// Offsets in the statistics buffer.
    pub running_mean: usize,
    pub running_var: usize,
}

/// The fully connected layer: offsets of its weight (classes × features) and bias in the trainable buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub weight: usize,
    pub bias: usize,
    pub features: usize,
    pub classes: usize,
}

/// `layer` indexes `Program::layers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// output = conv(input).
    Conv {
        layer: usize,
        input: Buf,
        output: Buf,
    },
    /// output = batch norm(input): with `saved`, training mode (batch statistics, saved for the backward pass, and
    /// the running statistics updated); without, inference mode on the running statistics.
    BatchNorm {
        layer: usize,
        input: Buf,
        output: Buf,
        saved: Option<Saved>,
    },
    /// data = max(data, 0), in place.
    Relu { data: Buf },
    /// 3×3, stride 2, padding 1; `indices` where a training step needs them for the backward pass.
    MaxPool {
        input: Buf,
        output: Buf,
        indices: Option<Buf>,
    },
    /// data = max(data + shortcut, 0), in place: where a residual block's branches join.
    AddRelu { data: Buf, shortcut: Buf },
    /// output (N×C×1×1) = the mean of each channel of input.
    AvgPool { input: Buf, output: Buf },
    /// logits = features · weightᵀ + bias.
    Linear { input: Buf, output: Buf },
    /// loss = mean over the batch of −log softmax(logits)[target].
    Loss { logits: Buf, loss: Buf },
    /// grad = (softmax(logits) − one-hot(target)) / N.
    LossBackward { logits: Buf, grad: Buf },
    /// grad_input = grad_output · weight; the head's weight and bias gradients.
    LinearBackward {
        grad_output: Buf,
        input: Buf,
        grad_input: Buf,
    },
    /// grad_input = grad_output spread evenly over each channel's pixels.
    AvgPoolBackward { grad_output: Buf, grad_input: Buf },
    /// grad = grad where output > 0, else 0, in place (`output` is the ReLU's, which is positive where its input was).
    ReluBackward { grad: Buf, output: Buf },
    /// grad_input and the layer's scale and shift gradients from the batch statistics saved by the forward pass.
    BatchNormBackward {
        layer: usize,
        grad_output: Buf,
        input: Buf,
        saved: Saved,
        grad_input: Buf,
    },
    /// The layer's weight gradient, and the gradient with respect to its input when `grad_input` is given: written
    /// over it, or added to it (`accumulate`) where a residual block's two branches meet its input.
    ConvBackward {
        layer: usize,
        grad_output: Buf,
        input: Buf,
        grad_input: Option<Buf>,
        accumulate: bool,
    },
    MaxPoolBackward {
        grad_output: Buf,
        input: Buf,
        output: Buf,
        indices: Buf,
        grad_input: Buf,
    },
    /// into += from.
    Accumulate { into: Buf, from: Buf },
    /// SGD with momentum and weight decay over the whole trainable buffer, from the gradients written above.
    Sgd,
}

/// A training-mode batch norm's batch mean and inverse standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    pub mean: Buf,
    pub invstd: Buf,
}

/// What each op reads and writes: the buffers' lifetimes come from them.
impl Op {
    /// The buffers the op reads (in-place operands included).
    pub fn reads(&self) -> Vec<Buf> {
        match *self {
            Op::Conv { input, .. }
            | Op::AvgPool { input, .. }
            | Op::Linear { input, .. }
            | Op::MaxPool { input, .. }
            | Op::BatchNorm { input, .. } => vec![input],
            Op::Relu { data } => vec![data],
            Op::AddRelu { data, shortcut } => vec![data, shortcut],
            Op::Loss { logits, .. } | Op::LossBackward { logits, .. } => vec![logits],
            Op::LinearBackward {
                grad_output, input, ..
            } => vec![grad_output, input],
            Op::AvgPoolBackward { grad_output, .. } => vec![grad_output],
            Op::ReluBackward { grad, output } => vec![grad, output],
            Op::BatchNormBackward {
                grad_output,
                input,
                saved,
                ..
            } => vec![grad_output, input, saved.mean, saved.invstd],
            Op::ConvBackward {
                grad_output,
                input,
                grad_input,
                accumulate,
                ..
            } => {
                let mut reads = vec![grad_output, input];
                reads.extend(grad_input.filter(|_| accumulate));
                reads
            }
            Op::MaxPoolBackward {
                grad_output,
                input,
                output,
                indices,
                ..
            } => vec![grad_output, input, output, indices],
            Op::Accumulate { into, from } => vec![into, from],
            Op::Sgd => vec![],
        }
    }

    /// The buffers the op writes.
    pub fn writes(&self) -> Vec<Buf> {
        match *self {
            Op::Conv { output, .. } | Op::AvgPool { output, .. } | Op::Linear { output, .. } => {
                vec![output]
            }
            Op::BatchNorm { output, saved, .. } => {
                let mut writes = vec![output];
                writes.extend(saved.map(|s| [s.mean, s.invstd]).into_iter().flatten());
                writes
            }
            Op::MaxPool {
                output, indices, ..
            } => std::iter::once(output).chain(indices).collect(),
            Op::Relu { data } | Op::AddRelu { data, .. } => vec![data],
            Op::Loss { loss, .. } => vec![loss],
            Op::LossBackward { grad, .. } | Op::ReluBackward { grad, .. } => vec![grad],
            Op::LinearBackward { grad_input, .. }
            | Op::AvgPoolBackward { grad_input, .. }
            | Op::BatchNormBackward { grad_input, .. }
            | Op::MaxPoolBackward { grad_input, .. } => vec![grad_input],
            Op::ConvBackward { grad_input, .. } => grad_input.into_iter().collect(),
            Op::Accumulate { into, .. } => vec![into],
            Op::Sgd => vec![],
        }
    }
}

/// One step, training or evaluation, for one batch size.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub train: bool,
    pub input: Shape,
    pub layers: Vec<Layer>,
    pub head: Head,
    pub buffers: Vec<BufferKind>,
    pub ops: Vec<Op>,
    /// Where the batch goes (N×C×H×W) and where its logits and mean loss come out.
    pub images: Buf,
    pub logits: Buf,
    pub loss: Buf,
}

impl Program {
    /// N×C×H×W of a buffer the program uses as a tensor.
    pub fn tensor_shape(&self, buf: Buf) -> Shape {
        self.buffers[buf.0]
            .shape()
            .expect("an operand that is a tensor")
    }

    /// A training step (forward, backward, update) for `plan`'s batch size.
    pub fn train(plan: &Plan) -> Program {
        Builder::new(plan, true).build()
    }

    /// An evaluation step: forward with batch norm on running statistics, and the loss.
    pub fn eval(plan: &Plan) -> Program {
        Builder::new(plan, false).build()
    }

    /// Each buffer's lifetime, by `Buf` index.
    pub fn lifetimes(&self) -> Vec<Lifetime> {
        let end = self.ops.len().saturating_sub(1);
        let mut spans: Vec<Option<Lifetime>> = vec![None; self.buffers.len()];
        let mut touch = |buf: Buf, at: usize| {
            let span = spans[buf.0].get_or_insert(Lifetime {
                first: at,
                last: at,
            });
            span.first = span.first.min(at);
            span.last = span.last.max(at);
        };
        for (at, op) in self.ops.iter().enumerate() {
            for buf in op.reads().into_iter().chain(op.writes()) {
                touch(buf, at);
            }
        }
        touch(self.images, 0);
        touch(self.logits, end);
        touch(self.loss, end);
        spans
            .into_iter()
            .map(|span| span.expect("every buffer of a program is written and read"))
            .collect()
    }

    /// For each op, the buffers it reads or writes for the last time: what may be freed once it has run.
    pub fn last_uses(&self) -> Vec<Vec<Buf>> {
        let mut after = vec![Vec::new(); self.ops.len()];
        for (i, lifetime) in self.lifetimes().iter().enumerate() {
            after[lifetime.last].push(Buf(i));
        }
        after
    }
}

struct Builder<'a> {
    plan: &'a Plan,
    train: bool,
    layers: Vec<Layer>,
    buffers: Vec<BufferKind>,
    ops: Vec<Op>,
}

/// What the forward pass of a residual block leaves for its backward pass.
struct BlockTrace {
    input: Buf,
    /// Per convolution: its layer, its input, its output before batch norm, its normalised output (after ReLU
    /// where one follows, and for the last the block's output), and the batch statistics.
    convs: Vec<ConvTrace>,
    downsample: Option<ConvTrace>,
}

struct ConvTrace {
    layer: usize,
    input: Buf,
    conv_out: Buf,
    normalised: Buf,
    saved: Option<Saved>,
}

fn param<'p>(plan: &'p Plan, name: &str) -> &'p Param {
    plan.params
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("the plan has no parameter {name}"))
}

impl<'a> Builder<'a> {
    fn new(plan: &'a Plan, train: bool) -> Builder<'a> {
        let layers = plan
            .convs()
            .map(|conv| {
                let offset =
                    |suffix: &str| param(plan, &format!("{}.{suffix}", conv.batch_norm)).offset;
                Layer {
                    weight: param(plan, &format!("{}.weight", conv.name)).offset,
                    scale: offset("weight"),
                    shift: offset("bias"),
                    running_mean: offset("running_mean"),
                    running_var: offset("running_var"),
                    conv: conv.clone(),
                }
            })
            .collect();
        Builder {
            plan,
            train,
            layers,
            buffers: Vec::new(),
            ops: Vec::new(),
        }
    }

    fn take(&mut self, kind: BufferKind) -> Buf {
        self.buffers.push(kind);
        Buf(self.buffers.len() - 1)
    }

    fn tensor(&mut self, shape: Shape) -> Buf {
        self.take(BufferKind::Tensor(shape))
    }

    fn shape(&self, buf: Buf) -> Shape {
        self.buffers[buf.0]
            .shape()
            .expect("gradients are taken only of tensors")
    }

    /// Convolution then batch norm (then ReLU when `relu`). In evaluation batch norm writes over the convolution's
    /// output, which only a training step's backward pass reads again.
    fn conv_bn(&mut self, layer: usize, input: Buf, relu: bool) -> ConvTrace {
        let output = self.layers[layer].conv.output;
        let conv_out = self.tensor(output);
        self.ops.push(Op::Conv {
            layer,
            input,
            output: conv_out,
        });
        let normalised = if self.train {
            self.tensor(output)
        } else {
            conv_out
        };
        let saved = self.train.then(|| Saved {
            mean: self.take(BufferKind::Channels(output.c)),
            invstd: self.take(BufferKind::Channels(output.c)),
        });
        self.ops.push(Op::BatchNorm {
            layer,
            input: conv_out,
            output: normalised,
            saved,
        });
        if relu {
            self.ops.push(Op::Relu { data: normalised });
        }
        ConvTrace {
            layer,
            input,
            conv_out,
            normalised,
            saved,
        }
    }

    fn build(mut self) -> Program {
        let plan = self.plan;
        let images = self.tensor(plan.input);
        // Forward.
        let stem = self.conv_bn(0, images, true);
        let pooled = self.tensor(plan.pooled);
        let indices = self
            .train
            .then(|| self.take(BufferKind::Indices(plan.pooled)));
        self.ops.push(Op::MaxPool {
            input: stem.normalised,
            output: pooled,
            indices,
        });
        let mut layer = 1;
        let mut x = pooled;
        let mut traces = Vec::with_capacity(plan.blocks.len());
        for block in &plan.blocks {
            let input = x;
            let mut convs = Vec::with_capacity(block.convs.len());
            for i in 0..block.convs.len() {
                let last = i + 1 == block.convs.len();
                let trace = self.conv_bn(layer, x, !last);
                layer += 1;
                x = trace.normalised;
                convs.push(trace);
            }
            let downsample = block.downsample.as_ref().map(|_| {
                let trace = self.conv_bn(layer, input, false);
                layer += 1;
                trace
            });
            let shortcut = downsample.as_ref().map_or(input, |d| d.normalised);
            self.ops.push(Op::AddRelu { data: x, shortcut });
            traces.push(BlockTrace {
                input,
                convs,
                downsample,
            });
        }
        let features = self.tensor(Shape {
            h: 1,
            w: 1,
            ..plan.blocks.last().map_or(plan.pooled, |b| b.output)
        });
        self.ops.push(Op::AvgPool {
            input: x,
            output: features,
        });
        let logits = self.tensor(Shape {
            n: plan.input.n,
            c: plan.classes,
            h: 1,
            w: 1,
        });
        self.ops.push(Op::Linear {
            input: features,
            output: logits,
        });
        let loss = self.take(BufferKind::Scalar);
        self.ops.push(Op::Loss { logits, loss });
        if self.train {
            self.backward(logits, features, x, &traces, &stem, indices, pooled);
            self.ops.push(Op::Sgd);
        }
        let head = Head {
            weight: param(plan, "fc.weight").offset,
            bias: param(plan, "fc.bias").offset,
            features: plan.features,
            classes: plan.classes,
        };
        Program {
            train: self.train,
            input: plan.input,
            layers: self.layers,
            head,
            buffers: self.buffers,
            ops: self.ops,
            images,
            logits,
            loss,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn backward(
        &mut self,
        logits: Buf,
        features: Buf,
        last_output: Buf,
        blocks: &[BlockTrace],
        stem: &ConvTrace,
        indices: Option<Buf>,
        pooled: Buf,
    ) {
        let grad_logits = self.tensor(self.shape(logits));
        self.ops.push(Op::LossBackward {
            logits,
            grad: grad_logits,
        });
        let grad_features = self.tensor(self.shape(features));
        self.ops.push(Op::LinearBackward {
            grad_output: grad_logits,
            input: features,
            grad_input: grad_features,
        });
        let mut grad = self.tensor(self.shape(last_output));
        self.ops.push(Op::AvgPoolBackward {
            grad_output: grad_features,
            grad_input: grad,
        });
        for block in blocks.iter().rev() {
            grad = self.block_backward(block, grad);
        }
        // The stem: max pool, ReLU, batch norm, convolution (no gradient for the images).
        let grad_stem = self.tensor(self.shape(stem.normalised));
        self.ops.push(Op::MaxPoolBackward {
            grad_output: grad,
            input: stem.normalised,
            output: pooled,
            indices: indices.expect("a training step keeps the max pool's indices"),
            grad_input: grad_stem,
        });
        self.ops.push(Op::ReluBackward {
            grad: grad_stem,
            output: stem.normalised,
        });
        let grad_conv = self.norm_backward(stem, grad_stem);
        self.ops.push(Op::ConvBackward {
            layer: stem.layer,
            grad_output: grad_conv,
            input: stem.input,
            grad_input: None,
            accumulate: false,
        });
    }

    /// Batch norm's backward: the gradient at its convolution's output, in a new buffer.
    fn norm_backward(&mut self, trace: &ConvTrace, grad_output: Buf) -> Buf {
        let grad_input = self.tensor(self.shape(trace.conv_out));
        self.ops.push(Op::BatchNormBackward {
            layer: trace.layer,
            grad_output,
            input: trace.conv_out,
            saved: trace.saved.expect("a training step saves batch statistics"),
            grad_input,
        });
        grad_input
    }

    /// From the gradient at a block's output to the gradient at its input (a new buffer).
    fn block_backward(&mut self, block: &BlockTrace, grad: Buf) -> Buf {
        let last = block.convs.last().expect("a block has convolutions");
        // Through the ReLU after the sum: from here `grad` is the gradient of both branches' outputs.
        self.ops.push(Op::ReluBackward {
            grad,
            output: last.normalised,
        });
        let mut grad_here = grad;
        let mut grad_input = None;
        for (i, trace) in block.convs.iter().enumerate().rev() {
            if i + 1 < block.convs.len() {
                self.ops.push(Op::ReluBackward {
                    grad: grad_here,
                    output: trace.normalised,
                });
            }
            let grad_conv = self.norm_backward(trace, grad_here);
            let grad_in = self.tensor(self.shape(trace.input));
            self.ops.push(Op::ConvBackward {
                layer: trace.layer,
                grad_output: grad_conv,
                input: trace.input,
                grad_input: Some(grad_in),
                accumulate: false,
            });
            if i == 0 {
                grad_input = Some(grad_in);
            } else {
                grad_here = grad_in;
            }
        }
        let grad_input = grad_input.expect("a block has convolutions");
        // The shortcut's gradient joins the main branch's at the block's input.
        match &block.downsample {
            Some(trace) => {
                let grad_conv = self.norm_backward(trace, grad);
                self.ops.push(Op::ConvBackward {
                    layer: trace.layer,
                    grad_output: grad_conv,
                    input: block.input,
                    grad_input: Some(grad_input),
                    accumulate: true,
                });
            }
            None => self.ops.push(Op::Accumulate {
                into: grad_input,
                from: grad,
            }),
        }
        grad_input
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::config::Model;

    fn plans() -> Vec<Plan> {
        vec![
            Plan::new(Model::Resnet18, 1, 10, 4, 28).unwrap(),
            Plan::new(Model::Resnet50, 3, 10, 2, 32).unwrap(),
            Plan::new(Model::Resnet50, 3, 1000, 32, 224).unwrap(),
        ]
    }

    fn programs() -> Vec<Program> {
        plans()
            .iter()
            .flat_map(|plan| [Program::train(plan), Program::eval(plan)])
            .collect()
    }

    #[test]
    fn every_read_finds_a_value_written_before_within_the_buffer_s_lifetime() {
        for program in programs() {
            let lifetimes = program.lifetimes();
            let mut written = vec![false; program.buffers.len()];
            written[program.images.0] = true;
            for (at, op) in program.ops.iter().enumerate() {
                for b in op.reads() {
                    assert!(written[b.0], "op {at} {op:?} reads {b:?} unwritten");
                }
                for b in op.reads().into_iter().chain(op.writes()) {
                    let l = lifetimes[b.0];
                    assert!(l.first <= at && at <= l.last, "op {at} {op:?}: {b:?} {l:?}");
                }
                for b in op.writes() {
                    written[b.0] = true;
                }
            }
            let end = program.ops.len() - 1;
            assert_eq!(lifetimes[program.images.0].first, 0);
            assert_eq!(
                (
                    lifetimes[program.logits.0].last,
                    lifetimes[program.loss.0].last
                ),
                (end, end)
            );
        }
    }

    #[test]
    fn each_buffer_is_freed_once_after_its_last_use() {
        for program in programs() {
            let mut freed = vec![0; program.buffers.len()];
            for (at, bufs) in program.last_uses().iter().enumerate() {
                for &b in bufs {
                    freed[b.0] += 1;
                    let later = program.ops[at + 1..]
                        .iter()
                        .any(|op| op.reads().contains(&b) || op.writes().contains(&b));
                    assert!(!later, "{b:?} used after op {at}");
                }
            }
            assert!(freed.iter().all(|&n| n == 1), "{freed:?}");
        }
    }

    #[test]
    fn every_op_agrees_with_its_buffers_kinds() {
        for plan in plans() {
            let program = Program::train(&plan);
            for op in &program.ops {
                for b in op.reads().into_iter().chain(op.writes()) {
                    assert!(b.0 < program.buffers.len(), "{op:?}");
                }
                let shape = |b: Buf| match program.buffers[b.0] {
                    BufferKind::Tensor(s) => s,
                    other => panic!("{op:?}: {other:?} where a tensor belongs"),
                };
                match *op {
                    Op::Conv {
                        layer,
                        input,
                        output,
                    } => {
                        let conv = &program.layers[layer].conv;
                        assert_eq!((shape(input), shape(output)), (conv.input, conv.output));
                    }
                    Op::ConvBackward {
                        layer,
                        grad_output,
                        input,
                        grad_input,
                        ..
                    } => {
                        let conv = &program.layers[layer].conv;
                        assert_eq!(
                            (shape(grad_output), shape(input)),
                            (conv.output, conv.input)
                        );
                        if let Some(g) = grad_input {
                            assert_eq!(shape(g), conv.input);
                        }
                    }
                    Op::BatchNormBackward {
                        grad_output,
                        input,
                        grad_input,
                        ..
                    } => {
                        assert_eq!(shape(grad_output), shape(input));
                        assert_eq!(shape(grad_input), shape(input));
                    }
                    Op::Accumulate { into, from }
                    | Op::AddRelu {
                        data: into,
                        shortcut: from,
                    } => {
                        assert_eq!(shape(into), shape(from));
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn a_training_step_writes_every_layer_s_gradients_once_and_ends_with_the_update() {
        for plan in plans() {
            let program = Program::train(&plan);
            let mut conv_grads = vec![0; program.layers.len()];
            let mut norm_grads = vec![0; program.layers.len()];
            for op in &program.ops {
                match *op {
                    Op::ConvBackward { layer, .. } => conv_grads[layer] += 1,
                    Op::BatchNormBackward { layer, .. } => norm_grads[layer] += 1,
                    _ => {}
                }
            }
            assert!(conv_grads.iter().all(|&n| n == 1), "{conv_grads:?}");
            assert!(norm_grads.iter().all(|&n| n == 1), "{norm_grads:?}");
            let linear = program
                .ops
                .iter()
                .filter(|op| matches!(op, Op::LinearBackward { .. }))
                .count();
            assert_eq!(linear, 1);
            assert_eq!(program.ops.last(), Some(&Op::Sgd));
            // Backward runs in reverse: each layer's weight gradient comes after every later layer's.
            let order: Vec<usize> = program
                .ops
                .iter()
                .filter_map(|op| match op {
                    Op::ConvBackward { layer, .. } => Some(*layer),
                    _ => None,
                })
                .collect();
            let main_order: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&l| !program.layers[l].conv.name.contains("downsample"))
                .collect();
            assert!(main_order.windows(2).all(|w| w[0] > w[1]), "{order:?}");
        }
    }

    #[test]
    fn evaluation_keeps_nothing_for_a_backward_pass_and_normalises_in_place() {
        let plan = Plan::new(Model::Resnet50, 3, 1000, 32, 224).unwrap();
        let eval = Program::eval(&plan);
        assert!(eval.ops.iter().all(|op| match op {
            Op::BatchNorm { saved, .. } => saved.is_none(),
            Op::MaxPool { indices, .. } => indices.is_none(),
            Op::Conv { .. } | Op::Relu { .. } | Op::AddRelu { .. } => true,
            Op::AvgPool { .. } | Op::Linear { .. } | Op::Loss { .. } => true,
            _ => false,
        }));
        assert!(!eval.ops.iter().any(|op| matches!(op, Op::Sgd)));
        // Batch norm writes over the convolution's output, which nothing reads again.
        assert!(eval.ops.iter().all(|op| match op {
            Op::BatchNorm { input, output, .. } => input == output,
            _ => true,
        }));
    }
}
