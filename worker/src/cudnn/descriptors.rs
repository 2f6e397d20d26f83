//! cuDNN's descriptors of the program's tensors and operations. Creating and setting a descriptor needs cuDNN's
//! library but no device and no handle, so everything here runs (and is tested) on a machine without a GPU: cuDNN's
//! own idea of each convolution's and pooling's output shape is checked against the plan's.

use std::collections::HashMap;

use cudarc::cudnn::{result, sys};

use super::plan::{Conv, Shape};
use super::program::{BufferKind, Program};

/// A cuDNN call's status as the one line the worker reports.
pub fn check(status: sys::cudnnStatus_t, what: &str) -> Result<(), String> {
    status.result().map_err(|e| format!("cuDNN {what}: {e:?}"))
}

fn dim(d: usize) -> i32 {
    i32::try_from(d).expect("a tensor dimension fits cuDNN's int")
}

/// Makes cuDNN's library loadable before anything calls it (cudarc panics on a library it cannot open).
pub fn load_library() -> Result<(), String> {
    super::libraries::preload(super::libraries::CUDNN)
}

/// A dense f32 NCHW tensor.
pub struct TensorDesc(sys::cudnnTensorDescriptor_t);

impl TensorDesc {
    pub fn nchw(s: Shape) -> Result<TensorDesc, String> {
        let desc = TensorDesc(
            result::create_tensor_descriptor()
                .map_err(|e| format!("cuDNN tensor descriptor: {e:?}"))?,
        );
        // SAFETY: a descriptor just created, owned by `desc`.
        unsafe {
            result::set_tensor4d_descriptor(
                desc.0,
                sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
                [dim(s.n), dim(s.c), dim(s.h), dim(s.w)],
            )
        }
        .map_err(|e| format!("cuDNN tensor {s:?}: {e:?}"))?;
        Ok(desc)
    }

    /// The per-channel shape cuDNN's spatial batch norm derives for `x` (scale, shift, statistics).
    pub fn batch_norm(x: &TensorDesc) -> Result<TensorDesc, String> {
        let desc = TensorDesc(
            result::create_tensor_descriptor()
                .map_err(|e| format!("cuDNN tensor descriptor: {e:?}"))?,
        );
        // SAFETY: both descriptors are alive and set.
        check(
            unsafe {
                sys::cudnnDeriveBNTensorDescriptor(
                    desc.0,
                    x.0,
                    sys::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL,
                )
            },
            "batch-norm descriptor",
        )?;
        Ok(desc)
    }

    pub fn raw(&self) -> sys::cudnnTensorDescriptor_t {
        self.0
    }

    /// N×C×H×W as cuDNN holds it.
    pub fn shape(&self) -> Result<Shape, String> {
        let mut data_type = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
        let mut d = [0i32; 8];
        let [n, c, h, w, ns, cs, hs, ws] = &mut d;
        // SAFETY: a set descriptor; every out-pointer is a live local.
        check(
            unsafe {
                sys::cudnnGetTensor4dDescriptor(self.0, &mut data_type, n, c, h, w, ns, cs, hs, ws)
            },
            "tensor dimensions",
        )?;
        Ok(shape(d[0], d[1], d[2], d[3]))
    }
}

impl Drop for TensorDesc {
    fn drop(&mut self) {
        // SAFETY: created by this value, destroyed once.
        let _ = unsafe { result::destroy_tensor_descriptor(self.0) };
    }
}

fn shape(n: i32, c: i32, h: i32, w: i32) -> Shape {
    let d = |v: i32| usize::try_from(v).unwrap_or(0);
    Shape {
        n: d(n),
        c: d(c),
        h: d(h),
        w: d(w),
    }
}

/// A convolution's weights: out × in × k × k, f32.
pub struct FilterDesc(sys::cudnnFilterDescriptor_t);

impl FilterDesc {
    pub fn of(conv: &Conv) -> Result<FilterDesc, String> {
        let desc = FilterDesc(
            result::create_filter_descriptor()
                .map_err(|e| format!("cuDNN filter descriptor: {e:?}"))?,
        );
        let k = dim(conv.kernel);
        // SAFETY: a descriptor just created, owned by `desc`.
        unsafe {
            result::set_filter4d_descriptor(
                desc.0,
                sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
                sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                [dim(conv.output.c), dim(conv.input.c), k, k],
            )
        }
        .map_err(|e| format!("cuDNN filter of {}: {e:?}", conv.name))?;
        Ok(desc)
    }

