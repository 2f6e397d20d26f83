"""golow's Python workers: ResNet in eager PyTorch (`pytorch`) and under torch.compile (`compile`), with the same data
order, timed regions, events and epoch accounting as the Rust workers (worker/src/torch/runner.rs)."""

import argparse
import json
import os
import platform
import re
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from golow_common import DataCache, Events, Turns, apply_gpu_policy, build_model, epoch_order, inductor_cache
from golow_operators import Operators


class Tally:
    def __init__(self):
        self.loss_sum, self.batches, self.correct, self.samples = 0.0, 0, 0, 0

    def add(self, loss, correct, samples):
        self.loss_sum += loss
        self.batches += 1
        self.correct += correct
        self.samples += samples

    def loss(self):
        return self.loss_sum / self.batches if self.batches else None

    def accuracy(self):
        return self.correct / self.samples if self.samples else None


class StepClock:
    """Monotonic clock on the CPU; CUDA events on the working stream on a GPU."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        if cuda:
            self.marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        else:
            self.marks = [0, 0, 0]

    def mark(self, i):
        if self.cuda:
            self.marks[i].record()
        else:
            self.marks[i] = time.perf_counter_ns()

    def read(self):
        if self.cuda:
            self.marks[2].synchronize()
            return self.marks[0].elapsed_time(self.marks[1]), self.marks[1].elapsed_time(self.marks[2])
        return None, (self.marks[2] - self.marks[1]) / 1e6


class Compiler:
    """What torch.compile costs, as its compile callbacks time it (outermost spans only: Dynamo's frames, the lazily
    compiled backward graph, CUDA graph recordings), with what Inductor's caches found and built meanwhile. Each
    compilation is reported as it begins (`compiling`: the worker is busy, not stalled) and ends (`compile`)."""

    _TRIGGERS = {"DYNAMO": "dynamo", "LAZY_BACKWARD": "lazy_backward", "CUDAGRAPH_RECORDING": "cudagraph_recording",
                 "TRITON_AUTOTUNING": "autotuning"}
    # A compile id is "frame/attempt" (a compiled-autograd prefix and a "_retry" suffix aside): attempt 0 is a
    # frame's first compilation, any other a recompilation after a guard failed.
    _ATTEMPT = re.compile(r"(\d+)(?:_\d+)?$")

    def __init__(self, events):
        from torch._dynamo.callback import callback_handler

        self.events = events
        self.where = dict(step=None, phase="train")
        self.started = {}
        callback_handler.register_start_callback(self._start)
        callback_handler.register_end_callback(self._end)

    def at(self, step, phase):
        """What the compilations from now on fall in: a step, or (None) an epoch's evaluation."""
        self.where = dict(step=step, phase=phase)

    def _trigger(self, args):
        return self._TRIGGERS.get(args.callback_trigger.name, "other")

    def _start(self, args):
        self.started[str(args.compile_id)] = (time.perf_counter_ns(), inductor_cache())
        self.events.emit(dict(type="compiling", trigger=self._trigger(args), **self.where))

    def _end(self, args):
        compile_id = str(args.compile_id)
        start = self.started.pop(compile_id, None)
        if start is None:
            return
        began, (hits, misses) = start
        now_hits, now_misses = inductor_cache()
        attempt = self._ATTEMPT.search(compile_id.split("/")[-1])
        self.events.emit(dict(type="compile", trigger=self._trigger(args),
                              recompile=bool(attempt and int(attempt.group(1)) > 0),
                              ms=(time.perf_counter_ns() - began) / 1e6,
                              cache_hits=now_hits - hits, cache_misses=now_misses - misses, **self.where))


def compile_model(model, mode):
    """The model under torch.compile; `reduce-overhead` and `max-autotune` record CUDA graphs on a GPU."""
    return torch.compile(model, mode=None if mode == "default" else mode)


def correct_count(logits, targets):
    return int((logits.argmax(-1) == targets).sum().item())


def evaluate(model, data, cfg, device):
    """One untimed pass over the whole test split, the last partial batch included."""
    model.eval()
    tally = Tally()
    b = cfg["batch_size"]
    with torch.no_grad():
        for start in range(0, data.test.count, b):
            chunk = list(range(start, min(start + b, data.test.count)))
            inputs, targets = data.batch("eval", chunk, False)
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            tally.add(F.cross_entropy(logits, targets).item(), correct_count(logits, targets), len(chunk))
    model.train()
    return tally


def end_epoch(model, data, cfg, device, epoch, complete, tally):
    if cfg["mode"] == "eval":
        return dict(type="epoch", epoch=epoch, complete=complete, train_loss=None, train_accuracy=None,
                    eval_loss=tally.loss(), eval_accuracy=tally.accuracy())
    ev = evaluate(model, data, cfg, device) if complete else None
    return dict(type="epoch", epoch=epoch, complete=complete, train_loss=tally.loss(), train_accuracy=tally.accuracy(),
                eval_loss=ev.loss() if ev else None, eval_accuracy=ev.accuracy() if ev else None)


