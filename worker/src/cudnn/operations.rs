//! The framework-free level's own operations, as its operator breakdown names them: it runs no ATen operators, so
//! libtorch's callbacks see nothing of its step. Each program operation is named like the ATen operator PyTorch runs
//! for the same work on a GPU (`aten::cudnn_convolution`, `aten::convolution_backward`…); where golow fuses what
//! PyTorch does in several operators (the residual add and ReLU, softmax and the loss, the whole SGD update), the
//! name says so (`golow::…`). Times are summed per name over the profiled steps.

use std::collections::BTreeMap;

use super::program::Op;

impl Op {
    /// What the breakdown calls this operation.
    pub fn operator_name(&self) -> &'static str {
        match self {
            Op::Conv { .. } => "aten::cudnn_convolution",
            Op::BatchNorm { .. } => "aten::cudnn_batch_norm",
            Op::Relu { .. } => "aten::relu_",
            Op::MaxPool { .. } => "aten::max_pool2d_with_indices",
            Op::AddRelu { .. } => "golow::add_relu (aten::add_ + aten::relu_)",
            Op::AvgPool { .. } => "aten::adaptive_avg_pool2d",
            Op::Linear { .. } => "aten::addmm",
            Op::Loss { .. } => "golow::cross_entropy (aten::_log_softmax + aten::nll_loss)",
            Op::LossBackward { .. } => "golow::cross_entropy_backward",
            Op::LinearBackward { .. } => "golow::linear_backward (aten::mm, aten::sum)",
            Op::AvgPoolBackward { .. } => "aten::_adaptive_avg_pool2d_backward",
            Op::ReluBackward { .. } => "aten::threshold_backward",
            Op::BatchNormBackward { .. } => "aten::cudnn_batch_norm_backward",
            Op::ConvBackward { .. } => "aten::convolution_backward",
            Op::MaxPoolBackward { .. } => "aten::max_pool2d_with_indices_backward",
            Op::Accumulate { .. } => "aten::add_",
            Op::Sgd => "golow::sgd (torch.optim.SGD's update, one kernel)",
        }
    }
}

/// Calls and nanoseconds per operation name, from the profiled steps since the last take.
#[derive(Debug, Default)]
pub struct OperationTimes {
    by_name: BTreeMap<&'static str, (u64, u64)>,
}

impl OperationTimes {
    pub fn add(&mut self, op: &Op, ns: u64) {
        let (calls, total) = self.by_name.entry(op.operator_name()).or_default();
        *calls += 1;
        *total = total.saturating_add(ns);
    }

    /// Name, calls and nanoseconds of each operation timed since the last take.
    pub fn take(&mut self) -> Vec<(String, u64, u64)> {
        std::mem::take(&mut self.by_name)
            .into_iter()
            .map(|(name, (calls, ns))| (name.to_string(), calls, ns))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cudnn::plan::Plan;
    use crate::cudnn::program::Program;
    use golow_protocol::config::Model;

    #[test]
    fn a_training_step_s_operations_are_named_and_counted_like_autograd_s() {
        let plan = Plan::new(Model::Resnet50, 3, 10, 4, 64).unwrap();
        let program = Program::train(&plan);
        let mut times = OperationTimes::default();
        for op in &program.ops {
            times.add(op, 1_000);
        }
        let taken: BTreeMap<String, (u64, u64)> = times
            .take()
            .into_iter()
            .map(|(name, calls, ns)| (name, (calls, ns)))
            .collect();
        // ResNet-50's 53 convolutions, each with its batch norm, forward and backward, as autograd runs them.
        for name in [
            "aten::cudnn_convolution",
            "aten::cudnn_batch_norm",
            "aten::convolution_backward",
            "aten::cudnn_batch_norm_backward",
        ] {
            assert_eq!(taken[name].0, 53, "{name}: {taken:?}");
        }
        assert_eq!(taken["aten::max_pool2d_with_indices"].0, 1);
        assert_eq!(
            taken["golow::sgd (torch.optim.SGD's update, one kernel)"].0,
            1
        );
        let calls: u64 = taken.values().map(|t| t.0).sum();
        assert_eq!(calls as usize, program.ops.len());
        assert_eq!(
            taken.values().map(|t| t.1).sum::<u64>(),
            1_000 * calls,
            "every operation's time, once"
        );
        assert!(times.take().is_empty(), "taken: nothing left");
    }
}