    pub fn raw(&self) -> sys::cudnnFilterDescriptor_t {
        self.0
    }
}

impl Drop for FilterDesc {
    fn drop(&mut self) {
        // SAFETY: created by this value, destroyed once.
        let _ = unsafe { result::destroy_filter_descriptor(self.0) };
    }
}

/// A 2-D cross-correlation (what deep learning calls convolution), f32 accumulation, no dilation, one group. It
/// starts with cuDNN's default math (TF32 on GPUs that have it, as PyTorch allows for convolutions by default;
/// `NVIDIA_TF32_OVERRIDE=0` turns it off for cuDNN and libtorch alike), which the algorithm search runs under; each
/// direction then runs with the math type the search timed its algorithm with (`set_math`), as PyTorch does.
pub struct ConvDesc(sys::cudnnConvolutionDescriptor_t);

impl ConvDesc {
    pub fn of(conv: &Conv) -> Result<ConvDesc, String> {
        let desc = ConvDesc(
            result::create_convolution_descriptor()
                .map_err(|e| format!("cuDNN convolution descriptor: {e:?}"))?,
        );
        let (p, s) = (dim(conv.pad), dim(conv.stride));
        // SAFETY: a descriptor just created, owned by `desc`.
        unsafe {
            result::set_convolution2d_descriptor(
                desc.0,
                p,
                p,
                s,
                s,
                1,
                1,
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
            )
            .and_then(|()| {
                result::set_convolution_math_type(desc.0, sys::cudnnMathType_t::CUDNN_DEFAULT_MATH)
            })
        }
        .map_err(|e| format!("cuDNN convolution {}: {e:?}", conv.name))?;
        Ok(desc)
    }

    pub fn raw(&self) -> sys::cudnnConvolutionDescriptor_t {
        self.0
    }

    /// The math (tensor cores or not) the algorithms run with this descriptor may use.
    pub fn set_math(&self, math: sys::cudnnMathType_t) -> Result<(), String> {
        // SAFETY: a descriptor this value owns.
        unsafe { result::set_convolution_math_type(self.0, math) }
            .map_err(|e| format!("cuDNN convolution math type {math:?}: {e:?}"))
    }

    /// The output shape cuDNN computes for input `x` and weights `w`.
    pub fn output(&self, x: &TensorDesc, w: &FilterDesc) -> Result<Shape, String> {
        let mut d = [0i32; 4];
        let [n, c, h, wd] = &mut d;
        // SAFETY: set descriptors; the out-pointers are live locals.
        check(
            unsafe { sys::cudnnGetConvolution2dForwardOutputDim(self.0, x.0, w.0, n, c, h, wd) },
            "convolution output",
        )?;
        Ok(shape(d[0], d[1], d[2], d[3]))
    }
}

impl Drop for ConvDesc {
    fn drop(&mut self) {
        // SAFETY: created by this value, destroyed once.
        let _ = unsafe { result::destroy_convolution_descriptor(self.0) };
    }
}

/// A 2-D pooling window.
pub struct PoolDesc(sys::cudnnPoolingDescriptor_t);

impl PoolDesc {
    /// ResNet's stem pooling: max over 3×3, stride 2, padding 1 (padding never wins).
    pub fn stem_max() -> Result<PoolDesc, String> {
        PoolDesc::new(
            sys::cudnnPoolingMode_t::CUDNN_POOLING_MAX,
            [3, 3],
            1,
            [2, 2],
        )
    }

    /// The mean over a whole h×w feature map.
    pub fn global_average(h: usize, w: usize) -> Result<PoolDesc, String> {
        let window = [dim(h), dim(w)];
        PoolDesc::new(
            sys::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
            window,
            0,
            window,
        )
    }

    fn new(
        mode: sys::cudnnPoolingMode_t,
        window: [i32; 2],
        pad: i32,
        stride: [i32; 2],
    ) -> Result<PoolDesc, String> {
        let desc = PoolDesc(
            result::create_pooling_descriptor()
                .map_err(|e| format!("cuDNN pooling descriptor: {e:?}"))?,
        );
        // SAFETY: a descriptor just created, owned by `desc`.
        check(
            unsafe {
                sys::cudnnSetPooling2dDescriptor(
                    desc.0,
                    mode,
                    sys::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                    window[0],
                    window[1],
                    pad,
                    pad,
                    stride[0],
                    stride[1],
                )
            },
            "pooling",
        )?;
        Ok(desc)
    }