def run(cfg, model, data, device, events, turns, compiler):
    train = cfg["mode"] == "train"
    phase = "train" if train else "eval"
    split_count = data.split(phase).count
    b = cfg["batch_size"]
    per_epoch = split_count // b
    if per_epoch == 0:
        raise RuntimeError(f"batch size {b} is larger than the {cfg['mode']} split ({split_count} samples)")
    opt = None
    if train:
        o = cfg["optimiser"]
        opt = torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=o["momentum"], weight_decay=o["weight_decay"])
    model.train(train)
    cuda = device.type == "cuda"
    pin = cfg["pinned"] and cuda
    clock = StepClock(cuda)
    order, tally = [], Tally()
    # CUDA graphs replay into the same output buffers: each step's outputs are read before the next step begins.
    graphs = compiler is not None and cuda and cfg["compile_mode"] != "default"
    # Operators are not recorded in CUDA graph recordings and replays.
    operators = Operators(0 if graphs else cfg.get("ops_every", 0), cfg["warmup"], cfg.get("ops_library"))
    for step in range(cfg["steps"]):
        if turns.turn_over():
            events.emit(dict(type="turn_end", steps_done=step))
            if not turns.wait():
                operators.send(events.emit, now=True)
                return "stopped"
        epoch, position = divmod(step, per_epoch)
        if position == 0:
            order = epoch_order(cfg["seed"], epoch, split_count) if train else list(range(split_count))
        # The step's span on CLOCK_MONOTONIC (time.monotonic_ns on Linux), the clock the CUPTI collector places its
        # records on: from before the batch is assembled to after its loss and accuracy are read.
        start_ns = time.monotonic_ns()
        data_start = time.perf_counter_ns()
        host_inputs, host_targets = data.batch(phase, order[position * b : (position + 1) * b], pin)
        data_ms = (time.perf_counter_ns() - data_start) / 1e6

        if compiler:
            compiler.at(step, phase)
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        clock.mark(0)
        if cuda:
            inputs = host_inputs.to(device, non_blocking=pin)
            targets = host_targets.to(device, non_blocking=pin)
        else:
            inputs, targets = host_inputs, host_targets
        clock.mark(1)
        operators.begin(step)
        if train:
            logits = model(inputs)
            loss = F.cross_entropy(logits, targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
        else:
            with torch.no_grad():
                logits = model(inputs)
                loss = F.cross_entropy(logits, targets)
        clock.mark(2)
        h2d_ms, compute_ms = clock.read()
        profiled = operators.end(compute_ms)
        loss_value = loss.item()
        with torch.no_grad():
            correct = correct_count(logits, targets)
        end_ns = time.monotonic_ns()
        turns.took_step()
        tally.add(loss_value, correct, b)
        h2d_bytes = None
        if cuda:
            h2d_bytes = sum(t.numel() * t.element_size() for t in (host_inputs, host_targets))
        complete = position + 1 == per_epoch
        epoch_ends = complete or step + 1 == cfg["steps"]
        # When the turn's end comes next, with no evaluation between, both go in one write; a due window of
        # operators goes before them (under the alternate schedule every step ends a turn).
        hold = turns.turn_over() and not epoch_ends
        operators.send(events.emit)
        events.emit(dict(type="step", step=step, epoch=epoch, phase=phase, batch_size=b, data_ms=data_ms,
                         h2d_ms=h2d_ms, h2d_bytes=h2d_bytes, compute_ms=compute_ms, loss=loss_value,
                         correct=correct, warmup=step < cfg["warmup"], profiled=profiled,
                         start_ns=start_ns, end_ns=end_ns),
                    hold=hold)
        if epoch_ends:
            if compiler:
                compiler.at(None, "eval")
            events.emit(end_epoch(model, data, cfg, device, epoch, complete, tally))
            tally = Tally()
    operators.send(events.emit, now=True)
    return "ok"


def versions(device):
    v = {"python": platform.python_version(), "torch": torch.__version__}
    if device.type == "cuda":
        v["cudnn"] = str(torch.backends.cudnn.version())
        v["cuda"] = str(torch.version.cuda)
    return v


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--impl", choices=("pytorch", "compile"), default="pytorch")
    args = parser.parse_args()
    try:
        events = Events()
    except (OSError, ValueError) as e:
        print(f"golow pytorch worker: event channel: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        with open(args.config) as f:
            cfg = json.load(f)
        device = torch.device(cfg["device"])
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"{cfg['device']} requested but torch sees no CUDA device")
        if device.type == "cuda" and device.index is not None:
            # CUDA events and the current stream belong to the current device, which must be the one computed on.
            torch.cuda.set_device(device)
        torch.set_num_threads(cfg["threads"])
        apply_gpu_policy(cfg)
        events.emit(dict(type="hello", pid=os.getpid(), device=cfg["device"], config=cfg, versions=versions(device),
                         **{"impl": args.impl}))
        data = DataCache(cfg["data_dir"])
        model = build_model(cfg).to(device)
        compiler = None
        if args.impl == "compile":
            compiler = Compiler(events)
            model = compile_model(model, cfg["compile_mode"])
        status = run(cfg, model, data, device, events, Turns(), compiler)
    except Exception as e:
        traceback.print_exc()
        events.emit(dict(type="exit", status="error", message=f"{type(e).__name__}: {e}"))
        sys.exit(1)
    events.emit(dict(type="exit", status=status, message=None))


if __name__ == "__main__":
    main()
