"""golow: measures a user's PyTorch script without touching it.

Loaded by golow's sitecustomize in every Python process of a ``--cmd`` worker.
Importing torch takes seconds, so nothing here imports it: meta-path finders
wait for the user's code to import ``torch.optim.optimizer`` (then global
optimiser step hooks are registered, and ``torch.autograd.backward`` wrapped),
``torch.nn.modules.module`` (then global forward hooks find the script's model
and time its calls), ``torch.utils.data.dataloader`` (then waiting on a
DataLoader is timed), ``torch.amp.grad_scaler`` (then a GradScaler's steps,
and those it skips, are seen), and the training frameworks' modules that hand
over a loss (PyTorch Lightning's strategy, Hugging Face's Trainer).

Each step of the process's first optimiser says where the time since the
previous one went: its phases (waiting on data, the model's forward passes,
backward passes, optimiser steps; the rest is the step's "other"). A process
that trains with no optimiser (parameters updated by hand) has its backward
passes counted as its steps instead, until an optimiser steps.

A process connects to the worker's socket (``GOLOW_EVENT_SOCKET``, inherited
by whatever a launcher starts) only when it first has something to say, so a
launcher that never trains is never counted; a forked child connects anew.
Whatever goes wrong in here must never reach the user's program.
"""

import json
import math
import os
import sys
import threading
import time

_OPTIM = "torch.optim.optimizer"
_MODULE = "torch.nn.modules.module"
_DATALOADER = "torch.utils.data.dataloader"
_SCALER = "torch.amp.grad_scaler"
# Where a framework hands over the loss it computed: Lightning's training step (both of its package names) and the
# logs of Hugging Face's Trainer.
_LIGHTNING = ("lightning.pytorch.strategies.strategy", "pytorch_lightning.strategies.strategy")
_TRANSFORMERS = "transformers.trainer"
_MAX_PENDING_LOSSES = 8  # losses on a device whose copy to the host is under way
_MAX_OPTIMIZERS = 16  # golow_protocol::script::MAX_OPTIMIZERS
_MAX_NAME = 64

_installed = False
_path = None        # the socket's path; None when not monitored
_lock = threading.RLock()  # optimisers may step, and models run, in several threads


class _Process:
    """What one process has said; a forked child starts afresh."""

    def __init__(self):
        self.pid = os.getpid()
        self.sock = None
        self.sock_id = None   # (st_dev, st_ino) of the socket when connected
        self.no_signal = 0
        self.dead = False     # the monitor went away: stay quiet
        self.optimizers = None  # optimizer -> [index, steps, last_ns]; a WeakKeyDictionary once torch is in
        self.next_optimizer = 0
        self.stepped = False
        self.first_forward_ns = None
        self.passes = 0
        self.last_pass_ns = None
        self.pass_start_ns = None
        self.depth = 0
        self.arrived_ns = None  # when the latest backward pass since the last step began: where a rank arrives
        self.operators = None  # golow_operators.Operators for the first optimiser's steps, made at its first step
        self.optimizing_seen = False  # an optimiser (or a GradScaler) began a step in this process
        self.post_hooks = 0  # optimiser steps finished, to tell a GradScaler's skipped step
        self.backward_passes = 0  # backward passes said as steps, while no optimiser is seen
        self.last_backward_end_ns = None
        # The step under way: where its time went so far (ns), and how many passes it ran.
        self.data_ns = 0
        self.forward_ns = 0
        self.backward_ns = 0
        self.optimizer_ns = 0
        self.forward_passes_in_step = 0
        self.backward_passes_in_step = 0
        self.optimizing = 0  # optimiser steps (and a GradScaler's) under way, one inside the other
        self.optimizing_since = None  # when the outermost began (or the last step ended inside it)
        self.nested_ns = 0  # forward and backward passes inside it (a closure's): theirs, not the optimiser's
        self.pending_loader = None  # (num_workers, pin_memory) of the DataLoader waited on last
        self.loader = None  # that of the DataLoader whose batch the model last took with gradients
        self.loader_said = None  # what the events said of it, with whether CUDA is in use
        self.pending_data_ns = 0  # waits on a DataLoader not yet taken by a pass of the model
        self.samples_in_step = 0  # the batch dimension of the model's inputs, summed over the step's passes
        self.pass_samples = None  # that of the pass under way
        self.last_batch = None  # that of the latest DataLoader batch, for a model called with keywords alone
        self.own_loss = False  # the script reports its loss itself (golow.report): a framework's is not said
        self.pending_losses = []  # (host tensor, CUDA event) of a framework's losses still being copied


