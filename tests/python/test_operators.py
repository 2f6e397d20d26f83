"""Tests for the Python levels' operator breakdown (src/workers/pytorch/golow_operators.py, which the step hook shares):
real torch, a real torch.profiler, and golow's library of libtorch's operator callbacks as `make build` builds it
(target/release/libgolow_ops.so).

Run from the repository root:
    .venv/bin/python -m unittest discover --start-directory tests/python --top-level-directory tests/python -v
"""

import os
import sys
import unittest

import torch

import event_schema

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "workers", "pytorch"))

from golow_operators import Operators  # noqa: E402

LIBRARY = os.path.join(ROOT, "target", "release", "libgolow_ops.so")


def train_step(model):
    model(torch.randn(3, 8)).sum().backward()


class OperatorsTest(unittest.TestCase):
    """With torch.profiler; CallbacksTest runs the same with golow's library."""

    library = None

    def operators(self, every, warmup):
        return Operators(every=every, warmup=warmup, library=self.library)

    def test_only_the_profiled_steps_are_recorded_and_a_window_takes_them(self):
        torch.set_num_threads(1)
        model = torch.nn.Linear(8, 4)
        operators = self.operators(every=2, warmup=1)
        operators.BUDGET = 1.0
        profiled = []
        for step in range(6):
            operators.begin(step)
            train_step(model)
            profiled.append(operators.end(2.5))
        self.assertEqual(profiled, [False, True, False, True, False, True])
        window = event_schema.worker_event(operators.window(now=True))
        self.assertEqual((window["type"], window["steps"], window["every"]), ("operators", 3, 2))
        self.assertEqual(window["compute_ms"], 7.5)
        by_name = {o["name"]: o for o in window["operators"]}
        addmm = by_name["aten::addmm"]
        self.assertEqual(addmm["calls"], 3, "one linear layer's forward per profiled step")
        self.assertEqual(addmm["shapes"], "[4] [3, 8] [8, 4]")
        self.assertGreater(addmm["self_ns"], 0)
        self.assertGreaterEqual(addmm["total_ns"], addmm["self_ns"])
        self_ns = [o["self_ns"] for o in window["operators"]]
        self.assertEqual(self_ns, sorted(self_ns, reverse=True), "largest self time first")
        self.assertIsNone(operators.window(now=True), "taken: nothing left")
        self.assertIsNone(self.operators(every=0, warmup=0).window(now=True))

    def test_names_beyond_the_cap_are_summed_last(self):
        operators = self.operators(every=1, warmup=0)
        operators.MAX_OPERATORS = 3
        operators.begin(0)
        train_step(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)))
        operators.end(1.0)
        names = [o["name"] for o in event_schema.worker_event(operators.window(now=True))["operators"]]
        self.assertEqual(len(names), 3)
        self.assertEqual(names[-1], Operators.OTHER)

    def test_thousands_of_distinct_names_and_shapes_stay_bounded(self):
        operators = self.operators(every=1, warmup=0)
        operators.begin(0)
        for i in range(3000):
            with torch.profiler.record_function(f"region {i}"):
                torch.ones(i + 1).add_(1)
        operators.end(1.0)
        self.assertLessEqual(len(operators.table), Operators.MAX_NAMES)
        self.assertTrue(all(len(row[3]) <= Operators.MAX_SHAPES for row in operators.table.values()))
        window = event_schema.worker_event(operators.window(now=True))
        self.assertEqual(len(window["operators"]), Operators.MAX_OPERATORS)
        self.assertEqual(window["operators"][-1]["name"], Operators.OTHER)
        # 3000 forms of aten::add_'s and aten::fill_'s inputs, beyond 8 each (names beyond those kept are summed
        # as OTHER by golow's library, dropped by the profiler's reader).
        self.assertGreaterEqual(window["dropped"], 2 * (3000 - Operators.MAX_SHAPES))
        calls = sum(o["calls"] for o in window["operators"]) + window["dropped"]
        self.assertGreaterEqual(calls, 3000 * 3, "every call is counted, kept or dropped")


class BudgetTest(unittest.TestCase):
    def test_looking_stays_within_its_budget_of_the_time(self):
        model = torch.nn.Linear(8, 4)
        operators = Operators(every=1, warmup=0)
        operators.begin(0)
        train_step(model)
        self.assertTrue(operators.end(1.0))
        self.assertGreater(operators.spent, 0.0)
        # A step of a tiny model takes far less than 50 times what starting and reading a profile took.
        self.assertFalse(operators.profiles(1))
        # Once 50 times that has passed since the first profile, the next step is looked at.
        operators.started -= operators.spent / operators.BUDGET
        self.assertTrue(operators.profiles(1))


class CallbacksTest(OperatorsTest):
    library = LIBRARY

    @classmethod
    def setUpClass(cls):
        # make test builds it first: missing, the library is a failure of the run, never a skip that passes.
        if not os.path.exists(LIBRARY):
            raise AssertionError(f"{LIBRARY} is missing: build it (make build; make test does) and run again")


if __name__ == "__main__":
    unittest.main()
