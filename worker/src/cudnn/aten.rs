//! The `aten` backend: the framework-free program on libtorch's primitive kernels, called one by one through tch
//! with no autograd and no modules (convolution, its backward, batch norm and its backward, max pooling and its
//! backward, threshold backward, mm). It is a level of its own between `libtorch` and `cudnn`: the same kernels as
//! `libtorch`, so the difference between the two is what autograd and modules cost; and the reference the `cudnn`
//! backend is checked against, operation by operation, on a GPU.
//!
//! Each parameter, its gradient and SGD's momentum are tensors of their own, as autograd's are: a view into one
//! flat buffer made oneDNN's CPU convolutions 10% slower (a ResNet-50 training step at 32 px, batch 16: 187 ms
//! against 155 with the same kernels on tensors of their own), and a gradient returned by a backward kernel is
//! kept, not copied into place. libtorch's kernels return new tensors (on the CPU, convolution and batch norm have no
//! kernel that writes into a given one), so here the program's buffers name values rather than memory, and each is
//! dropped once the op that reads it last has run (`Program::last_uses`), as autograd frees what it saved once the
//! backward pass has used it; the `cudnn` backend lays them out in one arena. Like libtorch's, a gradient exists
//! once a backward pass has made it and a momentum buffer once SGD has stepped, so evaluation holds neither.

use std::collections::HashMap;
use std::ffi::c_char;

use tch::{Device, Kind, Tensor};
use torch_sys::C_tensor;

use super::plan::{Param, Plan};
use super::program::{Buf, Op, Program};
use super::weights::Weights;
use crate::shim::{check, owned};
use golow_protocol::config::Optimiser;

/// torchvision's (and tch's) batch norm.
const MOMENTUM: f64 = 0.1;
const EPS: f64 = 1e-5;

unsafe extern "C" {
    fn golow_convolution_backward(
        grad_output: *const C_tensor,
        input: *const C_tensor,
        weight: *const C_tensor,
        stride: i64,
        padding: i64,
        grad_input: *mut *mut C_tensor,
        grad_weight: *mut *mut C_tensor,
    ) -> *mut c_char;
    #[allow(clippy::too_many_arguments)]
    fn golow_batch_norm_backward(
        grad_output: *const C_tensor,
        input: *const C_tensor,
        weight: *const C_tensor,
        save_mean: *const C_tensor,
        save_invstd: *const C_tensor,
        eps: f64,
        grad_input: *mut *mut C_tensor,
        grad_weight: *mut *mut C_tensor,
        grad_bias: *mut *mut C_tensor,
    ) -> *mut c_char;
    fn golow_cross_entropy_backward(
        logits: *const C_tensor,
        targets: *const C_tensor,
        grad: *mut *mut C_tensor,
    ) -> *mut c_char;
    #[allow(clippy::too_many_arguments)]
    fn golow_sgd_step(
        params: *const *mut C_tensor,
        grads: *const *mut C_tensor,
        momentum_buffers: *const *mut C_tensor,
        scratch: *mut C_tensor,
        count: usize,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
        first: bool,
    ) -> *mut c_char;
}

/// The (input, weight) gradients of a convolution; the input's only when asked for.
fn convolution_backward(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    stride: usize,
    padding: usize,
    want_input: bool,
) -> (Option<Tensor>, Tensor) {
    let mut grad_input = std::ptr::null_mut();
    let mut grad_weight = std::ptr::null_mut();
    // SAFETY: the tensors outlive the call; the out-pointers are written by the shim with owned handles.
    check(unsafe {
        golow_convolution_backward(
            grad_output.as_ptr(),
            input.as_ptr(),
            weight.as_ptr(),
            stride as i64,
            padding as i64,
            if want_input {
                &mut grad_input
            } else {
                std::ptr::null_mut()
            },
            &mut grad_weight,
        )
    });
    (want_input.then(|| owned(grad_input)), owned(grad_weight))
}