_me = _Process()
_forward_hooks = []  # the global forward hooks' handles
_step_hooks = []     # the global optimiser step hooks' handles
_counting = True     # the model's calls are timed (until anything in here fails)
_model = None        # a weak reference to the model once found


def install():
    """Start watching for torch if golow gave us a socket to report to."""
    global _installed, _path
    try:
        if _installed:  # a second copy of the hook dir must not double events
            return
        _installed = True
        _path = os.environ.get("GOLOW_EVENT_SOCKET") or None
        if _path is None:
            return
        os.register_at_fork(after_in_child=_forked)
        targets = [(_MODULE, _register_forward), (_OPTIM, _register_steps), (_DATALOADER, _register_data),
                   (_SCALER, _register_scaler), (_TRANSFORMERS, _register_transformers)]
        targets += [(name, _register_lightning) for name in _LIGHTNING]
        for target, register in targets:
            module = sys.modules.get(target)
            if module is not None:  # e.g. a .pth file imported torch already
                register(module)
            else:
                sys.meta_path.insert(0, _Finder(target, register))
    except Exception:
        _path = None


def _forked():
    global _me, _lock
    _lock = threading.RLock()  # the parent's may have been held by another thread
    parent_stepped, parent_optimizing = _me.stepped, _me.optimizing_seen
    if _me.operators:
        # A child forked while the parent records a step (a data loader's workers) must not record on.
        _looking(_me.operators.abandon)
    _me = _Process()
    # Forward passes, and backward passes as steps, stay unsaid where the parent trains with an optimiser.
    _me.stepped, _me.optimizing_seen = parent_stepped, parent_optimizing


class _Finder:
    """Lets the real finders locate a torch module, then wraps its loader."""

    def __init__(self, target, register):
        self._target = target
        self._register = register

    def find_spec(self, name, path=None, target=None):
        if name != self._target:  # the hot path for every other import
            return None
        try:
            sys.meta_path.remove(self)  # one-shot: no cost for later imports
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                spec = find and find(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None
            spec.loader = _Loader(spec.loader, self._register)
            return spec
        except Exception:
            # Defer to the normal machinery; it will redo (and report) the search.
            return None


class _Loader:
    def __init__(self, loader, register):
        self._loader = loader
        self._register = register

    def __getattr__(self, name):  # get_source, is_package, ... for inspect & co
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        # Leave no trace of the wrapper on the module torch sees.
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._register(module)


def _register_steps(module):
    try:
        _step_hooks.append(module.register_optimizer_step_pre_hook(_on_step_begin))
        _step_hooks.append(module.register_optimizer_step_post_hook(_on_step))
    except Exception:
        pass
    _register_backward()


def _wrap(module, owner, name, make):
    """Replaces ``module.owner.name`` (``module.name`` without an owner) with ``make(original)``, once however often
    the hook is loaded; where torch has no such thing, nothing."""
    try:
        owner = module if owner is None else getattr(module, owner)
        original = getattr(owner, name, None)
        if original is None or getattr(original, "_golow", False):
            return
        import functools

        wrapper = functools.wraps(original)(make(original))
        wrapper._golow = True
        setattr(owner, name, wrapper)
    except Exception:
        pass


def _register_backward():
    """Times every backward pass (``loss.backward()`` goes through ``torch.autograd.backward``) and stamps its start:
    in synchronous data-parallel training the ranks leave a step together, so the moment each starts its backward
    pass, towards the gradients' all-reduce, is what tells which rank arrived last."""
    def make(original):
        def backward(*args, **kwargs):
            start = None
            try:
                if not _compiling():
                    start = _me.arrived_ns = time.perf_counter_ns()
            except Exception:
                pass
            result = original(*args, **kwargs)
            if start is not None:
                _on_backward_end(start)
            return result
        return backward

    _wrap(sys.modules.get("torch.autograd"), None, "backward", make)


def _register_data(module):
    """Times each batch taken from any DataLoader, whatever its number of workers: their iterators share
    ``__next__``."""
    def make(original):
        def __next__(self):
            start = time.perf_counter_ns()
            try:
                batch = original(self)
            finally:
                _me.pending_data_ns += time.perf_counter_ns() - start
            _me.last_batch = _batch_size(batch)
            try:
                _me.pending_loader = (int(self._num_workers), bool(self._pin_memory))
            except Exception:
                pass
            return batch
        return __next__

    _wrap(module, "_BaseDataLoaderIter", "__next__", make)


def _grad_enabled():
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.is_grad_enabled())


