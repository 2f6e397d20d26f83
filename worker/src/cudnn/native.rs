//! The `cudnn` backend: the framework-free program on cuDNN (convolutions with algorithms searched once per shape,
//! batch norm, ReLU, pooling, tensor addition), cuBLAS (the fully connected layer) and NVRTC kernels (softmax
//! cross-entropy and its gradient, the average pool's gradient, the fused SGD update), through cudarc. Every
//! buffer a step names lies in one arena that all steps share (`layout`: buffers never live at once share bytes),
//! sized when a step is first planned, never inside a step; parameters, gradients and SGD's momentum are each one
//! allocation in the plan's layout, the last two made when the session first trains. All work goes to the legacy
//! default stream, the one libtorch copies the batches on and the worker's CUDA events time.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::Arc;

use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::cudnn::{result as dnn, sys};
use cudarc::driver::sys::{
    CUdevice_attribute, CUdeviceptr, CUevent, CUevent_flags, CUfunction, CUmodule,
};
use cudarc::driver::{CudaContext, result as driver};

use super::algorithms::{self, Choice, ConvAlgos, ConvKey, SearchOperands};
use super::descriptors::{Descriptors, TensorDesc, check};
use super::kernels::{self, Kernel, SAMPLE_THREADS};
use super::layout::{Layout, Region};
use super::memory::DeviceMemory;
use super::operations::OperationTimes;
use super::plan::{Param, Plan};
use super::program::{Buf, Op, Program};
use super::weights::Weights;
use golow_protocol::config::{GpuPolicy, Optimiser};

/// torchvision's (and tch's) batch norm.
const MOMENTUM: f64 = 0.1;
const EPS: f64 = 1e-5;
/// The most workspace an algorithm search may offer cuDNN (benchmarking searches within the arena's room besides).
const SEARCH_WORKSPACE_CAP: usize = 1 << 30;
/// Threads per block of the element-wise kernels, and the most blocks they launch (they stride over the rest).
const THREADS: u32 = 256;
const MAX_BLOCKS: u64 = 4096;

const ONE: f32 = 1.0;
const ZERO: f32 = 0.0;

fn one() -> *const c_void {
    (&ONE as *const f32).cast()
}

fn zero() -> *const c_void {
    (&ZERO as *const f32).cast()
}

/// A kernel argument as cuLaunchKernel takes it: the address of its value.
fn arg<T>(value: &mut T) -> *mut c_void {
    (value as *mut T).cast()
}

fn ptr(p: CUdeviceptr) -> *mut c_void {
    p as *mut c_void
}

/// The device, the library handles and the compiled kernels.
struct Gpu {
    cudnn: sys::cudnnHandle_t,
    blas: blas_sys::cublasHandle_t,
    module: CUmodule,
    /// In `Kernel::ALL` order.
    kernels: Vec<CUfunction>,
    /// Holds the device's primary context (libtorch's) current on this thread.
    _context: Arc<CudaContext>,
}

