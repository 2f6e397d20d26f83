// The `aoti` level: a model that torch.export and AOTInductor compiled into a package, loaded and run by libtorch's
// own runtime (AOTIModelPackageLoader), which tch does not bind. The loader is handed to Rust as an opaque pointer
// it frees with `golow_aoti_free`; tensors and errors cross as in shim.h.

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "shim.h"

#include <string>
#include <vector>

extern "C" {

// Loads the package at `path` (its shared library is extracted under $TMPDIR); `*loader` is the runtime.
char *golow_aoti_load(const char *path, void **loader) {
    try {
        *loader = new torch::inductor::AOTIModelPackageLoader(path);
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

// Runs the packaged model on one input; `*output` is its first output (the logits).
char *golow_aoti_run(void *loader, const at::Tensor *input, at::Tensor **output) {
    try {
        auto outputs = static_cast<torch::inductor::AOTIModelPackageLoader *>(loader)->run({*input});
        if (outputs.empty()) {
            return error_message("the AOTInductor package returned no output");
        }
        *output = handle(outputs.front());
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

void golow_aoti_free(void *loader) { delete static_cast<torch::inductor::AOTIModelPackageLoader *>(loader); }

} // extern "C"