def _jit_tracing():
    state = getattr(getattr(sys.modules.get("torch"), "_C", None), "_get_tracing_state", None)
    return state is None or state() is not None


def _batch_size(value, depth=0):
    """The first dimension of a tensor, or of the first tensor among a tuple's, list's or dict's first items (two
    levels down): a batch's size, as the model takes it. None where there is none."""
    try:
        shape = getattr(value, "shape", None)
        if shape is not None and hasattr(value, "dtype"):
            return int(shape[0]) if len(shape) >= 1 else None
        if depth < 2:
            if isinstance(value, dict):
                value = list(value.values())
            if isinstance(value, (list, tuple)):
                for item in value[:4]:
                    size = _batch_size(item, depth + 1)
                    if size is not None:
                        return size
    except Exception:
        pass
    return None


def _register_scaler(module):
    """A GradScaler's step is the optimiser's phase too (it unscales and checks the gradients); one that finds
    infinite gradients skips the optimiser's step, which is then said as a skipped step."""
    def make(original):
        def step(self, optimizer, *args, **kwargs):
            before = _me.post_hooks
            _optimizing_begins()
            try:
                result = original(self, optimizer, *args, **kwargs)
            except BaseException:
                _optimizing_ends(time.perf_counter_ns())
                raise
            _on_scaler_step(optimizer, skipped=_me.post_hooks == before)
            return result
        return step

    _wrap(module, "GradScaler", "step", make)


def _register_lightning(module):
    """Lightning's strategies run the module's ``training_step`` through ``Strategy.training_step``: what it returns
    (the loss, or a dict holding it) is the step's loss."""
    def make(original):
        def training_step(self, *args, **kwargs):
            output = original(self, *args, **kwargs)
            _framework_loss(output.get("loss") if isinstance(output, dict) else output)
            return output
        return training_step

    _wrap(module, "Strategy", "training_step", make)


def _register_transformers(module):
    """Hugging Face's Trainer logs its training loss (averaged since its last log) through ``Trainer.log``."""
    def make(original):
        def log(self, logs, *args, **kwargs):
            if isinstance(logs, dict):
                _framework_loss(logs.get("loss"))
            return original(self, logs, *args, **kwargs)
        return log

    _wrap(module, "Trainer", "log", make)


def _framework_loss(value):
    """A loss a framework computed, said as the script's ``loss`` unless the script reports its own. A tensor on a
    device is never read there (that would wait for the device): it is copied to the host asynchronously and said once
    its copy is done, at a later step."""
    try:
        if _me.own_loss or value is None:
            return
        if hasattr(value, "detach"):
            if value.numel() != 1:
                return
            value = value.detach()
            if value.device.type == "cuda":
                torch = sys.modules["torch"]
                host = value.to("cpu", non_blocking=True)
                done = torch.cuda.Event()
                done.record()
                with _lock:
                    _me.pending_losses.append((host, done))
                    del _me.pending_losses[:-_MAX_PENDING_LOSSES]
                return
            if value.device.type != "cpu":
                return
        _send_loss(float(value))
    except Exception:
        pass


def _send_loss(value):
    if math.isfinite(value):
        _send({"type": "scalar", "name": "loss", "value": value})


def _copied_losses():
    """Says the framework's losses whose copies to the host are done, in their order."""
    try:
        while _me.pending_losses and _me.pending_losses[0][1].query():
            host, _ = _me.pending_losses.pop(0)
            _send_loss(float(host))
    except Exception:
        _me.pending_losses = []


def _register_forward(module):
    """Global forward hooks, never the model's own: a module's hooks go wherever it goes (torch.jit.script compiles
    them, torch.save pickles them), the global ones stay in this process."""
    try:
        import warnings
        # torch.compile warns of any global hook; ours only time the model's calls, and say nothing while traced.
        warnings.filterwarnings(
            "ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks", category=UserWarning)
        _forward_hooks.append(module.register_module_forward_pre_hook(_on_module_start))
        try:
            _forward_hooks.append(module.register_module_forward_hook(_on_module_end, always_call=True))
        except TypeError:  # torch < 2.1
            _forward_hooks.append(module.register_module_forward_hook(_on_module_end))
    except Exception:
        _stop_counting_passes()


