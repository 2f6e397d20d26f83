"""What a script measures itself, at the same boundaries golow's hook uses, printed at its end for a test to
check golow's figures against: each step's end on the script's own clock, its loss, its samples, the time it
waited on data and spent in its passes, and whether a profiler was recording during it (golow's figures leave such
steps out; so does the test)."""

import json
import os
import time

import torch


def _profiling():
    return torch._C._autograd._profiler_enabled()


class Own:
    def __init__(self):
        self.ends = []        # when each step ended (perf_counter, s)
        self.losses = []      # the step's loss, as the script understands it
        self.samples = []     # samples per step
        self.data = []        # per step: waiting on the data (s)
        self.forward = []     # per step: the model's passes with gradients (s)
        self.backward = []    # per step: backward passes (s)
        self.profiled = []    # per step: a profiler was recording during its passes
        self._data = self._forward = self._backward = 0.0
        self._profiled = False

    def data_waited(self, seconds):
        self._data += seconds

    def forward_took(self, seconds):
        self._forward += seconds
        self._profiled |= _profiling()

    def backward_took(self, seconds):
        self._backward += seconds
        self._profiled |= _profiling()

    def step_ended(self, loss, samples):
        self.ends.append(time.perf_counter())
        self.losses.append(float(loss))
        self.samples.append(samples)
        self.data.append(self._data)
        self.forward.append(self._forward)
        self.backward.append(self._backward)
        self.profiled.append(self._profiled)
        self._data = self._forward = self._backward = 0.0
        self._profiled = False

    def report(self, name):
        print("OWN " + json.dumps({"name": name, "pid": os.getpid(), "ends": self.ends, "losses": self.losses,
                                   "samples": self.samples, "data": self.data, "forward": self.forward,
                                   "backward": self.backward, "profiled": self.profiled}), flush=True)
