"""The operator breakdown of golow's Python levels and of `--cmd` scripts (through the step hook): which steps are
profiled, the recording, and the `operators` windows. Shared by the pytorch worker and the hook, so it imports torch
only once a step is profiled, when the caller has long imported it."""

import json
import os
import sys
import time

_QUIET = "KINETO_LOG_LEVEL"


class Callbacks:
    """libtorch's operator callbacks through golow's library (libgolow_ops.so: the Rust levels' recorder, built
    against the torch the built-in Python levels import): a global RecordFunction callback added for a profiled step
    and removed after it, microseconds per operator."""

    def __init__(self, path):
        import ctypes
        self.ctypes = ctypes
        lib = ctypes.CDLL(path)
        for name in ("golow_py_ops_begin", "golow_py_ops_end", "golow_py_ops_take"):
            getattr(lib, name).restype = ctypes.c_void_p
        lib.golow_py_ops_take.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.golow_py_free.argtypes = [ctypes.c_void_p]
        self.lib = lib

    def _text(self, pointer):
        text = self.ctypes.string_at(pointer).decode(errors="replace")
        self.lib.golow_py_free(pointer)
        return text

    def _check(self, error):
        if error:
            raise RuntimeError("golow's operator callbacks: " + self._text(error))

    def start(self):
        self._check(self.lib.golow_py_ops_begin())

    def stop(self):
        """Stops recording; the operators recorded, as (name, calls, self µs, total µs, {shapes: calls}), and the
        calls and shapes the library could not keep."""
        self._check(self.lib.golow_py_ops_end())
        out = self.ctypes.c_void_p()
        self._check(self.lib.golow_py_ops_take(self.ctypes.byref(out)))
        taken = json.loads(self._text(out.value))
        ops = [(o["name"], o["calls"], o["self_ns"] / 1e3, o["total_ns"] / 1e3, dict(o["shapes"]))
               for o in taken["operators"]]
        return ops, taken["dropped"]


class Profiler:
    """torch.profiler (CPU activity, input shapes): what the hook uses in a user's script, whose torch golow's
    library was not built against, and the Python levels' fallback without the library."""

    def __init__(self):
        self.profiler = None
        self.quieted = None  # whether golow set _QUIET for the first profile (None: none yet)

    def start(self):
        import torch.profiler as profiler
        if self.quieted is None:
            # Kineto logs an error to the program's stderr when it first stops on a machine where torch's CUDA
            # build finds no GPU, at the level it reads then: golow's looking leaves no trace there, and a level
            # the program chose stays.
            self.quieted = _QUIET not in os.environ
            if self.quieted:
                os.environ[_QUIET] = "5"
        # acc_events: one profile per step, so nothing is cleared between cycles, and torch need not warn.
        self.profiler = profiler.profile(activities=[profiler.ProfilerActivity.CPU], record_shapes=True,
                                         acc_events=True)
        self.profiler.__enter__()

    def stop(self):
        """As Callbacks.stop."""
        profiler, self.profiler = self.profiler, None
        profiler.__exit__(None, None, None)
        if self.quieted:
            self.quieted = False
            os.environ.pop(_QUIET, None)
        ops = []
        for e in profiler.key_averages(group_by_input_shape=True):
            shapes = " ".join(str(list(s)) for s in (e.input_shapes or []) if s)[:96]
            ops.append((e.key, e.count, e.self_cpu_time_total, e.cpu_time_total, {shapes: e.count} if shapes else {}))
        return ops, 0