    pub fn raw(&self) -> sys::cudnnPoolingDescriptor_t {
        self.0
    }

    /// The output shape cuDNN computes for input `x`.
    pub fn output(&self, x: &TensorDesc) -> Result<Shape, String> {
        let mut d = [0i32; 4];
        let [n, c, h, w] = &mut d;
        // SAFETY: set descriptors; the out-pointers are live locals.
        check(
            unsafe { sys::cudnnGetPooling2dForwardOutputDim(self.0, x.0, n, c, h, w) },
            "pooling output",
        )?;
        Ok(shape(d[0], d[1], d[2], d[3]))
    }
}

impl Drop for PoolDesc {
    fn drop(&mut self) {
        // SAFETY: created by this value, destroyed once.
        let _ = unsafe { sys::cudnnDestroyPoolingDescriptor(self.0) };
    }
}

/// ReLU.
pub struct ActivationDesc(sys::cudnnActivationDescriptor_t);

impl ActivationDesc {
    pub fn relu() -> Result<ActivationDesc, String> {
        let desc = ActivationDesc(
            result::create_activation_descriptor()
                .map_err(|e| format!("cuDNN activation descriptor: {e:?}"))?,
        );
        // SAFETY: a descriptor just created, owned by `desc`.
        unsafe {
            result::set_activation_descriptor(
                desc.0,
                sys::cudnnActivationMode_t::CUDNN_ACTIVATION_RELU,
                sys::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                0.0,
            )
        }
        .map_err(|e| format!("cuDNN ReLU: {e:?}"))?;
        Ok(desc)
    }

    pub fn raw(&self) -> sys::cudnnActivationDescriptor_t {
        self.0
    }
}

impl Drop for ActivationDesc {
    fn drop(&mut self) {
        // SAFETY: created by this value, destroyed once.
        let _ = unsafe { sys::cudnnDestroyActivationDescriptor(self.0) };
    }
}

/// Per layer: its weights, its convolution for each direction (each set to the math type of that direction's
/// algorithm), and its batch norm's per-channel shape.
pub struct LayerDescs {
    pub filter: FilterDesc,
    pub forward: ConvDesc,
    pub backward_data: ConvDesc,
    pub backward_filter: ConvDesc,
    pub batch_norm: TensorDesc,
}

/// Every descriptor one program's operations need: one per distinct tensor shape, one set per layer.
pub struct Descriptors {
    pub tensors: HashMap<Shape, TensorDesc>,
    pub layers: Vec<LayerDescs>,
    pub stem_pool: PoolDesc,
    pub global_pool: PoolDesc,
    /// The head's bias as 1×classes×1×1, broadcast over the logits.
    pub bias: TensorDesc,
    pub relu: ActivationDesc,
}

impl Descriptors {
    pub fn new(program: &Program) -> Result<Descriptors, String> {
        load_library()?;
        let mut tensors = HashMap::new();
        for kind in &program.buffers {
            if let BufferKind::Tensor(s) = *kind
                && !tensors.contains_key(&s)
            {
                tensors.insert(s, TensorDesc::nchw(s)?);
            }
        }
        let layers = program
            .layers
            .iter()
            .map(|l| {
                let output = TensorDesc::nchw(l.conv.output)?;
                Ok(LayerDescs {
                    filter: FilterDesc::of(&l.conv)?,
                    forward: ConvDesc::of(&l.conv)?,
                    backward_data: ConvDesc::of(&l.conv)?,
                    backward_filter: ConvDesc::of(&l.conv)?,
                    batch_norm: TensorDesc::batch_norm(&output)?,
                })
            })
            .collect::<Result<_, String>>()?;
        let last = program
            .layers
            .last()
            .map_or(program.input, |l| l.conv.output);
        Ok(Descriptors {
            tensors,
            layers,
            stem_pool: PoolDesc::stem_max()?,
            global_pool: PoolDesc::global_average(last.h, last.w)?,
            bias: TensorDesc::nchw(Shape {
                n: 1,
                c: program.head.classes,
                h: 1,
                w: 1,
            })?,
            relu: ActivationDesc::relu()?,
        })
    }

