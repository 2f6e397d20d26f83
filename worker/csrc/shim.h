// What every shim between tch and libtorch shares: tensors cross the C boundary as tch's handles (`at::Tensor*`),
// results as new handles the caller owns, and a C++ exception never crosses it: it comes back as a malloc'd
// message (its first line) that the caller frees with `golow_free_error` (errors.cpp). Every entry point catches
// `std::exception` and then anything else (`unknown_error`). An error is never a null message: without memory even
// for that, the worker aborts (the monitor reports the signal) rather than read the failure as success.

#pragma once

#include <ATen/core/Tensor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

namespace {

inline char *error_message(const char *what) {
    // libtorch appends a C++ stack trace after the first line: the first line says what was wrong.
    size_t length = std::strcspn(what, "\n");
    char *message = static_cast<char *>(std::malloc(length + 1));
    if (message == nullptr) {
        std::fputs("golow-worker: out of memory while reporting a libtorch error\n", stderr);
        std::abort();
    }
    std::memcpy(message, what, length);
    message[length] = '\0';
    return message;
}

inline char *error_message(const std::exception &e) { return error_message(e.what()); }

// What libtorch threw that is not a std::exception.
inline char *unknown_error() { return error_message("libtorch threw something that is not a std::exception"); }

inline at::Tensor *handle(const at::Tensor &t) { return t.defined() ? new at::Tensor(t) : nullptr; }

} // namespace