/// The gradient of the mean cross-entropy with respect to the logits.
fn cross_entropy_backward(logits: &Tensor, targets: &Tensor) -> Tensor {
    let mut grad = std::ptr::null_mut();
    // SAFETY: as above.
    check(unsafe { golow_cross_entropy_backward(logits.as_ptr(), targets.as_ptr(), &mut grad) });
    owned(grad)
}

/// The (input, scale, shift) gradients of a training-mode batch norm.
fn batch_norm_backward(
    grad_output: &Tensor,
    input: &Tensor,
    scale: &Tensor,
    mean: &Tensor,
    invstd: &Tensor,
) -> (Tensor, Tensor, Tensor) {
    let mut outs = [std::ptr::null_mut(); 3];
    let [a, b, c] = &mut outs;
    // SAFETY: as above.
    check(unsafe {
        golow_batch_norm_backward(
            grad_output.as_ptr(),
            input.as_ptr(),
            scale.as_ptr(),
            mean.as_ptr(),
            invstd.as_ptr(),
            EPS,
            a,
            b,
            c,
        )
    });
    let [a, b, c] = outs.map(owned);
    (a, b, c)
}

/// A trainable parameter's value, its last gradient and SGD's momentum buffer for it, each a tensor of its own (the
/// last two undefined until a backward pass and an update make them).
struct Trainable {
    value: Tensor,
    grad: Tensor,
    momentum: Tensor,
}

/// A program and, for each of its ops, the values to drop once it has run.
struct Step {
    program: Program,
    last_uses: Vec<Vec<Buf>>,
}

impl Step {
    fn new(program: Program) -> Step {
        Step {
            last_uses: program.last_uses(),
            program,
        }
    }
}

/// A layer's parameters, as indices into the trainable ones, and its running statistics (views into one buffer).
struct LayerParams {
    weight: usize,
    scale: usize,
    shift: usize,
    running_mean: Tensor,
    running_var: Tensor,
}

pub struct AtenNet {
    plan: Plan,
    optimiser: Optimiser,
    train: Option<Step>,
    /// Evaluation steps by batch size: the training batch, and the last, partial one of a pass over the test split.
    eval: HashMap<usize, Step>,
    /// In the plan's order of trainable parameters.
    trainable: Vec<Trainable>,
    /// Where SGD writes each parameter's weight-decayed direction in turn, as large as the largest parameter: made
    /// at the first update and kept, where torch's `grad.add(param, wd)` allocates one anew for every parameter.
    direction: Option<Tensor>,
    statistics: Tensor,
    stepped: bool,
    layers: Vec<LayerParams>,
    head_weight: usize,
    head_bias: usize,
    values: Vec<Option<Tensor>>,
}

fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

fn view(flat: &Tensor, offset: usize, shape: &[usize]) -> Tensor {
    let elements: usize = shape.iter().product();
    flat.narrow(0, offset as i64, elements as i64)
        .view(&dims(shape)[..])
}

/// A trainable parameter's value, copied once from the weights into a tensor of its own on `device`.
fn parameter_value(weights: &Weights, p: &Param, device: Device) -> Tensor {
    Tensor::from_slice(&weights.trainable[p.offset..p.offset + p.elements()])
        .view(&dims(&p.shape)[..])
        .to_device(device)
}

impl AtenNet {
    /// The network of `plan` (its batch size is the training step's) with `weights`, on `device`.
    pub fn new(plan: Plan, weights: &Weights, optimiser: Optimiser, device: Device) -> AtenNet {
        let statistics = Tensor::from_slice(&weights.statistics).to_device(device);
        let trainable_params: Vec<&super::plan::Param> =
            plan.params.iter().filter(|p| p.trainable).collect();
        let trainable: Vec<Trainable> = trainable_params
            .iter()
            .map(|p| Trainable {
                value: parameter_value(weights, p, device),
                grad: Tensor::new(),
                momentum: Tensor::new(),
            })
            .collect();
        let index = |offset: usize| {
            trainable_params
                .iter()
                .position(|p| p.offset == offset)
                .expect("every offset of the program is a trainable parameter's")
        };
        let train = Program::train(&plan);
        let layers = train
            .layers
            .iter()
            .map(|l| {
                let c = l.conv.output.c;
                LayerParams {
                    weight: index(l.weight),
                    scale: index(l.scale),
                    shift: index(l.shift),
                    running_mean: view(&statistics, l.running_mean, &[c]),
                    running_var: view(&statistics, l.running_var, &[c]),
                }
            })
            .collect();
        let head_weight = index(train.head.weight);
        let head_bias = index(train.head.bias);
        AtenNet {
            eval: HashMap::from([(plan.input.n, Step::new(Program::eval(&plan)))]),
            plan,
            optimiser,
            train: Some(Step::new(train)),
            trainable,
            direction: None,
            statistics,
            stepped: false,
            layers,
            head_weight,
            head_bias,
            values: Vec::new(),
        }
    }