_is_compiling = None  # torch.compiler.is_compiling, once torch has it


def _compiling():
    # Under torch.compile's tracing the hooks do nothing: this check is folded away, so they add no graph break.
    global _is_compiling
    if _is_compiling is None:
        compiler = getattr(sys.modules.get("torch"), "compiler", None)
        _is_compiling = getattr(compiler, "is_compiling", None)
        if _is_compiling is None:
            return False
    return _is_compiling()


def _stop_counting_passes():
    """After a failure forward passes are no longer timed. The hooks go too, unless torch.compile may have compiled
    code that checks them (it guards on how many global hooks there are, and removing them would recompile): then
    they stay, doing nothing."""
    global _counting
    try:
        with _lock:
            _counting = False
            if "torch._dynamo" in sys.modules:
                return
            while _forward_hooks:
                _forward_hooks.pop().remove()
    except Exception:
        pass


def _on_module_start(module, args):
    """Every module's call: the first with parameters called outside any other is the model, and its calls are
    timed."""
    global _model
    try:
        if _compiling() or not _counting:
            return
        model = _model() if _model is not None else None
        if model is not None and module is not model:  # the hot path: every other module's call
            return
        with _lock:
            if model is None:
                if next(iter(module.parameters()), None) is None:
                    return
                import weakref
                _model = weakref.ref(module)
                model = module
            if module is not model:
                return
            _me.depth += 1
            if _me.depth == 1:
                # A batch the model takes with gradients was the step's data; one an evaluation pass takes (no
                # gradients) was waited for by the step's "other".
                if _grad_enabled():
                    _me.data_ns += _me.pending_data_ns
                    _me.loader = _me.pending_loader or _me.loader
                _me.pending_data_ns = 0
                # torch.jit.trace records what is read of its inputs' shapes: nothing is read there.
                size = None if _jit_tracing() else _batch_size(args)
                _me.pass_samples = size if size is not None else _me.last_batch
                _me.pass_start_ns = time.perf_counter_ns()
                if _me.first_forward_ns is None:
                    _me.first_forward_ns = _me.pass_start_ns
    except Exception:
        _stop_counting_passes()


def _on_module_end(module, args, output):
    try:
        if _compiling() or not _counting or _model is None or module is not _model():
            return
        now = time.perf_counter_ns()
        with _lock:
            if _me.depth == 0:
                return
            _me.depth -= 1
            if _me.depth > 0 or _me.pass_start_ns is None:
                return
            start = _me.pass_start_ns
            _me.pass_start_ns = None
            grad = _grad_enabled()
            if grad:
                # A pass without gradients in a training loop is evaluation: the step's "other", not its forward.
                _me.forward_ns += now - start
                _me.forward_passes_in_step += 1
                _me.samples_in_step += _me.pass_samples or 0
                if _me.optimizing:
                    _me.nested_ns += now - start
            if _me.stepped:
                return
            last = _me.last_pass_ns
            event = {
                "type": "forward_pass",
                "pass": _me.passes,
                "ms": _ms(now - start),
                "interval_ms": None if last is None else _ms(start - last),
                "grad": grad,
            }
            _me.passes += 1
            _me.last_pass_ns = start
            _send(event)
    except Exception:
        pass


def _optimizing_begins():
    try:
        with _lock:
            _me.optimizing_seen = True
            _me.optimizing += 1
            if _me.optimizing == 1:
                _me.optimizing_since, _me.nested_ns = time.perf_counter_ns(), 0
    except Exception:
        pass


def _optimizing_ends(now):
    """The end of an optimiser's (or a GradScaler's) step: the outermost adds its time, less the passes inside."""
    try:
        with _lock:
            if _me.optimizing == 0:
                return
            _me.optimizing -= 1
            if _me.optimizing == 0 and _me.optimizing_since is not None:
                _me.optimizer_ns += max(0, now - _me.optimizing_since - _me.nested_ns)
                _me.optimizing_since = None
    except Exception:
        pass


def _on_step_begin(optimizer, args, kwargs):
    _optimizing_begins()


