// What the `aten` level needs of libtorch and tch does not expose: the backward kernels (tch's generator leaves out
// every `*_backward` operator), called as autograd calls them, and SGD's update written as torch::optim::SGD
// writes it (tch has no add with a scale, which that update is made of). Tensors cross as tch's handles
// (`at::Tensor*`); results are new handles the caller owns. Errors come back as in shim.h.

#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/nll_loss_backward.h>
#include <ATen/ops/nll_loss_forward.h>
#include <ATen/ops/ones_like.h>

#include "shim.h"

#include <tuple>

extern "C" {

// Gradients of a 2-D convolution without bias (dilation 1, one group) with respect to its input (when
// `grad_input` is not null) and its weight.
char *golow_convolution_backward(const at::Tensor *grad_output, const at::Tensor *input, const at::Tensor *weight,
                                 int64_t stride, int64_t padding, at::Tensor **grad_input,
                                 at::Tensor **grad_weight) {
    try {
        auto grads = at::convolution_backward(*grad_output, *input, *weight, c10::nullopt, {stride, stride},
                                              {padding, padding}, {1, 1}, false, {0, 0}, 1,
                                              {grad_input != nullptr, true, false});
        if (grad_input != nullptr) {
            *grad_input = handle(std::get<0>(grads));
        }
        *grad_weight = handle(std::get<1>(grads));
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

// Gradients of batch norm in training mode (batch statistics, saved by `native_batch_norm`) with respect to its
// input, scale and shift.
char *golow_batch_norm_backward(const at::Tensor *grad_output, const at::Tensor *input, const at::Tensor *weight,
                                const at::Tensor *save_mean, const at::Tensor *save_invstd, double eps,
                                at::Tensor **grad_input, at::Tensor **grad_weight, at::Tensor **grad_bias) {
    try {
        auto grads = at::native_batch_norm_backward(*grad_output, *input, *weight, c10::nullopt, c10::nullopt,
                                                    *save_mean, *save_invstd, true, eps, {true, true, true});
        *grad_input = handle(std::get<0>(grads));
        *grad_weight = handle(std::get<1>(grads));
        *grad_bias = handle(std::get<2>(grads));
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

// The gradient of the mean cross-entropy of `logits` (N×classes) against `targets` with respect to the logits:
// log-softmax and negative log-likelihood backward, as autograd goes through them.
char *golow_cross_entropy_backward(const at::Tensor *logits, const at::Tensor *targets, at::Tensor **grad) {
    try {
        auto log_probabilities = at::_log_softmax(*logits, 1, false);
        auto [loss, total_weight] =
            at::nll_loss_forward(log_probabilities, *targets, c10::nullopt, at::Reduction::Mean, -100);
        auto grad_log_probabilities = at::nll_loss_backward(at::ones_like(loss), log_probabilities, *targets,
                                                            c10::nullopt, at::Reduction::Mean, -100, total_weight);
        *grad = handle(at::_log_softmax_backward_data(grad_log_probabilities, log_probabilities, 1,
                                                      log_probabilities.scalar_type()));
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

// One SGD step over each of `count` parameters (torch::optim::SGD's arithmetic, dampening 0, not Nesterov),
// leaving the gradients as they are; `first` makes the momentum buffers, each a copy of its first direction, as
// torch does. Each weight-decayed direction goes into the front of `scratch` (as many values as the largest
// parameter; null without weight decay) in turn, where torch's `grad.add(param, wd)` allocates one anew each time.
char *golow_sgd_step(at::Tensor *const *params, at::Tensor *const *grads, at::Tensor *const *momentum_buffers,
                     at::Tensor *scratch, size_t count, double lr, double momentum, double weight_decay,
                     bool first) {
    try {
        for (size_t i = 0; i < count; ++i) {
            at::Tensor step = *grads[i];
            if (weight_decay != 0) {
                at::Tensor direction = scratch->narrow(0, 0, params[i]->numel()).view(params[i]->sizes());
                at::add_out(direction, *grads[i], *params[i], weight_decay);
                step = direction;
            }
            if (momentum != 0) {
                if (first) {
                    *momentum_buffers[i] = step.clone();
                } else {
                    momentum_buffers[i]->mul_(momentum).add_(step);
                }
                step = *momentum_buffers[i];
            }
            params[i]->add_(step, -lr);
        }
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

} // extern "C"
