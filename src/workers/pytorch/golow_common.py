"""What every Python-side part of golow shares with the Rust workers: the session's weights file, the
data cache, the seeded data order (bit-for-bit the Rust algorithm) and the event channel."""

import argparse
import json
import os
import sys
import time

import torch
import torch.profiler

import resnet

_MASK = 0xFFFFFFFFFFFFFFFF
_GOLDEN = 0x9E3779B97F4A7C15


def epoch_order(seed: int, epoch: int, n: int) -> list:
    """Fisher-Yates driven by splitmix64, identical to golow's Rust `epoch_order`."""
    state = (seed + epoch * _GOLDEN) & _MASK
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        state = (state + _GOLDEN) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        z ^= z >> 31
        j = z % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "U8": torch.uint8,
}


def load_safetensors(path: str) -> dict:
    """Reads a safetensors file with torch alone (no extra package on the worker's python)."""
    with open(path, "rb") as f:
        raw = f.read()
    header_len = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + header_len])
    body = bytearray(raw[8 + header_len :])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES[info["dtype"]]
        start, end = info["data_offsets"]
        count = (end - start) // torch.empty(0, dtype=dtype).element_size()
        flat = torch.frombuffer(body, dtype=dtype, offset=start, count=count) if count else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"]).clone()
    return tensors


def session_config() -> dict:
    """The worker config named by `--config` on the command line of a step that prepares the session's model."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    with open(parser.parse_args().config) as f:
        return json.load(f)


def inductor_cache() -> tuple:
    """What Inductor's caches (FX graphs, AOTAutograd) have found and built so far in this process: (hits, misses)."""
    from torch._dynamo.utils import counters  # only where something compiles: eager workers never import Dynamo

    inductor, aot = counters["inductor"], counters["aot_autograd"]
    return (inductor["fxgraph_cache_hit"] + aot["autograd_cache_hit"],
            inductor["fxgraph_cache_miss"] + aot["autograd_cache_miss"])


def build_model(cfg: dict) -> torch.nn.Module:
    """The session's model with the session's initial weights."""
    model = resnet.build(cfg["model"], cfg["channels"], cfg["classes"])
    missing, unexpected = model.load_state_dict(load_safetensors(cfg["weights"]), strict=False)
    # torchvision-layout batch norm counts batches; golow's weights file (written by tch) does not.
    missing = [m for m in missing if not m.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise RuntimeError(f"weights {cfg['weights']} do not fit the model: missing {missing}, unexpected {unexpected}")
    return model


class Split:
    def __init__(self, directory: str, name: str, meta: dict, count: int):
        c, r = meta["channels"], meta["resolution"]
        images = os.path.join(directory, f"{name}_images.u8")
        labels = os.path.join(directory, f"{name}_labels.i64")
        self.images = torch.from_file(images, shared=False, size=count * c * r * r, dtype=torch.uint8).view(count, c, r, r)
        self.labels = torch.from_file(labels, shared=False, size=count, dtype=torch.int64)
        self.count = count


class DataCache:
    """The session's decoded dataset; batches are built with the same tensor operations as in Rust."""

    def __init__(self, directory: str):
        with open(os.path.join(directory, "meta.json")) as f:
            self.meta = json.load(f)
        self.train = Split(directory, "train", self.meta, self.meta["train_count"])
        self.test = Split(directory, "test", self.meta, self.meta["test_count"])
        c = self.meta["channels"]
        self.mean = torch.tensor(self.meta["mean"], dtype=torch.float32).view(1, c, 1, 1)
        self.std = torch.tensor(self.meta["std"], dtype=torch.float32).view(1, c, 1, 1)

    def split(self, phase: str) -> Split:
        return self.train if phase == "train" else self.test

    def batch(self, phase: str, indices: list, pin: bool):
        split = self.split(phase)
        idx = torch.tensor(indices, dtype=torch.int64)
        inputs = split.images.index_select(0, idx).to(torch.float32) / 255.0
        inputs = (inputs - self.mean) / self.std
        targets = split.labels.index_select(0, idx)
        if pin:
            return inputs.pin_memory(), targets.pin_memory()
        return inputs, targets


class Events:
    """The worker's end of the event channel: one JSON object per line on $GOLOW_EVENT_FD."""

    def __init__(self):
        fd = os.environ.get("GOLOW_EVENT_FD")
        self.out = os.fdopen(int(fd), "w") if fd is not None else sys.stdout

    def emit(self, event: dict, hold: bool = False):
        """Writes one event and flushes it, unless `hold`: then the next emit flushes it along with
        its own (for an event another follows at once, so that the monitor wakes once for both)."""
        self.out.write(json.dumps(event, separators=(",", ":")) + "\n")
        if not hold:
            self.out.flush()


class Turns:
    """The alternating schedule: run the granted steps, report the end of the turn, wait for the next."""

    def __init__(self):
        fd = os.environ.get("GOLOW_CONTROL_FD")
        self.control = os.fdopen(int(fd), "r") if fd is not None else None
        self.granted = 0

    def turn_over(self) -> bool:
        return self.control is not None and self.granted == 0

    def wait(self) -> bool:
        """True to go on, False to stop (asked to, or the monitor is gone)."""
        line = self.control.readline().strip()
        if line.startswith("go "):
            self.granted = int(line[3:])
            return True
        if line == "stop" or line == "":
            return False
        raise RuntimeError(f"invalid control line {line!r}")

    def took_step(self):
        self.granted = max(0, self.granted - 1)


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
    OTHER = "(other operators)"

    def __init__(self, every, warmup, process=None):
        self.every, self.warmup, self.process = every, warmup, process
        self.profiler = None
        self.steps, self.compute_ms, self.dropped = 0, 0.0, 0
        self.table = {}
        self.since = time.monotonic()
        # Seconds spent starting, stopping and reading profiles, and when the first began.
        self.spent, self.started = 0.0, None

    def profiles(self, step):
        if self.every <= 0 or step < self.warmup or (step - self.warmup) % self.every:
            return False
        return self.started is None or self.spent <= self.BUDGET * (time.perf_counter() - self.started)

    def begin(self, step):
        if self.profiles(step):
            began = time.perf_counter()
            if self.started is None:
                self.started = began
            self.profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                   record_shapes=True)
            self.profiler.__enter__()
            self.spent += time.perf_counter() - began

    def end(self, compute_ms):
        """Stops profiling after the model computed, in `compute_ms`; whether the step was profiled."""
        profiler, self.profiler = self.profiler, None
        if profiler is None:
            return False
        began = time.perf_counter()
        profiler.__exit__(None, None, None)
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
            if shapes:
                row[3][shapes] = row[3].get(shapes, 0) + e.count
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

    def send(self, events, now=False):
        """Emits the window on `events` once it is due (at once when `now`)."""
        window = self.window(now)
        if window:
            events.emit(window)
