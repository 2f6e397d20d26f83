"""Tests for the compile worker's account of torch.compile (src/workers/pytorch/worker.py's Compiler): real torch,
real Inductor, a real C++ compiler, in a fresh interpreter with a cold cache of its own.

Run from the repository root:
    .venv/bin/python -m unittest discover --start-directory tests/python --top-level-directory tests/python -v
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import event_schema

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WORKERS = os.path.join(ROOT, "src", "workers", "pytorch")

# A small model through a training step at batch 4, another at 4, one at 3 (a new shape: a guard fails), then an
# evaluation (the switch to eval mode fails another); each event on stdout.
SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    sys.path.insert(0, sys.argv[1])
    from golow_common import Events
    from worker import Compiler, compile_model

    torch.set_num_threads(1)
    events = Events()
    compiler = Compiler(events)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 2))
    compiled = compile_model(model, "default")
    for step, batch in enumerate([4, 4, 3]):
        compiler.at(step, "train")
        compiled(torch.randn(batch, 3, 8, 8)).sum().backward()
        events.emit(dict(type="marker", step=step))
    compiler.at(None, "eval")
    compiled.eval()
    with torch.no_grad():
        compiled(torch.randn(4, 3, 8, 8))
    """
)


class CompilerTest(unittest.TestCase):
    def test_compilations_are_reported_as_they_begin_and_end_with_the_step_they_fell_in(self):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PYTHONDONTWRITEBYTECODE="1")
            env.pop("GOLOW_EVENT_FD", None)
            done = subprocess.run([sys.executable, "-c", SCRIPT, WORKERS], capture_output=True, text=True,
                                  env=env, timeout=600)
        self.assertEqual(done.returncode, 0, done.stderr)
        events = [json.loads(line) for line in done.stdout.splitlines()]
        # The markers are this test's own; the rest are the worker's.
        compilations = [event_schema.worker_event(e) for e in events if e["type"] != "marker"]
        seen = [(e["type"], e.get("trigger"), e.get("recompile"), e.get("step"), e.get("phase")) for e in compilations]
        markers = [i for i, e in enumerate(events) if e["type"] == "marker"]
        self.assertEqual(seen, [
            ("compiling", "dynamo", None, 0, "train"),
            ("compile", "dynamo", False, 0, "train"),
            ("compiling", "lazy_backward", None, 0, "train"),
            ("compile", "lazy_backward", False, 0, "train"),
            ("compiling", "dynamo", None, 2, "train"),
            # With a dynamic batch size the backward graph is compiled with the forward, inside Dynamo's span.
            ("compile", "dynamo", True, 2, "train"),
            ("compiling", "dynamo", None, None, "eval"),
            ("compile", "dynamo", True, None, "eval"),
        ], events)
        # Step 1 compiled nothing: no event between the markers of steps 0 and 1.
        self.assertEqual(markers[1] - markers[0], 1)
        compiles = [e for e in events if e["type"] == "compile"]
        for e in compiles:
            self.assertGreater(e["ms"], 0.0, e)
        # A cold cache: the first graph is built, not found.
        self.assertGreater(compiles[0]["cache_misses"], 0, compiles[0])
        self.assertEqual(compiles[0]["cache_hits"], 0, compiles[0])


if __name__ == "__main__":
    unittest.main()
