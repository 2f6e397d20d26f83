"""The operator breakdown of golow's Python levels and of `--cmd` scripts (through the step hook): which steps are
profiled, the profiles, and the `operators` windows. Shared by the pytorch worker and the hook, so it imports torch
only once a step is profiled, when the caller has long imported it."""

import os
import time

_QUIET = "KINETO_LOG_LEVEL"


class Operators:
    """The operator breakdown of a Python level: one step in `every` past the warm-up is profiled with
    torch.profiler (CPU activity, input shapes), only while the model computes, as long as what looking took stays
    within BUDGET of the time since the first profiled step (starting, stopping and parsing a profile costs a
    ResNet-50 step at 32 px about three times its compute); once a window (1 s) has passed, what those steps ran goes
    out as one `operators` event: per operator its calls, self and total time and its most frequent input shapes,
    largest self time first, capped like the collector's kernels."""

    WINDOW_S = 1.0
    BUDGET = 0.02
    MAX_OPERATORS = 64
    MAX_NAMES = 512
    MAX_SHAPES = 8  # input shapes told apart per name; calls of others count as dropped
    OTHER = "(other operators)"

    def __init__(self, every, warmup):
        self.every, self.warmup = every, warmup
        self.profiler = None
        self.steps, self.compute_ms, self.dropped = 0, 0.0, 0
        self.table = {}
        self.since = time.monotonic()
        # Seconds spent starting, stopping and reading profiles, and when the first began.
        self.spent, self.started = 0.0, None
        self.quieted = None  # whether golow set _QUIET for the first profile (None: none yet)

    def profiles(self, step):
        if self.every <= 0 or step < self.warmup or (step - self.warmup) % self.every:
            return False
        return self.started is None or self.spent <= self.BUDGET * (time.perf_counter() - self.started)

    def begin(self, step):
        if self.profiles(step):
            began = time.perf_counter()
            if self.started is None:
                self.started = began
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
            self.spent += time.perf_counter() - began

    def end(self, compute_ms):
        """Stops profiling after the model computed, in `compute_ms`; whether the step was profiled."""
        profiler, self.profiler = self.profiler, None
        if profiler is None:
            return False
        began = time.perf_counter()
        profiler.__exit__(None, None, None)
        if self.quieted:
            self.quieted = False
            os.environ.pop(_QUIET, None)
        self.steps += 1
        self.compute_ms += compute_ms
        for e in profiler.key_averages(group_by_input_shape=True):
            name = e.key[:128]
            row = self.table.get(name)
            if row is None:
                if len(self.table) >= self.MAX_NAMES:
                    self.dropped += e.count
                    continue
                row = self.table[name] = [0, 0.0, 0.0, {}]
            row[0] += e.count
            row[1] += e.self_cpu_time_total
            row[2] += e.cpu_time_total
            shapes = " ".join(str(list(s)) for s in (e.input_shapes or []) if s)[:96]
            if shapes in row[3] or (shapes and len(row[3]) < self.MAX_SHAPES):
                row[3][shapes] = row[3].get(shapes, 0) + e.count
            elif shapes:
                self.dropped += e.count
        self.spent += time.perf_counter() - began
        return True

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