    /// One training step: its mean loss and logits; every parameter updated.
    pub fn train_step(&mut self, images: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        let step = self.train.take().expect("the training step is planned");
        let out = self.run(&step, images, targets);
        self.train = Some(step);
        out
    }

    /// Batch norm on running statistics, nothing kept for a backward pass: mean loss and logits.
    pub fn evaluate(&mut self, images: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        let n = images.size()[0] as usize;
        let step = match self.eval.remove(&n) {
            Some(step) => step,
            None => Step::new(Program::eval(&self.plan.with_batch(n))),
        };
        let out = self.run(&step, images, targets);
        self.eval.insert(n, step);
        out
    }

    /// The gradient of the last training step of a trainable parameter named as torchvision names it: what the
    /// comparisons with libtorch's autograd (and, on a GPU, with the cudnn backend) read. None before the first.
    pub fn gradient(&self, name: &str) -> Option<Tensor> {
        let grad = &self.trainable[self.trainable_index(name)?].grad;
        grad.defined().then(|| grad.shallow_clone())
    }

    /// A trainable parameter's value, or a running statistic's.
    pub fn parameter(&self, name: &str) -> Option<Tensor> {
        if let Some(i) = self.trainable_index(name) {
            return Some(self.trainable[i].value.shallow_clone());
        }
        let p = self.param(name)?;
        Some(view(&self.statistics, p.offset, &p.shape))
    }

    /// Where a trainable parameter is among `trainable`: its rank among the plan's trainable parameters.
    fn trainable_index(&self, name: &str) -> Option<usize> {
        self.plan
            .params
            .iter()
            .filter(|p| p.trainable)
            .position(|p| p.name == name)
    }

    /// A training step begun (its batch loaded) but none of its ops run: the GPU tests run them one by one.
    #[cfg(test)]
    pub fn start_training(&mut self, images: &Tensor) {
        let step = self.train.take().expect("the training step is planned");
        self.start(&step.program, images);
        self.train = Some(step);
    }

    /// Runs op `index` of the training step begun by `start_training`.
    #[cfg(test)]
    pub fn run_training_op(&mut self, index: usize, targets: &Tensor) {
        let step = self.train.take().expect("the training step is planned");
        self.run_op(&step, index, targets);
        self.train = Some(step);
    }

    /// A buffer's value in the step being run, if written.
    #[cfg(test)]
    pub fn buffer(&self, buf: Buf) -> Option<Tensor> {
        self.values[buf.0].as_ref().map(Tensor::shallow_clone)
    }

    fn param(&self, name: &str) -> Option<&super::plan::Param> {
        self.plan.params.iter().find(|p| p.name == name)
    }

    fn value(&self, buf: Buf) -> &Tensor {
        self.values[buf.0]
            .as_ref()
            .expect("the program reads only what it wrote")
    }

    fn set(&mut self, buf: Buf, value: Tensor) {
        self.values[buf.0] = Some(value);
    }

    fn start(&mut self, program: &Program, images: &Tensor) {
        self.values.clear();
        self.values.resize_with(program.buffers.len(), || None);
        self.set(program.images, images.shallow_clone());
    }