    /// The descriptor of a tensor of the program.
    pub fn tensor(&self, s: Shape) -> &TensorDesc {
        &self.tensors[&s]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cudnn::plan::Plan;
    use golow_protocol::config::Model;

    fn programs() -> Vec<Program> {
        let mut programs = Vec::new();
        for (model, channels, resolution, batch) in [
            (Model::Resnet18, 1, 28, 6),
            (Model::Resnet50, 3, 32, 16),
            (Model::Resnet50, 3, 224, 32),
            (Model::Resnet18, 3, 97, 5),
        ] {
            let plan = Plan::new(model, channels, 10, batch, resolution).unwrap();
            programs.push(Program::train(&plan));
            programs.push(Program::eval(&plan.with_batch(batch - 1)));
        }
        programs
    }

    #[test]
    fn cudnn_computes_every_shape_the_plan_does() {
        for program in programs() {
            let d = Descriptors::new(&program).unwrap();
            for (shape, desc) in &d.tensors {
                assert_eq!(desc.shape().unwrap(), *shape);
            }
            for (layer, descs) in program.layers.iter().zip(&d.layers) {
                let conv = &layer.conv;
                let input = TensorDesc::nchw(conv.input).unwrap();
                assert_eq!(
                    descs.forward.output(&input, &descs.filter).unwrap(),
                    conv.output,
                    "{} at {:?}",
                    conv.name,
                    program.input
                );
                assert_eq!(
                    descs.batch_norm.shape().unwrap(),
                    Shape {
                        n: 1,
                        c: conv.output.c,
                        h: 1,
                        w: 1
                    }
                );
            }
            let stem = &program.layers[0].conv;
            let pooled = d
                .stem_pool
                .output(&TensorDesc::nchw(stem.output).unwrap())
                .unwrap();
            let last = program.layers.last().unwrap().conv.output;
            let features = d
                .global_pool
                .output(&TensorDesc::nchw(last).unwrap())
                .unwrap();
            assert_eq!(features, Shape { h: 1, w: 1, ..last });
            assert_eq!(features.c, program.head.features);
            // The pooled stem is the first block's input.
            assert_eq!(pooled, program.layers[1].conv.input);
        }
    }

    #[test]
    fn a_shape_cudnn_refuses_is_an_error_not_a_panic() {
        load_library().unwrap();
        let x = TensorDesc::nchw(Shape {
            n: 2,
            c: 3,
            h: 8,
            w: 8,
        })
        .unwrap();
        let plan = Plan::new(Model::Resnet18, 3, 10, 2, 32).unwrap();
        // The stem's 7×7 weights over a 64-channel input that is given 3 channels: cuDNN says the shapes disagree.
        let mut conv = plan.stem.clone();
        conv.input.c = 64;
        let w = FilterDesc::of(&conv).unwrap();
        let c = ConvDesc::of(&conv).unwrap();
        let error = c.output(&x, &w).unwrap_err();
        assert!(error.starts_with("cuDNN convolution output: "), "{error}");
    }

    /// Each direction's descriptor carries the math type its algorithm was timed with, apart from the others.
    #[test]
    fn each_direction_keeps_its_own_math_type() {
        let program = programs().remove(0);
        let d = Descriptors::new(&program).unwrap();
        let layer = &d.layers[0];
        let math = |desc: &ConvDesc| {
            let mut math = sys::cudnnMathType_t::CUDNN_DEFAULT_MATH;
            // SAFETY: a live descriptor and out-pointer.
            check(
                unsafe { sys::cudnnGetConvolutionMathType(desc.raw(), &mut math) },
                "math type",
            )
            .unwrap();
            math
        };
        for desc in [&layer.forward, &layer.backward_data, &layer.backward_filter] {
            assert_eq!(math(desc), sys::cudnnMathType_t::CUDNN_DEFAULT_MATH);
        }
        layer
            .backward_data
            .set_math(sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH)
            .unwrap();
        layer
            .backward_filter
            .set_math(sys::cudnnMathType_t::CUDNN_FMA_MATH)
            .unwrap();
        assert_eq!(
            math(&layer.forward),
            sys::cudnnMathType_t::CUDNN_DEFAULT_MATH
        );
        assert_eq!(
            math(&layer.backward_data),
            sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH
        );
        assert_eq!(
            math(&layer.backward_filter),
            sys::cudnnMathType_t::CUDNN_FMA_MATH
        );
    }
}