def _phases(now):
    """Where the time since the last step went, up to ``now``, in milliseconds."""
    optimizer_ns = _me.optimizer_ns
    if _me.optimizing and _me.optimizing_since is not None:  # a step ending inside a GradScaler's
        optimizer_ns += max(0, now - _me.optimizing_since - _me.nested_ns)
    phases = {
        # Waits no pass of the model took (a model the hooks do not see, a batch for the next step): data still.
        "data_ms": _ms(_me.data_ns + _me.pending_data_ns),
        "forward_ms": _ms(_me.forward_ns),
        "backward_ms": _ms(_me.backward_ns),
        "optimizer_ms": _ms(optimizer_ns),
        "forward_passes": _me.forward_passes_in_step,
        "backward_passes": _me.backward_passes_in_step,
        "samples": _me.samples_in_step or None,
    }
    if _me.loader is not None:
        cuda = getattr(sys.modules.get("torch"), "cuda", None)
        setup = _me.loader + (bool(cuda is not None and cuda.is_initialized()),)
        if setup != _me.loader_said:
            _me.loader_said = setup
            phases["loader"] = {"num_workers": setup[0], "pin_memory": setup[1], "cuda": setup[2]}
    return phases


def _next_step(now):
    """The step under way ends at ``now``: the next one's phases start from nothing."""
    _me.data_ns = _me.pending_data_ns = _me.forward_ns = _me.backward_ns = _me.optimizer_ns = 0
    _me.forward_passes_in_step = _me.backward_passes_in_step = _me.samples_in_step = 0
    if _me.optimizing:
        _me.optimizing_since, _me.nested_ns = now, 0


def _entry(optimizer):
    """The optimiser's [index, steps, end of its last step], said the first time it is seen."""
    if _me.optimizers is None:
        import weakref
        _me.optimizers = weakref.WeakKeyDictionary()
    entry = _me.optimizers.get(optimizer)
    if entry is None:
        index = min(_me.next_optimizer, _MAX_OPTIMIZERS - 1)
        _me.next_optimizer += 1
        entry = _me.optimizers[optimizer] = [index, 0, None]
        _send({"type": "optimizer", "optimizer": index,
               "class": type(optimizer).__name__[:_MAX_NAME], "lr": _lr(optimizer)})
    return entry


def _on_step(optimizer, args, kwargs):
    try:
        now = time.perf_counter_ns()
        with _lock:
            _me.post_hooks += 1
            _optimizing_ends(now)
            entry = _entry(optimizer)
            index, step, last = entry
            interval_ms = None if last is None else _ms(now - last)
            event = {"type": "optimizer_step", "optimizer": index, "step": step, "interval_ms": interval_ms}
            if index == 0 and interval_ms is not None:
                event["phases"] = _phases(now)
            operators = _looking(_operators) if index == 0 else None
            if operators is not None and _looking(operators.end, interval_ms or 0.0):
                event["profiled"] = True
            if _me.arrived_ns is not None:
                # perf_counter is CLOCK_MONOTONIC on Linux: one clock for every rank of the machine.
                event["arrived_ns"] = _me.arrived_ns
                _me.arrived_ns = None
            if not _me.stepped:
                _me.stepped = True
                if _me.first_forward_ns is not None:
                    event["first_step_ms"] = _ms(now - _me.first_forward_ns)
            _send(event)
            if operators is not None:
                _looking(operators.send, _send)
                _looking(operators.begin, step + 1)
                # What looking took is in neither step's interval.
                now = time.perf_counter_ns()
            entry[1], entry[2] = step + 1, now
            if index == 0:
                _next_step(now)
                if _me.pending_losses:
                    _copied_losses()
    except Exception:
        pass


def _on_scaler_step(optimizer, skipped):
    """A GradScaler's step ended; one that skipped the optimiser's step (infinite gradients) says so, and the next
    step's interval and phases start from here, not from the step before."""
    try:
        now = time.perf_counter_ns()
        _optimizing_ends(now)
        if not skipped:
            return
        with _lock:
            entry = _entry(optimizer)
            index, step, last = entry
            event = {"type": "optimizer_step", "optimizer": index, "step": step,
                     "interval_ms": None if last is None else _ms(now - last), "skipped": True}
            if index == 0 and last is not None:
                event["phases"] = _phases(now)
            _me.arrived_ns = None
            _send(event)
            entry[2] = now
            if index == 0:
                _next_step(now)
    except Exception:
        pass