class Operators:
    """The operator breakdown of a Python level: one step in `every` is recorded from `first` (by default the first
    past the warm-up), by golow's library of libtorch's operator callbacks where `library` names it, else by
    torch.profiler, only while the model computes, as long as what looking took stays within BUDGET of the time since
    the first profiled step (starting, stopping and parsing a torch.profiler profile costs a ResNet-50 step at 32 px
    about three times its compute; the callbacks, microseconds); once a window (1 s) has passed, what those steps ran
    goes out as one `operators` event: per operator its calls, self and total time and its most frequent input shapes,
    largest self time first, capped like the collector's kernels."""

    WINDOW_S = 1.0
    BUDGET = 0.02
    MAX_OPERATORS = 64
    MAX_NAMES = 512
    MAX_SHAPES = 8  # input shapes told apart per name; calls of others count as dropped
    OTHER = "(other operators)"

    def __init__(self, every, warmup, library=None, first=None):
        self.every, self.warmup = every, warmup
        self.first = warmup if first is None else max(first, warmup)
        self.recorder = Profiler()
        if library and every > 0:
            try:
                self.recorder = Callbacks(library)
            except OSError as e:  # a library built against another torch: torch.profiler still works
                print(f"golow: {library} does not load ({e}); recording operators with torch.profiler",
                      file=sys.stderr, flush=True)
        self.recording = False
        self.steps, self.compute_ms, self.dropped = 0, 0.0, 0
        self.profiled = 0  # steps profiled in all
        self.last_step = None  # the last step offered
        self.table = {}  # name -> [calls, self µs, total µs, {shapes: calls}]
        self.since = time.monotonic()
        # Seconds spent starting, stopping and reading profiles, and when the first began.
        self.spent, self.started = 0.0, None

    def profiles(self, step):
        if self.every <= 0 or step < self.first or (step - self.first) % self.every:
            return False
        return self.started is None or self.spent <= self.BUDGET * (time.perf_counter() - self.started)

    def begin(self, step):
        """Starts recording, just before step `step` computes, when it is profiled; whether it does."""
        self.last_step = step
        if self.profiles(step):
            began = time.perf_counter()
            if self.started is None:
                self.started = began
                # Whatever the recorder sets up the first time it runs, it sets up here, outside any step.
                self.recorder.start()
                self.recorder.stop()
            self.recorder.start()
            self.recording = True
            self.spent += time.perf_counter() - began
        return self.recording

    def why_none(self):
        """Why no step was profiled, for a process that ends without one."""
        if self.last_step is None or self.last_step < self.first:
            return f"the run ended after {self.last_step or 0} steps, before step {self.first}, the first to profile"
        return "no step was profiled within the time looking may take"

    def end(self, compute_ms):
        """Stops recording after the model computed, in `compute_ms`; whether the step was profiled."""
        if not self.recording:
            return False
        self.recording = False
        began = time.perf_counter()
        ops, dropped = self.recorder.stop()
        self.steps += 1
        self.profiled += 1
        self.compute_ms += compute_ms
        self.dropped += dropped
        for name, calls, self_us, total_us, shapes in ops:
            name = name[:128]
            row = self.table.get(name)
            if row is None:
                if len(self.table) >= self.MAX_NAMES:
                    self.dropped += calls
                    continue
                row = self.table[name] = [0, 0.0, 0.0, {}]
            row[0] += calls
            row[1] += self_us
            row[2] += total_us
            for form, count in shapes.items():
                if form in row[3] or len(row[3]) < self.MAX_SHAPES:
                    row[3][form] = row[3].get(form, 0) + count
                else:
                    self.dropped += count
        self.spent += time.perf_counter() - began
        return True

    def abandon(self):
        """Stops a recording whose step never ended (the program is exiting), keeping nothing of it: an active
        profiler torn down with the interpreter crashes it."""
        if self.recording:
            self.recording = False
            self.recorder.stop()

    def window(self, now=False):
        """The `operators` event once a window is due (or at once when `now`); None without a profiled step."""
        if self.steps == 0 or not (now or time.monotonic() - self.since >= self.WINDOW_S):
            return None
        rows = sorted(self.table.items(), key=lambda kv: (-kv[1][1], kv[0]))
        named, rest = rows[: self.MAX_OPERATORS - 1], rows[self.MAX_OPERATORS - 1:]
        ops = [dict(name=n, calls=r[0], self_ns=int(r[1] * 1e3), total_ns=int(r[2] * 1e3),
                    shapes=max(r[3].items(), key=lambda kv: kv[1])[0] if r[3] else "") for n, r in named]
        if rest:
            ops.append(dict(name=self.OTHER, calls=sum(r[0] for _, r in rest),
                            self_ns=int(sum(r[1] for _, r in rest) * 1e3),
                            total_ns=int(sum(r[2] for _, r in rest) * 1e3), shapes=""))
        event = dict(type="operators", steps=self.steps, compute_ms=self.compute_ms, every=self.every,
                     operators=ops, dropped=self.dropped)
        self.steps, self.compute_ms, self.dropped, self.table = 0, 0.0, 0, {}
        self.since = time.monotonic()
        return event

    def send(self, emit, now=False):
        """Emits the window through `emit` once it is due (at once when `now`)."""
        window = self.window(now)
        if window:
            emit(window)
