"""Tests for the pytorch worker (src/workers/pytorch/worker.py) as golow starts it, on a session made small: its
config, data cache and weights, and a control channel granting turns. Every event it writes is checked against the
schema of what the monitor reads on a worker's event channel.

Run from the repository root:
    .venv/bin/python -m unittest discover --start-directory tests/python --top-level-directory tests/python -v
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

import event_schema

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WORKERS = os.path.join(ROOT, "src", "workers", "pytorch")
sys.path.insert(0, WORKERS)

import resnet  # noqa: E402

CHANNELS, CLASSES, RESOLUTION = 3, 4, 8
SAFETENSORS_DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def write_weights(path, model):
    """The model's initial weights as golow's weights file holds them: safetensors."""
    header, chunks, offset = {}, [], 0
    for name, tensor in model.state_dict().items():
        data = tensor.contiguous().numpy().tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little") + encoded + b"".join(chunks))


def write_data_cache(directory, train_count, test_count):
    """A decoded dataset as golow's data cache holds it: raw images and labels per split, and what they are."""
    os.makedirs(directory)
    generator = torch.Generator().manual_seed(0)
    for split, count in (("train", train_count), ("test", test_count)):
        images = torch.randint(0, 256, (count, CHANNELS, RESOLUTION, RESOLUTION), dtype=torch.uint8,
                               generator=generator)
        labels = torch.randint(0, CLASSES, (count,), dtype=torch.int64, generator=generator)
        with open(os.path.join(directory, f"{split}_images.u8"), "wb") as f:
            f.write(images.numpy().tobytes())
        with open(os.path.join(directory, f"{split}_labels.i64"), "wb") as f:
            f.write(labels.numpy().tobytes())
    with open(os.path.join(directory, "meta.json"), "w") as f:
        json.dump({"channels": CHANNELS, "resolution": RESOLUTION, "train_count": train_count,
                   "test_count": test_count, "mean": [0.5] * CHANNELS, "std": [0.25] * CHANNELS}, f)


class WorkerTest(unittest.TestCase):
    def test_every_event_of_a_small_session_is_one_the_monitor_reads(self):
        """Two training steps per epoch over three steps, granted two then one: both turns' ends, both epochs' (the
        second cut short by the end of the run), and one step in two past the warm-up profiled."""
        with tempfile.TemporaryDirectory() as tmp:
            write_data_cache(os.path.join(tmp, "data"), train_count=4, test_count=2)
            torch.manual_seed(0)
            write_weights(os.path.join(tmp, "weights.safetensors"), resnet.build("resnet18", CHANNELS, CLASSES))
            config = dict(model="resnet18", mode="train", dataset="synthetic", data_dir=os.path.join(tmp, "data"),
                          weights=os.path.join(tmp, "weights.safetensors"), torchscript=None, channels=CHANNELS,
                          classes=CLASSES, batch_size=2, resolution=RESOLUTION, steps=3, warmup=1, device="cpu",
                          threads=1, seed=7, pinned=False, optimiser=dict(lr=0.01, momentum=0.9, weight_decay=5e-4),
                          gpu_policy=dict(cudnn_benchmark=True, tf32=True), compile_mode="default", ops_every=2)
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(config, f)
            control, grants = os.pipe()
            with os.fdopen(grants, "w") as f:
                f.write("go 2\ngo 1\n")
            env = dict(os.environ, GOLOW_CONTROL_FD=str(control), PYTHONDONTWRITEBYTECODE="1")
            env.pop("GOLOW_EVENT_FD", None)  # its events on stdout
            try:
                done = subprocess.run(
                    [sys.executable, os.path.join(WORKERS, "worker.py"), "--config", os.path.join(tmp, "config.json")],
                    capture_output=True, text=True, env=env, pass_fds=(control,), timeout=300)
            finally:
                os.close(control)
        self.assertEqual(done.returncode, 0, done.stderr)
        events = [event_schema.worker_line(line) for line in done.stdout.splitlines()]
        self.assertEqual([e["type"] for e in events if e["type"] != "operators"],
                         ["hello", "turn_end", "step", "step", "epoch", "turn_end", "step", "epoch", "exit"])
        hello = events[0]
        self.assertEqual((hello["impl"], hello["device"], hello["config"]), ("pytorch", "cpu", config))
        steps = [e for e in events if e["type"] == "step"]
        self.assertEqual([(s["step"], s["epoch"], s["warmup"]) for s in steps], [(0, 0, True), (1, 0, False),
                                                                                 (2, 1, False)])
        self.assertEqual([e["complete"] for e in events if e["type"] == "epoch"], [True, False])
        self.assertEqual([e["steps_done"] for e in events if e["type"] == "turn_end"], [0, 2])
        profiled = [s["step"] for s in steps if s.get("profiled")]
        self.assertEqual(profiled, [1], "the first step past the warm-up, within the profiler's budget")
        windows = [e for e in events if e["type"] == "operators"]
        self.assertEqual(sum(w["steps"] for w in windows), len(profiled))
        self.assertEqual(events[-1], {"type": "exit", "status": "ok", "message": None})


if __name__ == "__main__":
    unittest.main()