impl Gpu {
    fn new(ordinal: usize, tf32: bool) -> Result<Gpu, String> {
        super::descriptors::load_library()?;
        let context =
            CudaContext::new(ordinal).map_err(|e| format!("CUDA device {ordinal}: {e:?}"))?;
        let capability = |a| {
            context
                .attribute(a)
                .map_err(|e| format!("CUDA device {ordinal}: {e:?}"))
        };
        let arch = kernels::architecture(
            capability(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            capability(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let ptx =
            CString::new(kernels::compile(arch)?).map_err(|_| "NVRTC's PTX has a NUL byte")?;
        // SAFETY: a NUL-terminated PTX image just compiled; the module is unloaded by `drop`.
        let module = unsafe { driver::module::load_data(ptx.as_ptr().cast()) }
            .map_err(|e| format!("loading golow's kernels: {e:?}"))?;
        let mut gpu = Gpu {
            cudnn: std::ptr::null_mut(),
            blas: std::ptr::null_mut(),
            module,
            kernels: Vec::new(),
            _context: context,
        };
        for kernel in Kernel::ALL {
            let name = kernel.name();
            let c_name = CString::new(name).expect("entry points are plain names");
            // SAFETY: the module is loaded and alive as long as `gpu`.
            let f = unsafe { driver::module::get_function(gpu.module, c_name) }
                .map_err(|e| format!("kernel {name}: {e:?}"))?;
            gpu.kernels.push(f);
        }
        gpu.cudnn = dnn::create_handle().map_err(|e| format!("cuDNN handle: {e:?}"))?;
        gpu.blas = blas::create_handle().map_err(|e| format!("cuBLAS handle: {e:?}"))?;
        // As libtorch sets its handles for `allow_tf32` on and off.
        let math = if tf32 {
            blas_sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
        } else {
            blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH
        };
        // SAFETY: the handle just created.
        unsafe { blas_sys::cublasSetMathMode(gpu.blas, math) }
            .result()
            .map_err(|e| format!("cuBLAS math mode: {e:?}"))?;
        Ok(gpu)
    }

    /// Launches `kernel` on the default stream; `args` point at the kernel's arguments, in order.
    fn launch(
        &self,
        kernel: Kernel,
        blocks: u32,
        threads: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), String> {
        // SAFETY: the argument pointers are live for the call and match the kernel's parameters, which the
        // callers below keep in step with the source in `kernels`.
        unsafe {
            driver::launch_kernel(
                self.kernels[kernel as usize],
                (blocks.max(1), 1, 1),
                (threads, 1, 1),
                0,
                std::ptr::null_mut(),
                args,
            )
        }
        .map_err(|e| format!("kernel {}: {e:?}", kernel.name()))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: handles and module created by `new`, released once, after every step that used them.
        unsafe {
            if !self.blas.is_null() {
                let _ = blas::destroy_handle(self.blas);
            }
            if !self.cudnn.is_null() {
                let _ = dnn::destroy_handle(self.cudnn);
            }
            let _ = driver::module::unload(self.module);
        }
    }
}

/// Blocks for an element-wise kernel over `count` values.
fn blocks(count: usize) -> u32 {
    (count as u64)
        .div_ceil(u64::from(THREADS))
        .clamp(1, MAX_BLOCKS) as u32
}

/// A program with everything it runs on: its descriptors, where its buffers lie in the arena, each layer's
/// algorithms.
struct Step {
    program: Program,
    descs: Descriptors,
    layout: Layout,
    /// The arena's address when the step was last taken out to run (`CudnnNet::ready`): it moves when it grows.
    base: CUdeviceptr,
    algos: Vec<ConvAlgos>,
}

impl Step {
    fn region(&self, buf: Buf) -> Region {
        self.layout.regions[buf.0]
    }

    fn at(&self, buf: Buf) -> CUdeviceptr {
        self.at_offset(self.region(buf).offset)
    }

    fn at_offset(&self, offset: usize) -> CUdeviceptr {
        self.base + offset as u64
    }

    fn desc(&self, buf: Buf) -> &TensorDesc {
        self.descs.tensor(self.program.tensor_shape(buf))
    }

    fn batch(&self) -> usize {
        self.program.input.n
    }
}

/// Where a step's mean loss and logits (batch × classes, f32) are on the device, until the next step.
#[derive(Debug, Clone, Copy)]
pub struct Outputs {
    pub loss: CUdeviceptr,
    pub logits: CUdeviceptr,
}

pub struct CudnnNet {
    plan: Plan,
    optimiser: Optimiser,
    train: Option<Step>,
    /// Evaluation steps by batch size: the training batch, and the last, partial one of a pass over the test split.
    eval: HashMap<usize, Step>,
    algorithms: HashMap<ConvKey, ConvAlgos>,
    choice: Choice,
    trainable: DeviceMemory,
    statistics: DeviceMemory,
    /// Empty until the first training step is planned: a session that only evaluates holds neither.
    grads: DeviceMemory,
    momentum: DeviceMemory,
    /// Every step's buffers, at the offsets of its layout; as large as the largest step planned.
    arena: DeviceMemory,
    workspace: DeviceMemory,
    /// Each sample's loss, before the mean.
    losses: DeviceMemory,
    stepped: bool,
    /// While profiled steps run, each operation is timed on the device (the events are kept between them).
    timed: bool,
    timing: Timing,
    operations: OperationTimes,
    /// Dropped last: every allocation and descriptor above goes before the handles and the context.
    gpu: Gpu,
}

/// A CUDA event before and after each operation of a step, on the stream the operations run on (the default one),
/// so that what each took on the device is read once the step is done, without a synchronisation between them.
struct Timing {
    events: Vec<(CUevent, CUevent)>,
}

impl Timing {
    /// The pair of events around operation `index`, made on first use.
    fn around(&mut self, index: usize) -> Result<(CUevent, CUevent), String> {
        while self.events.len() <= index {
            let make = || {
                driver::event::create(CUevent_flags::CU_EVENT_DEFAULT)
                    .map_err(|e| format!("cuEventCreate: {e:?}"))
            };
            self.events.push((make()?, make()?));
        }
        Ok(self.events[index])
    }

    fn record(event: CUevent) -> Result<(), String> {
        // SAFETY: an event of this context, recorded on the default stream the operations are issued to.
        unsafe { driver::event::record(event, std::ptr::null_mut()) }
            .map_err(|e| format!("cuEventRecord: {e:?}"))
    }

    /// Waits for the step's last operation, and adds what each of `ops` took to `times`.
    fn read(&self, ops: &[Op], times: &mut OperationTimes) -> Result<(), String> {
        let Some(&(_, last)) = ops.len().checked_sub(1).and_then(|i| self.events.get(i)) else {
            return Ok(());
        };
        // SAFETY: events made by `around` and recorded for every op of this step, in order, on one stream.
        unsafe { driver::event::synchronize(last) }
            .map_err(|e| format!("cuEventSynchronize: {e:?}"))?;
        for (op, &(start, end)) in ops.iter().zip(&self.events) {
            // SAFETY: as above; both have completed.
            let ms = unsafe { driver::event::elapsed(start, end) }
                .map_err(|e| format!("cuEventElapsedTime: {e:?}"))?;
            times.add(op, (f64::from(ms) * 1e6) as u64);
        }
        Ok(())
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        for &(start, end) in &self.events {
            // SAFETY: made by `around`, destroyed once; the context outlives them (`gpu` is dropped last).
            unsafe {
                let _ = driver::event::destroy(start);
                let _ = driver::event::destroy(end);
            }
        }
    }
}

impl CudnnNet {
    /// The network of `plan` (its batch size is the training step's) with `weights`, on CUDA device `ordinal`.
    /// Steps are planned when first run: a training run allocates nothing for evaluation until it evaluates.
    pub fn new(
        plan: Plan,
        weights: &Weights,
        optimiser: Optimiser,
        policy: GpuPolicy,
        ordinal: usize,
    ) -> Result<CudnnNet, String> {
        let gpu = Gpu::new(ordinal, policy.tf32)?;
        let trainable = DeviceMemory::from_host(&weights.trainable)?;
        let statistics = DeviceMemory::from_host(&weights.statistics)?;
        Ok(CudnnNet {
            losses: DeviceMemory::zeroed(0)?,
            plan,
            optimiser,
            train: None,
            eval: HashMap::new(),
            algorithms: HashMap::new(),
            choice: Choice {
                benchmark: policy.cudnn_benchmark,
                tf32: policy.tf32,
            },
            trainable,
            statistics,
            grads: DeviceMemory::zeroed(0)?,
            momentum: DeviceMemory::zeroed(0)?,
            arena: DeviceMemory::zeroed(0)?,
            workspace: DeviceMemory::zeroed(0)?,
            stepped: false,
            timed: false,
            timing: Timing { events: Vec::new() },
            operations: OperationTimes::default(),
            gpu,
        })
    }

    /// One training step on a batch already on the device (`images` N×C×H×W f32, `targets` N i64): forward,
    /// backward and the SGD update of every parameter.
    pub fn train_step(
        &mut self,
        images: CUdeviceptr,
        targets: CUdeviceptr,
    ) -> Result<Outputs, String> {
        let step = self.training_step()?;
        let out = self.run(&step, images, targets);
        self.train = Some(step);
        out
    }

    /// Batch norm on running statistics and nothing kept for a backward pass, for a batch of `n`.
    pub fn evaluate(
        &mut self,
        images: CUdeviceptr,
        targets: CUdeviceptr,
        n: usize,
    ) -> Result<Outputs, String> {
        let step = match self.eval.remove(&n) {
            Some(step) => self.ready(step),
            None => self.plan_step(Program::eval(&self.plan.with_batch(n)))?,
        };
        let out = self.run(&step, images, targets);
        self.eval.insert(n, step);
        out
    }

    /// The training step, planned when first asked for.
    fn training_step(&mut self) -> Result<Step, String> {
        match self.train.take() {
            Some(step) => Ok(self.ready(step)),
            None => self.plan_step(Program::train(&self.plan)),
        }
    }

    /// `step` pointed at the arena where it is now.
    fn ready(&self, mut step: Step) -> Step {
        step.base = self.arena.ptr();
        step
    }

    /// The last training step's gradient of a trainable parameter, named as torchvision names it (none before
    /// the first).
    pub fn gradient(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        if self.grads.bytes() == 0 {
            return Ok(None);
        }
        match self.param(name).filter(|p| p.trainable) {
            Some(p) => self.grads.read(p.offset, p.elements()).map(Some),
            None => Ok(None),
        }
    }

    /// A trainable parameter's value, or a running statistic's.
    pub fn parameter(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        let Some(p) = self.param(name) else {
            return Ok(None);
        };
        let flat = if p.trainable {
            &self.trainable
        } else {
            &self.statistics
        };
        flat.read(p.offset, p.elements()).map(Some)
    }

    /// A training step begun (its batch loaded) but none of its ops run: the GPU tests run them one by one.
    #[cfg(test)]
    pub fn start_training(&mut self, images: CUdeviceptr) -> Result<(), String> {
        let step = self.training_step()?;
        let loaded = self.load_images(&step, images);
        self.train = Some(step);
        loaded
    }

    /// Runs op `index` of the training step begun by `start_training`.
    #[cfg(test)]
    pub fn run_training_op(&mut self, index: usize, targets: CUdeviceptr) -> Result<(), String> {
        let step = self.train.take().expect("start_training planned the step");
        let op = step.program.ops[index];
        let result = self.execute(&step, &op, targets);
        self.train = Some(step);
        result
    }

    /// A buffer of the training step, as f32 values.
    #[cfg(test)]
    pub fn training_buffer(&self, buf: Buf) -> Result<Vec<f32>, String> {
        let region = self.training_region(buf);
        self.arena.read(region.offset / 4, region.bytes / 4)
    }

    /// Sets a buffer of the training step to `values` (f32), so that a test can give an operation aten's inputs.
    #[cfg(test)]
    pub fn set_training_buffer(&self, buf: Buf, values: &[f32]) -> Result<(), String> {
        let region = self.training_region(buf);
        if 4 * values.len() != region.bytes {
            return Err(format!(
                "{} values for a buffer of {} bytes",
                values.len(),
                region.bytes
            ));
        }
        self.arena.write(region.offset / 4, values)
    }

    /// Where a buffer of the training step begun by `start_training` lies in the arena.
    #[cfg(test)]
    fn training_region(&self, buf: Buf) -> Region {
        self.train
            .as_ref()
            .expect("start_training planned the step")
            .region(buf)
    }

    fn param(&self, name: &str) -> Option<&Param> {
        self.plan.params.iter().find(|p| p.name == name)
    }

    /// Descriptors, the buffers' layout (the arena grown to hold it) and the algorithms of every convolution
    /// (searched for shapes not seen before). A training step first makes the gradients and momentum.
    fn plan_step(&mut self, program: Program) -> Result<Step, String> {
        let descs = Descriptors::new(&program)?;
        let layout = Layout::of(&program);
        if self.arena.bytes() < layout.bytes {
            // Freed before the larger one is made: what the old one held was read when its step ended.
            self.arena = DeviceMemory::zeroed(0)?;
            self.arena = DeviceMemory::zeroed(layout.bytes)?;
        }
        if program.train && self.grads.bytes() == 0 {
            self.grads = DeviceMemory::zeroed(self.trainable.bytes())?;
            self.momentum = DeviceMemory::zeroed(self.trainable.bytes())?;
        }
        let n = program.input.n;
        if self.losses.bytes() < 4 * n {
            self.losses = DeviceMemory::zeroed(4 * n)?;
        }
        let mut step = Step {
            program,
            descs,
            layout,
            base: self.arena.ptr(),
            algos: Vec::new(),
        };
        let mut needed = 0;
        for (index, layer) in step.program.layers.iter().enumerate() {
            let key = ConvKey::of(&layer.conv, n);
            let train = step.program.train;
            let (input, output) = step
                .program
                .ops
                .iter()
                .find_map(|op| match *op {
                    Op::Conv {
                        layer: l,
                        input,
                        output,
                    } if l == index => Some((input, output)),
                    _ => None,
                })
                .expect("every layer's convolution is an op of the program");
            let descs = &step.descs.layers[index];
            let found = match self.algorithms.get(&key) {
                Some(found) if found.backward.is_some() || !train => *found,
                _ => {
                    let (scratch, size) = self.search_scratch(&step, input, output)?;
                    descs.forward.set_math(self.choice.search_math())?;
                    // SAFETY: the handle is this network's; the operands are this step's buffers and the flat
                    // parameter and gradient allocations at the layer's offsets, each of its descriptor's size; the
                    // scratch is `size` bytes of the arena that neither operand occupies.
                    let found = unsafe {
                        algorithms::search(
                            self.gpu.cudnn,
                            &SearchOperands {
                                x: (step.desc(input), step.at(input)),
                                w: (&descs.filter, self.trainable.at(layer.weight)),
                                y: (step.desc(output), step.at(output)),
                                dw: train.then(|| self.grads.at(layer.weight)),
                                conv: &descs.forward,
                            },
                            scratch,
                            size,
                            self.choice,
                        )
                    }
                    .map_err(|e| format!("{} at {:?}: {e}", layer.conv.name, key.input))?;
                    self.algorithms.insert(key, found);
                    found
                }
            };
            // SAFETY: the handle is this network's; the tensor descriptors are the layer's input and output.
            let workspace = unsafe {
                algorithms::configure(
                    self.gpu.cudnn,
                    descs,
                    step.desc(input),
                    step.desc(output),
                    &found,
                )
            }
            .map_err(|e| format!("{} at {:?}: {e}", layer.conv.name, key.input))?;
            needed = needed.max(workspace);
            step.algos.push(found);
        }
        if self.workspace.bytes() < needed {
            self.workspace = DeviceMemory::zeroed(needed)?;
        }
        Ok(step)
    }

    /// Where a convolution's algorithm search may write, and how much: benchmarking runs every candidate within the
    /// largest range of the arena its operands leave (nothing else in it is read before the step writes it), so a
    /// search allocates nothing beyond the step's own buffers; heuristics run nothing and rank what would fit the
    /// device's memory.
    fn search_scratch(
        &self,
        step: &Step,
        input: Buf,
        output: Buf,
    ) -> Result<(CUdeviceptr, usize), String> {
        if self.choice.benchmark {
            let room = step
                .layout
                .largest_free(&[step.region(input), step.region(output)]);
            return Ok((
                step.at_offset(room.offset),
                room.bytes.min(SEARCH_WORKSPACE_CAP),
            ));
        }
        let (free, _) = driver::mem_get_info().map_err(|e| format!("cuMemGetInfo: {e:?}"))?;
        Ok((0, SEARCH_WORKSPACE_CAP.min(free / 4)))
    }

    fn run(
        &mut self,
        step: &Step,
        images: CUdeviceptr,
        targets: CUdeviceptr,
    ) -> Result<Outputs, String> {
        self.load_images(step, images)?;
        let ops = &step.program.ops;
        if !self.timed {
            for op in ops {
                self.execute(step, op, targets)?;
            }
            return Ok(self.outputs(step));
        }
        for (index, op) in ops.iter().enumerate() {
            let (start, end) = self.timing.around(index)?;
            Timing::record(start)?;
            self.execute(step, op, targets)?;
            Timing::record(end)?;
        }
        self.timing.read(ops, &mut self.operations)?;
        Ok(self.outputs(step))
    }

    /// Starts (`true`) or stops timing each operation of the steps that follow on the device.
    pub fn time_operations(&mut self, on: bool) {
        self.timed = on;
    }

    /// The operations timed since the last take: name, calls and device nanoseconds.
    pub fn take_operations(&mut self) -> Vec<(String, u64, u64)> {
        self.operations.take()
    }

    fn load_images(&self, step: &Step, images: CUdeviceptr) -> Result<(), String> {
        let dst = step.program.images;
        let bytes = step.region(dst).bytes;
        // SAFETY: both ranges hold the batch's images (the caller's tensor is N×C×H×W f32 of the step's shape).
        unsafe { driver::memcpy_dtod_async(step.at(dst), images, bytes, std::ptr::null_mut()) }
            .map_err(|e| format!("cuMemcpyDtoD: {e:?}"))
    }

    fn outputs(&self, step: &Step) -> Outputs {
        Outputs {
            loss: step.at(step.program.loss),
            logits: step.at(step.program.logits),
        }
    }

    fn execute(&mut self, step: &Step, op: &Op, targets: CUdeviceptr) -> Result<(), String> {
        let h = self.gpu.cudnn;
        let (ws, ws_bytes) = (ptr(self.workspace.ptr()), self.workspace.bytes());
        let x = |buf: Buf| ptr(step.at(buf));
        let d = |buf: Buf| step.desc(buf).raw();
        // SAFETY (every call below): descriptors describe the buffers passed with them, all allocated for this
        // step on the handle's device; parameters are views into the flat allocations at the plan's offsets.
        match *op {
            Op::Conv {
                layer,
                input,
                output,
            } => {
                let l = &step.program.layers[layer];
                let descs = &step.descs.layers[layer];
                check(
                    unsafe {
                        sys::cudnnConvolutionForward(
                            h,
                            one(),
                            d(input),
                            x(input),
                            descs.filter.raw(),
                            ptr(self.trainable.at(l.weight)),
                            descs.forward.raw(),
                            step.algos[layer].forward.algo,
                            ws,
                            ws_bytes,
                            zero(),
                            d(output),
                            x(output),
                        )
                    },
                    "convolution",
                )
            }
            Op::BatchNorm {
                layer,
                input,
                output,
                saved,
            } => {
                let l = &step.program.layers[layer];
                let bn = step.descs.layers[layer].batch_norm.raw();
                let (scale, shift) = (
                    ptr(self.trainable.at(l.scale)),
                    ptr(self.trainable.at(l.shift)),
                );
                let (mean, var) = (
                    ptr(self.statistics.at(l.running_mean)),
                    ptr(self.statistics.at(l.running_var)),
                );
                let mode = sys::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL;
                check(
                    match saved {
                        Some(saved) => unsafe {
                            sys::cudnnBatchNormalizationForwardTraining(
                                h,
                                mode,
                                one(),
                                zero(),
                                d(input),
                                x(input),
                                d(output),
                                x(output),
                                bn,
                                scale,
                                shift,
                                MOMENTUM,
                                mean,
                                var,
                                EPS,
                                x(saved.mean),
                                x(saved.invstd),
                            )
                        },
                        None => unsafe {
                            sys::cudnnBatchNormalizationForwardInference(
                                h,
                                mode,
                                one(),
                                zero(),
                                d(input),
                                x(input),
                                d(output),
                                x(output),
                                bn,
                                scale,
                                shift,
                                mean,
                                var,
                                EPS,
                            )
                        },
                    },
                    "batch norm",
                )
            }
            Op::Relu { data } => self.relu(step, data),
            Op::MaxPool { input, output, .. } => check(
                unsafe {
                    sys::cudnnPoolingForward(
                        h,
                        step.descs.stem_pool.raw(),
                        one(),
                        d(input),
                        x(input),
                        zero(),
                        d(output),
                        x(output),
                    )
                },
                "max pooling",
            ),
            Op::AddRelu { data, shortcut } => {
                self.add(step, shortcut, data)?;
                self.relu(step, data)
            }
            Op::AvgPool { input, output } => check(
                unsafe {
                    sys::cudnnPoolingForward(
                        h,
                        step.descs.global_pool.raw(),
                        one(),
                        d(input),
                        x(input),
                        zero(),
                        d(output),
                        x(output),
                    )
                },
                "average pooling",
            ),
            Op::Linear { input, output } => {
                let head = step.program.head;
                check(
                    unsafe {
                        sys::cudnnAddTensor(
                            h,
                            one(),
                            step.descs.bias.raw(),
                            ptr(self.trainable.at(head.bias)),
                            zero(),
                            d(output),
                            x(output),
                        )
                    },
                    "bias",
                )?;
                // Row-major logits (N×K) = features (N×F) · weightᵀ (F×K), as cuBLAS's column-major
                // logitsᵀ = weight · featuresᵀ; beta 1 keeps the bias.
                self.gemm(
                    (true, false),
                    (head.classes, step.batch(), head.features),
                    (self.trainable.at(head.weight), head.features),
                    (step.at(input), head.features),
                    (1.0, step.at(output), head.classes),
                )
            }
            Op::Loss { logits, loss } => {
                let (mut logits, mut targets, mut losses, mut loss) =
                    (step.at(logits), targets, self.losses.ptr(), step.at(loss));
                let mut classes = step.program.head.classes as i32;
                let mut n = step.batch() as i32;
                self.gpu.launch(
                    Kernel::CrossEntropyPerSample,
                    n as u32,
                    SAMPLE_THREADS,
                    &mut [
                        arg(&mut logits),
                        arg(&mut targets),
                        arg(&mut classes),
                        arg(&mut losses),
                    ],
                )?;
                self.gpu.launch(
                    Kernel::MeanOf,
                    1,
                    1,
                    &mut [arg(&mut losses), arg(&mut n), arg(&mut loss)],
                )
            }
            Op::LossBackward { logits, grad } => {
                let (mut logits, mut targets, mut grad) = (step.at(logits), targets, step.at(grad));
                let mut classes = step.program.head.classes as i32;
                let mut n = step.batch() as i32;
                self.gpu.launch(
                    Kernel::CrossEntropyGrad,
                    n as u32,
                    SAMPLE_THREADS,
                    &mut [
                        arg(&mut logits),
                        arg(&mut targets),
                        arg(&mut classes),
                        arg(&mut n),
                        arg(&mut grad),
                    ],
                )
            }
            Op::LinearBackward {
                grad_output,
                input,
                grad_input,
            } => {
                let head = step.program.head;
                let n = step.batch();
                // weight gradient (K×F) = gradᵀ (K×N) · features (N×F): column-major featuresᵀ · grad.
                self.gemm(
                    (false, true),
                    (head.features, head.classes, n),
                    (step.at(input), head.features),
                    (step.at(grad_output), head.classes),
                    (0.0, self.grads.at(head.weight), head.features),
                )?;
                check(
                    unsafe {
                        sys::cudnnConvolutionBackwardBias(
                            h,
                            one(),
                            d(grad_output),
                            x(grad_output),
                            zero(),
                            step.descs.bias.raw(),
                            ptr(self.grads.at(head.bias)),
                        )
                    },
                    "bias gradient",
                )?;
                // features' gradient (N×F) = grad (N×K) · weight (K×F): column-major weightᵀ · gradᵀ.
                self.gemm(
                    (false, false),
                    (head.features, n, head.classes),
                    (self.trainable.at(head.weight), head.features),
                    (step.at(grad_output), head.classes),
                    (0.0, step.at(grad_input), head.features),
                )
            }
            Op::AvgPoolBackward {
                grad_output,
                grad_input,
            } => {
                let s = step.program.tensor_shape(grad_input);
                let (mut from, mut to) = (step.at(grad_output), step.at(grad_input));
                let mut pixels = (s.h * s.w) as i32;
                let mut total = s.elements() as i64;
                self.gpu.launch(
                    Kernel::SpreadMean,
                    blocks(s.elements()),
                    THREADS,
                    &mut [
                        arg(&mut from),
                        arg(&mut to),
                        arg(&mut pixels),
                        arg(&mut total),
                    ],
                )
            }
            Op::ReluBackward { grad, output } => check(
                // In place (dx = dy, one descriptor); ReLU's output stands for its input: both are positive
                // at the same places.
                unsafe {
                    sys::cudnnActivationBackward(
                        h,
                        step.descs.relu.raw(),
                        one(),
                        d(output),
                        x(output),
                        d(grad),
                        x(grad),
                        d(output),
                        x(output),
                        zero(),
                        d(grad),
                        x(grad),
                    )
                },
                "ReLU gradient",
            ),
            Op::BatchNormBackward {
                layer,
                grad_output,
                input,
                saved,
                grad_input,
            } => {
                let l = &step.program.layers[layer];
                check(
                    unsafe {
                        sys::cudnnBatchNormalizationBackward(
                            h,
                            sys::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL,
                            one(),
                            zero(),
                            one(),
                            zero(),
                            d(input),
                            x(input),
                            d(grad_output),
                            x(grad_output),
                            d(grad_input),
                            x(grad_input),
                            step.descs.layers[layer].batch_norm.raw(),
                            ptr(self.trainable.at(l.scale)),
                            ptr(self.grads.at(l.scale)),
                            ptr(self.grads.at(l.shift)),
                            EPS,
                            x(saved.mean),
                            x(saved.invstd),
                        )
                    },
                    "batch-norm gradient",
                )
            }
            Op::ConvBackward {
                layer,
                grad_output,
                input,
                grad_input,
                accumulate,
            } => {
                let l = &step.program.layers[layer];
                let descs = &step.descs.layers[layer];
                let (data, filter) = step.algos[layer]
                    .backward
                    .expect("a training step's convolutions have backward algorithms");
                check(
                    unsafe {
                        sys::cudnnConvolutionBackwardFilter(
                            h,
                            one(),
                            d(input),
                            x(input),
                            d(grad_output),
                            x(grad_output),
                            descs.backward_filter.raw(),
                            filter.algo,
                            ws,
                            ws_bytes,
                            zero(),
                            descs.filter.raw(),
                            ptr(self.grads.at(l.weight)),
                        )
                    },
                    "convolution weight gradient",
                )?;
                let Some(grad_input) = grad_input else {
                    return Ok(());
                };
                check(
                    unsafe {
                        sys::cudnnConvolutionBackwardData(
                            h,
                            one(),
                            descs.filter.raw(),
                            ptr(self.trainable.at(l.weight)),
                            d(grad_output),
                            x(grad_output),
                            descs.backward_data.raw(),
                            data.algo,
                            ws,
                            ws_bytes,
                            if accumulate { one() } else { zero() },
                            d(grad_input),
                            x(grad_input),
                        )
                    },
                    "convolution input gradient",
                )
            }
            Op::MaxPoolBackward {
                grad_output,
                input,
                output,
                grad_input,
                ..
            } => check(
                unsafe {
                    sys::cudnnPoolingBackward(
                        h,
                        step.descs.stem_pool.raw(),
                        one(),
                        d(output),
                        x(output),
                        d(grad_output),
                        x(grad_output),
                        d(input),
                        x(input),
                        zero(),
                        d(grad_input),
                        x(grad_input),
                    )
                },
                "max-pooling gradient",
            ),
            Op::Accumulate { into, from } => self.add(step, from, into),
            Op::Sgd => self.sgd(),
        }
    }

    /// data = max(data, 0), in place.
    fn relu(&self, step: &Step, data: Buf) -> Result<(), String> {
        let (desc, at) = (step.desc(data).raw(), ptr(step.at(data)));
        // SAFETY: in place on one buffer with its own descriptor, which cuDNN allows.
        check(
            unsafe {
                sys::cudnnActivationForward(
                    self.gpu.cudnn,
                    step.descs.relu.raw(),
                    one(),
                    desc,
                    at,
                    zero(),
                    desc,
                    at,
                )
            },
            "ReLU",
        )
    }

    /// into += from (same shape).
    fn add(&self, step: &Step, from: Buf, into: Buf) -> Result<(), String> {
        // SAFETY: two buffers of the step, each with its descriptor.
        check(
            unsafe {
                sys::cudnnAddTensor(
                    self.gpu.cudnn,
                    one(),
                    step.desc(from).raw(),
                    ptr(step.at(from)),
                    one(),
                    step.desc(into).raw(),
                    ptr(step.at(into)),
                )
            },
            "addition",
        )
    }

    /// cuBLAS's column-major C (m×n) = op(A) · op(B) + beta·C, f32; each matrix as (address, leading dimension).
    fn gemm(
        &self,
        (trans_a, trans_b): (bool, bool),
        (m, n, k): (usize, usize, usize),
        (a, lda): (CUdeviceptr, usize),
        (b, ldb): (CUdeviceptr, usize),
        (beta, c, ldc): (f32, CUdeviceptr, usize),
    ) -> Result<(), String> {
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let int = |v: usize| i32::try_from(v).expect("a matrix dimension fits cuBLAS's int");
        // SAFETY: the three matrices are allocations of at least the described sizes on the handle's device.
        unsafe {
            blas::sgemm(
                self.gpu.blas,
                op(trans_a),
                op(trans_b),
                int(m),
                int(n),
                int(k),
                &ONE,
                a as *const f32,
                int(lda),
                b as *const f32,
                int(ldb),
                &beta,
                c as *mut f32,
                int(ldc),
            )
        }
        .map_err(|e| format!("cuBLAS sgemm: {e:?}"))
    }

    /// torch.optim.SGD over the whole trainable buffer in one kernel.
    fn sgd(&mut self) -> Result<(), String> {
        let o = self.optimiser;
        let count = self.plan.trainable_elements;
        let (mut params, mut grads, mut momentum) =
            (self.trainable.ptr(), self.grads.ptr(), self.momentum.ptr());
        let mut count_arg = count as i64;
        let (mut lr, mut m, mut wd) = (o.lr as f32, o.momentum as f32, o.weight_decay as f32);
        let mut first = i32::from(!self.stepped);
        self.gpu.launch(
            Kernel::Sgd,
            blocks(count),
            THREADS,
            &mut [
                arg(&mut params),
                arg(&mut grads),
                arg(&mut momentum),
                arg(&mut count_arg),
                arg(&mut lr),
                arg(&mut m),
                arg(&mut wd),
                arg(&mut first),
            ],
        )?;
        self.stepped = true;
        Ok(())
    }
}