    fn run(&mut self, step: &Step, images: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        self.start(&step.program, images);
        for index in 0..step.program.ops.len() {
            self.run_op(step, index, targets);
        }
        let program = &step.program;
        let taken = |values: &mut Vec<Option<Tensor>>, buf: Buf| {
            values[buf.0]
                .take()
                .expect("the step's last op keeps its outputs")
        };
        (
            taken(&mut self.values, program.loss),
            taken(&mut self.values, program.logits),
        )
    }

    /// Runs op `index` of `step`, then drops the values it was the last to use, but the step's outputs.
    fn run_op(&mut self, step: &Step, index: usize, targets: &Tensor) {
        let program = &step.program;
        self.execute(program, &program.ops[index], targets);
        for &buf in &step.last_uses[index] {
            if buf != program.loss && buf != program.logits {
                self.values[buf.0] = None;
            }
        }
    }

    fn execute(&mut self, program: &Program, op: &Op, targets: &Tensor) {
        match *op {
            Op::Conv {
                layer,
                input,
                output,
            } => {
                let conv = &program.layers[layer].conv;
                let (s, p) = (conv.stride as i64, conv.pad as i64);
                let y = self.value(input).convolution(
                    &self.trainable[self.layers[layer].weight].value,
                    None::<&Tensor>,
                    [s, s],
                    [p, p],
                    [1, 1],
                    false,
                    [0, 0],
                    1,
                );
                self.set(output, y);
            }
            Op::BatchNorm {
                layer,
                input,
                output,
                saved,
            } => {
                let l = &self.layers[layer];
                let (y, mean, invstd) = self.value(input).native_batch_norm(
                    Some(&self.trainable[l.scale].value),
                    Some(&self.trainable[l.shift].value),
                    Some(&l.running_mean),
                    Some(&l.running_var),
                    saved.is_some(),
                    MOMENTUM,
                    EPS,
                );
                self.set(output, y);
                if let Some(saved) = saved {
                    self.set(saved.mean, mean);
                    self.set(saved.invstd, invstd);
                }
            }
            Op::Relu { data } => {
                let _ = self.value(data).shallow_clone().relu_();
            }
            Op::MaxPool {
                input,
                output,
                indices,
            } => {
                let (y, i) = self.value(input).max_pool2d_with_indices(
                    [3, 3],
                    [2, 2],
                    [1, 1],
                    [1, 1],
                    false,
                );
                self.set(output, y);
                if let Some(indices) = indices {
                    self.set(indices, i);
                }
            }
            Op::AddRelu { data, shortcut } => {
                let mut sum = self.value(data).shallow_clone();
                let _ = sum.g_add_(self.value(shortcut));
                let _ = sum.relu_();
            }
            Op::AvgPool { input, output } => {
                let y = self.value(input).adaptive_avg_pool2d([1, 1]);
                self.set(output, y);
            }
            Op::Linear { input, output } => {
                let y = self.value(input).flatten(1, -1).linear(
                    &self.trainable[self.head_weight].value,
                    Some(&self.trainable[self.head_bias].value),
                );
                self.set(output, y);
            }
            Op::Loss { logits, loss } => {
                let l = self.value(logits).cross_entropy_for_logits(targets);
                self.set(loss, l);
            }
            Op::LossBackward { logits, grad } => {
                let g = cross_entropy_backward(self.value(logits), targets);
                self.set(grad, g);
            }
            Op::LinearBackward {
                grad_output,
                input,
                grad_input,
            } => {
                let g = self.value(grad_output).shallow_clone();
                let input = self.value(input).shallow_clone();
                let x = input.flatten(1, -1);
                self.trainable[self.head_weight].grad = g.tr().mm(&x);
                self.trainable[self.head_bias].grad = g.sum_dim_intlist(0, false, Kind::Float);
                let gx = g
                    .mm(&self.trainable[self.head_weight].value)
                    .view(&input.size()[..]);
                self.set(grad_input, gx);
            }
            Op::AvgPoolBackward {
                grad_output,
                grad_input,
            } => {
                let s = program.tensor_shape(grad_input);
                let [n, c, h, w] = [s.n, s.c, s.h, s.w].map(|d| d as i64);
                let g = (self.value(grad_output) / (h * w) as f64)
                    .expand([n, c, h, w], false)
                    .contiguous();
                self.set(grad_input, g);
            }
            Op::ReluBackward { grad, output } => {
                let g = self.value(grad);
                let _ = self.value(output).threshold_backward_grad_input(g, g, 0.0);
            }
            Op::BatchNormBackward {
                layer,
                grad_output,
                input,
                saved,
                grad_input,
            } => {
                let (scale, shift) = (self.layers[layer].scale, self.layers[layer].shift);
                let (gx, gscale, gshift) = batch_norm_backward(
                    self.value(grad_output),
                    self.value(input),
                    &self.trainable[scale].value,
                    self.value(saved.mean),
                    self.value(saved.invstd),
                );
                self.trainable[scale].grad = gscale;
                self.trainable[shift].grad = gshift;
                self.set(grad_input, gx);
            }
            Op::ConvBackward {
                layer,
                grad_output,
                input,
                grad_input,
                accumulate,
            } => {
                let conv = &program.layers[layer].conv;
                let weight = self.layers[layer].weight;
                let (gx, gw) = convolution_backward(
                    self.value(grad_output),
                    self.value(input),
                    &self.trainable[weight].value,
                    conv.stride,
                    conv.pad,
                    grad_input.is_some(),
                );
                self.trainable[weight].grad = gw;
                if let (Some(buf), Some(gx)) = (grad_input, gx) {
                    if accumulate {
                        let _ = self.value(buf).shallow_clone().g_add_(&gx);
                    } else {
                        self.set(buf, gx);
                    }
                }
            }
            Op::MaxPoolBackward {
                grad_output,
                input,
                indices,
                grad_input,
                ..
            } => {
                let x = self.value(input);
                let out = x.empty_like();
                let g = x.max_pool2d_with_indices_backward_grad_input(
                    &out,
                    self.value(grad_output),
                    [3, 3],
                    [2, 2],
                    [1, 1],
                    [1, 1],
                    false,
                    self.value(indices),
                );
                self.set(grad_input, g);
            }
            Op::Accumulate { into, from } => {
                let _ = self.value(into).shallow_clone().g_add_(self.value(from));
            }
            Op::Sgd => self.sgd(),
        }
    }

