"""What every Python-side part of golow shares with the Rust workers: the session's weights file, the
data cache, the seeded data order (bit-for-bit the Rust algorithm) and the event channel."""

import argparse
import json
import math
import os
import sys
import time

import torch

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


def apply_gpu_policy(cfg: dict) -> None:
    """cuDNN's benchmarking and TF32 as the session's policy says, the same as every other level is told: for the
    kernels this process runs, and for those Inductor chooses while it compiles."""
    policy = cfg["gpu_policy"]
    torch.backends.cudnn.benchmark = policy["cudnn_benchmark"]
    torch.backends.cudnn.allow_tf32 = policy["tf32"]
    torch.backends.cuda.matmul.allow_tf32 = policy["tf32"]


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


def finite_or_word(value):
    """`value` with every float that is not finite (a diverging run's loss) as the schema's word for it: "nan",
    "inf" or "-inf". json.dumps would write a bare NaN or Infinity, which is not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite_or_word(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_word(v) for v in value]
    return value


class Events:
    """The worker's end of the event channel: one JSON object per line on $GOLOW_EVENT_FD."""

    def __init__(self):
        fd = os.environ.get("GOLOW_EVENT_FD")
        self.out = os.fdopen(int(fd), "w") if fd is not None else sys.stdout

    def emit(self, event: dict, hold: bool = False):
        """Writes one event and flushes it, unless `hold`: then the next emit flushes it along with
        its own (for an event another follows at once, so that the monitor wakes once for both)."""
        self.out.write(json.dumps(finite_or_word(event), separators=(",", ":"), allow_nan=False) + "\n")
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