def _on_backward_end(start):
    """A backward pass ended. In a process that has not begun an optimiser's step, it is the step: said with its
    phases, from the end of the one before."""
    try:
        now = time.perf_counter_ns()
        with _lock:
            _me.backward_ns += now - start
            _me.backward_passes_in_step += 1
            if _me.optimizing:
                _me.nested_ns += now - start
                return
            if _me.optimizing_seen:
                return
            last = _me.last_backward_end_ns
            event = {"type": "backward_pass", "pass": _me.backward_passes,
                     "interval_ms": None if last is None else _ms(now - last)}
            if last is not None:
                event["phases"] = _phases(now)
            _send(event)
            _me.backward_passes += 1
            _me.last_backward_end_ns = now
            _next_step(now)
    except Exception:
        pass


def _operators():
    """The process's operator recorder: one step in GOLOW_OPS_EVERY past the warm-up is profiled, from the first
    optimiser's previous step to this one, in a process that is not a rank other than 0 (the monitor charts the
    first process's steps); None when there is nothing to record."""
    if _me.operators is None:
        _me.operators = False
        every = _env_int("GOLOW_OPS_EVERY") or 0
        if every > 0 and _env_int("RANK") in (None, 0):
            from golow_operators import Operators
            _me.operators = Operators(every, _env_int("GOLOW_OPS_WARMUP") or 0)
            import atexit
            atexit.register(_flush_operators)
    return _me.operators or None


def _looking(call, *args):
    """A call of the operator recorder: one that fails turns it off for the process, and never costs the step's
    event."""
    try:
        return call(*args)
    except Exception:
        _me.operators = False
        return None


def _flush_operators():
    """At exit: the profile begun for a step that never came is stopped, and what the last window holds sent."""
    try:
        with _lock:
            if _me.operators:
                _me.operators.abandon()
                _me.operators.send(_send, now=True)
    except Exception:
        pass


def _lr(optimizer):
    try:
        lr = optimizer.param_groups[0].get("lr")
        if hasattr(lr, "device"):  # a tensor: read it only where that costs no device sync
            return float(lr) if lr.device.type == "cpu" else None
        return float(lr) if lr is not None else None
    except Exception:
        return None


def _ms(ns):
    return round(ns / 1e6, 3)


def _send(event):
    """Writes one event line, connecting first if this process has not yet; silent for good once anything fails."""
    if _path is None or _me.dead:
        return
    try:
        if _me.sock is None:
            _connect()
        st = os.fstat(_me.sock.fileno())
        if (st.st_dev, st.st_ino) != _me.sock_id:
            # The script closed our descriptor and its number was reused: never write JSON into its file.
            raise OSError("event socket was replaced")
        line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        # MSG_NOSIGNAL: a script that restored SIGPIPE's default must not die when the monitor goes.
        _me.sock.sendall(line, _me.no_signal)
    except Exception:
        _me.dead = True


def _connect():
    import socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inherited by exec'd children
    sock.connect(_path)
    st = os.fstat(sock.fileno())
    _me.sock, _me.sock_id, _me.no_signal = sock, (st.st_dev, st.st_ino), socket.MSG_NOSIGNAL
    torch = sys.modules.get("torch")
    hello = {
        "type": "script_process",
        "pid": os.getpid(),
        "rank": _env_int("RANK"),
        "local_rank": _env_int("LOCAL_RANK"),
        "world_size": _env_int("WORLD_SIZE"),
        "python": "%d.%d.%d" % sys.version_info[:3],
        "torch": getattr(torch, "__version__", None),
        "threads": _threads(torch),
    }
    sock.sendall((json.dumps(hello, separators=(",", ":")) + "\n").encode(), socket.MSG_NOSIGNAL)


def _env_int(name):
    try:
        value = int(os.environ[name])
        return value if value >= 0 else None
    except (KeyError, ValueError):
        return None


def _threads(torch):
    try:
        return int(torch.get_num_threads())
    except Exception:
        return None


def report(**scalars):
    """golow.report: numbers the script reports, e.g. report(loss=0.7, samples=64)."""
    with _lock:
        for name, value in scalars.items():
            if name == "loss":
                _me.own_loss = True
            try:
                value = float(value)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value):  # JSON has no NaN: the schema's word for it
                value = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            _send({"type": "scalar", "name": str(name)[:_MAX_NAME], "value": value})


def phase(name):
    """golow.phase: marks what the script does from now on, e.g. phase("eval")."""
    with _lock:
        _send({"type": "phase", "name": str(name)[:_MAX_NAME]})
