// The session's GPU policy for everything libtorch runs in this process (shim.h for the error convention): cuDNN's
// benchmarking of convolution algorithms and TF32 for f32 convolutions and matrix products, as the Python levels
// set `torch.backends.cudnn.benchmark` and the `allow_tf32` flags.

#include <ATen/Context.h>

#include "shim.h"

extern "C" char *golow_set_gpu_policy(bool cudnn_benchmark, bool tf32) {
    try {
        auto &context = at::globalContext();
        context.setBenchmarkCuDNN(cudnn_benchmark);
        context.setAllowTF32CuDNN(tf32);
        context.setAllowTF32CuBLAS(tf32);
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}