    /// libtorch's SGD (torch::optim::SGD, as tch runs it for the other levels), parameter by parameter with its
    /// arithmetic: d = g + wd·p; the momentum buffer starts as d, then b = m·b + d; p -= lr·b.
    fn sgd(&mut self) {
        let o = self.optimiser;
        if o.weight_decay != 0.0 && self.direction.is_none() {
            let largest = self.trainable.iter().map(|t| t.value.numel()).max();
            let value = &self.trainable[0].value;
            self.direction = Some(Tensor::empty(
                [largest.unwrap_or(0) as i64],
                (value.kind(), value.device()),
            ));
        }
        let pointers = |f: fn(&Trainable) -> &Tensor| -> Vec<*mut C_tensor> {
            self.trainable
                .iter()
                .map(|t| f(t).as_ptr() as *mut C_tensor)
                .collect()
        };
        let (params, grads, momentum) = (
            pointers(|t| &t.value),
            pointers(|t| &t.grad),
            pointers(|t| &t.momentum),
        );
        let scratch = self
            .direction
            .as_ref()
            .map_or(std::ptr::null_mut(), |t| t.as_ptr() as *mut C_tensor);
        // SAFETY: three arrays of `count` handles to this network's own tensors, and the direction's (or null
        // without weight decay), alive for the call; the shim writes into the values, the momentum buffers (made
        // at the first step) and the direction, which no other handle reads meanwhile.
        check(unsafe {
            golow_sgd_step(
                params.as_ptr(),
                grads.as_ptr(),
                momentum.as_ptr(),
                scratch,
                params.len(),
                o.lr,
                o.momentum,
                o.weight_decay,
                !self.stepped,
            )
        });
        self.stepped = true;
    }
}
