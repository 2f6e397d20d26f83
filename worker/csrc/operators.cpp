// What each operator of the steps golow profiles costs, through libtorch's own operator callbacks (a global
// RecordFunction callback): per operator name its calls, self time (its own, its children's excluded) and total time,
// and the most frequent shapes of its tensor inputs. The callback is added for a profiled step and removed after it,
// so that the other steps run without RecordFunction's bookkeeping. Times nest per thread (a thread-local stack), so
// an operator's children are taken out of its self time on the thread that ran them.
//
// Bounded: at most `kMaxNames` names are told apart (later ones fold into "(other operators)"), `kMaxShapes` shape
// strings per name, a stack `kMaxDepth` deep; what did not fit is counted as dropped.

#include <ATen/record_function.h>

#include "shim.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kMaxNames = 512;
constexpr size_t kMaxShapes = 8;
constexpr size_t kMaxDepth = 256;
constexpr size_t kMaxShapeBytes = 96;
constexpr const char *kOther = "(other operators)";

struct Totals {
    uint64_t calls = 0;
    uint64_t self_ns = 0;
    uint64_t total_ns = 0;
    std::vector<std::pair<std::string, uint64_t>> shapes;
};

struct Frame {
    const char *name;
    int64_t start_ns;
    int64_t children_ns;
    std::string shapes;
    // The recording this frame belongs to: a frame left by one that ended mid-operator is not closed by the next.
    uint64_t generation;
};

std::mutex table_mutex;
std::unordered_map<std::string, Totals> table;
uint64_t dropped = 0;
std::atomic<uint64_t> generation{0};
at::CallbackHandle callback = 0;
thread_local std::vector<Frame> stack;

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// "[16, 3, 32, 32] [64, 3, 7, 7]": the sizes of the first tensor inputs, cut to kMaxShapeBytes.
std::string shapes_of(const at::RecordFunction &fn) {
    std::string out;
    for (const auto &input : fn.inputs()) {
        if (!input.isTensor()) {
            continue;
        }
        const auto &tensor = input.toTensor();
        if (!tensor.defined()) {
            continue;
        }
        if (!out.empty()) {
            out += ' ';
        }
        out += '[';
        auto sizes = tensor.sizes();
        for (size_t i = 0; i < sizes.size(); ++i) {
            if (i > 0) {
                out += ", ";
            }
            out += std::to_string(sizes[i]);
        }
        out += ']';
        if (out.size() >= kMaxShapeBytes) {
            out.resize(kMaxShapeBytes);
            break;
        }
    }
    return out;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn) {
    if (stack.size() >= kMaxDepth) {
        stack.clear();
        std::lock_guard<std::mutex> lock(table_mutex);
        ++dropped;
    }
    stack.push_back(Frame{fn.name(), now_ns(), 0, shapes_of(fn), generation.load(std::memory_order_relaxed)});
    return nullptr;
}

void on_end(const at::RecordFunction &, at::ObserverContext *) {
    if (stack.empty()) {
        return;
    }
    Frame frame = std::move(stack.back());
    stack.pop_back();
    if (frame.generation != generation.load(std::memory_order_relaxed)) {
        return;
    }
    int64_t total = std::max<int64_t>(now_ns() - frame.start_ns, 0);
    int64_t self = std::max<int64_t>(total - frame.children_ns, 0);
    if (!stack.empty()) {
        stack.back().children_ns += total;
    }
    std::lock_guard<std::mutex> lock(table_mutex);
    auto found = table.find(frame.name);
    if (found == table.end()) {
        const char *name = table.size() < kMaxNames ? frame.name : kOther;
        found = table.try_emplace(name).first;
    }
    Totals &t = found->second;
    t.calls += 1;
    t.self_ns += static_cast<uint64_t>(self);
    t.total_ns += static_cast<uint64_t>(total);
    if (frame.shapes.empty()) {
        return;
    }
    auto shape = std::find_if(t.shapes.begin(), t.shapes.end(), [&](const auto &s) { return s.first == frame.shapes; });
    if (shape != t.shapes.end()) {
        shape->second += 1;
    } else if (t.shapes.size() < kMaxShapes) {
        t.shapes.emplace_back(std::move(frame.shapes), 1);
    } else {
        ++dropped;
    }
}

// `text` in memory the caller frees with golow_free_error (which is free()).
char *malloc_copy(const std::string &text) {
    char *copy = static_cast<char *>(std::malloc(text.size() + 1));
    if (copy == nullptr) {
        std::fputs("golow-worker: out of memory while taking operator records\n", stderr);
        std::abort();
    }
    std::memcpy(copy, text.c_str(), text.size() + 1);
    return copy;
}

// A JSON string's body: quotes, backslashes and control characters escaped.
void escape_into(std::string &out, const std::string &text) {
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
}

} // namespace

extern "C" {

// Starts recording the operators this process runs, with their input shapes.
char *golow_ops_begin() {
    try {
        if (callback != 0) {
            return nullptr;
        }
        generation.fetch_add(1, std::memory_order_relaxed);
        callback = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                                           .needsInputs(true)
                                           .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                                                    at::RecordScope::TORCHSCRIPT_FUNCTION,
                                                    at::RecordScope::USER_SCOPE}));
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

// Stops recording; what was recorded stays until taken.
char *golow_ops_end() {
    try {
        if (callback != 0) {
            at::removeCallback(callback);
            callback = 0;
        }
        generation.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

// Takes what was recorded since the last take, as JSON (malloc'd, freed with golow_free_error):
// {"dropped":N,"operators":[{"name":…,"calls":…,"self_ns":…,"total_ns":…,"shapes":[[shape,count],…]},…]}.
char *golow_ops_take(char **json) {
    try {
        std::unordered_map<std::string, Totals> taken;
        uint64_t lost;
        {
            std::lock_guard<std::mutex> lock(table_mutex);
            taken.swap(table);
            lost = dropped;
            dropped = 0;
        }
        std::string out = "{\"dropped\":" + std::to_string(lost) + ",\"operators\":[";
        bool first = true;
        for (const auto &[name, t] : taken) {
            if (!first) {
                out += ',';
            }
            first = false;
            out += "{\"name\":\"";
            escape_into(out, name);
            out += "\",\"calls\":" + std::to_string(t.calls) + ",\"self_ns\":" + std::to_string(t.self_ns) +
                   ",\"total_ns\":" + std::to_string(t.total_ns) + ",\"shapes\":[";
            for (size_t i = 0; i < t.shapes.size(); ++i) {
                out += i == 0 ? "[\"" : ",[\"";
                escape_into(out, t.shapes[i].first);
                out += "\"," + std::to_string(t.shapes[i].second) + "]";
            }
            out += "]}";
        }
        out += "]}";
        *json = malloc_copy(out);
        return nullptr;
    } catch (const std::exception &e) {
        return error_message(e);
    } catch (...) {
        return unknown_error();
    }
}

} // extern "C"
