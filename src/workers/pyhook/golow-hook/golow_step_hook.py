"""golow: measures a user's PyTorch script without touching it.

Loaded by golow's sitecustomize in every Python process of a ``--cmd`` worker, under a name no module of the user's
can have. Importing torch takes seconds, so nothing here imports it: meta-path finders wait for the user's code to
import ``torch.optim.optimizer`` (then global optimiser step hooks are registered, and ``torch.autograd.backward``
wrapped), ``torch.nn.modules.module`` (then global forward hooks find the script's model and time its calls),
``torch.utils.data.dataloader`` (then waiting on a DataLoader is timed), ``torch.amp.grad_scaler`` (then a
GradScaler's steps, and those it skips, are seen, and the losses it scales are read unscaled), and the training
frameworks' modules that hand over a loss (PyTorch Lightning's strategy, Hugging Face's Trainer).

Each step of the process's first optimiser says where the time since the previous one went: its phases (waiting on
data, the model's forward passes, backward passes, optimiser steps; the rest is the step's "other"), the samples it
went through (each distinct batch once), its loss (what ``backward()`` was called on) and what this hook itself took.
A process that trains with no optimiser (parameters updated by hand) has its backward passes counted as its steps
instead, until an optimiser steps.

A process connects to the worker's socket (``GOLOW_EVENT_SOCKET``, inherited by whatever a launcher starts) only
when it first has something to say, so a launcher that never trains is never counted; a forked child connects anew.
Events carry the time they describe on the host's monotonic clock (``t_ns``) and are written in batches (at most
``_FLUSH_NS`` apart), so that a step of microseconds does not pay for a system call and a wake-up of the monitor.
Whatever goes wrong in here must never reach the user's program, and nothing here grows without bound.
"""

import collections
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
_OPERATORS = "golow-operators"  # the operator recorder's name in sys.modules, loaded from beside this file
_MAX_PENDING_LOSSES = 8  # losses on a device whose copy to the host is under way
_MAX_STEP_LOSSES = 64  # losses of one step's backward passes kept to be summed
_MAX_STEP_INPUTS = 16  # inputs of one step's passes told apart
_MAX_PENDING_BATCHES = 64  # batches waited on and not yet taken, remembered
_MAX_OPTIMIZERS = 16  # golow_protocol::script::MAX_OPTIMIZERS
_MAX_NAME = 64
_MAX_REASON = 200
_FLUSH_NS = 50_000_000  # events wait at most this long for the next write
_FLUSH_BYTES = 1 << 16
# A profiled step that runs longer, or grows the process by more, is abandoned, and no other is profiled.
_PROFILE_MAX_NS = 2_000_000_000
_PROFILE_MAX_GROWTH = 256 << 20
_PROFILE_CHECK_NS = 20_000_000  # how often a profile's memory is read

_installed = False
_path = None        # the socket's path; None when not monitored
_attached = False   # loaded into a running process by `golow attach`: reports only while that session holds
_wrapped = []       # (owner, name, original) of what _wrap replaced, put back when the hook is removed
_MAX_BACKLOG = 1 << 20  # bytes an attached process holds for a monitor that does not read: past them it lets go
_lock = threading.RLock()  # optimisers may step, and models run, in several threads
_module_calls = 0   # module calls the global hooks saw: each costs the dispatch of golow's hooks


class _Process:
    """What one process has said; a forked child starts afresh."""

    def __init__(self):
        self.pid = os.getpid()
        self.sock = None
        self.sock_id = None   # (st_dev, st_ino) of the socket when connected
        self.no_signal = 0
        self.dead = False     # the monitor went away: stay quiet
        self.unsent = []      # encoded events waiting for the next write
        self.unwritten = b""  # the part of the last write an attached process's socket did not take
        self.greeted = False  # its hello is queued
        self.no_wait = 0
        self.unsent_bytes = 0
        self.flushed_ns = 0
        self.optimizers = None  # optimizer -> [index, steps, last_ns]; a WeakKeyDictionary once torch is in
        self.next_optimizer = 0
        self.stepped = False
        self.first_forward_ns = None
        self.passes = 0
        self.last_pass_ns = None
        self.pass_start_ns = None
        self.depth = 0
        self.arrived_ns = None  # when the latest backward pass since the last step began: where a rank arrives
        self.operators = None  # golow_operators.Operators for the worker's steps, made at its first; False: none
        self.profiles = False  # operators may be recorded in this process (said once it is known)
        self.watch = None  # the profile under way, bounded in time and memory
        self.tainted = False  # a profile was abandoned in the step under way: its time is not a plain step's
        self.optimizing_seen = False  # an optimiser (or a GradScaler) began a step in this process
        self.post_hooks = 0  # optimiser steps finished, to tell a GradScaler's skipped step
        self.backward_passes = 0  # backward passes said as steps, while no optimiser is seen
        self.last_backward_end_ns = None
        # The step under way: where its time went so far (ns), and how many passes it ran.
        self.data_ns = 0
        self.forward_ns = 0
        self.backward_ns = 0
        self.optimizer_ns = 0
        self.hook_ns = 0  # this hook's own time
        self.module_calls = 0  # _module_calls when the step began
        self.forward_passes_in_step = 0
        self.backward_passes_in_step = 0
        self.optimizing = 0  # optimiser steps (and a GradScaler's) under way, one inside the other
        self.optimizing_since = None  # when the outermost began (or the last step ended inside it)
        self.nested_ns = 0  # forward and backward passes inside it (a closure's): theirs, not the optimiser's
        self.pending_loader = None  # (num_workers, pin_memory) of the DataLoader waited on last
        self.loader = None  # that of the DataLoader whose batch the model last took with gradients
        self.loader_said = None  # what the events said of it, with whether CUDA is in use
        self.pending_data_ns = 0  # waits on a DataLoader not yet taken by a pass of the model
        # Samples: a DataLoader's batches the model took with gradients count once each; without one, each distinct
        # input of the model's passes counts once (a closure's passes over the same batch, a GAN's over a batch and
        # its fakes' detached copy do not add up). A pass takes the oldest batch waited on: a loader wrapped to
        # fetch one batch ahead (accelerate's, Lightning's) has the next step's batch in hand during this one.
        self.pending_batches = collections.deque(maxlen=_MAX_PENDING_BATCHES)  # their sizes, oldest first
        self.loader_samples = 0
        self.input_samples = 0
        self.step_inputs = []  # weak references to the inputs counted in the step
        self.pass_input = None  # the first tensor input of the pass under way (a weak reference)
        self.pass_samples = None  # its batch dimension, or that of the latest DataLoader batch
        self.pass_sequence_samples = None  # the batch a sequence-first module of the pass took, which wins
        self.last_batch = None  # that of the latest DataLoader batch, for a model called with keywords alone
        # Loss: what backward() is called on, unless the script or a framework says it.
        self.own_loss = False  # the script reports its loss itself (golow.report)
        self.framework = False  # a framework hands over the loss it computed
        self.losses = []  # losses of backward passes outside an optimiser's step since the last step
        self.closure_loss = None  # the first loss of a backward pass inside one (a closure's)
        self.scaled = None  # (weak reference to what a GradScaler scaled, the loss it scaled)
        self.pending_losses = []  # (host tensor, CUDA event) of losses still being copied


_me = _Process()
_forward_hooks = []  # the global forward hooks' handles
_step_hooks = []     # the global optimiser step hooks' handles
_counting = True     # the model's calls are timed (until anything in here fails)
_model = None        # a weak reference to the model once found
_sequence_first = frozenset()  # ids of the model's sequence modules that take (time, batch, …)
_call_ns = None      # what one module call costs in golow's hooks, measured once


def install(path=None):
    """Start watching for torch if golow gave us a socket to report to (``path``, else ``GOLOW_EVENT_SOCKET``)."""
    global _installed, _path
    try:
        if _installed:  # a second copy of the hook dir must not double events
            return
        _installed = True
        _path = path or os.environ.get("GOLOW_EVENT_SOCKET") or None
        if _path is None:
            return
        os.register_at_fork(after_in_child=_forked)
        import atexit
        atexit.register(_at_exit)
        _wrap(os, None, "_exit", _flushing_exit)
        targets = [(_OPTIM, _register_steps), (_DATALOADER, _register_data),
                   (_SCALER, _register_scaler), (_TRANSFORMERS, _register_transformers)]
        # Attached to a process that has compiled with torch.compile, global forward hooks would fail its compiled
        # code's guards and recompile it: the forward passes go untimed there (their time is the step's "other").
        if not (_attached and _compiled_already()):
            targets.insert(0, (_MODULE, _register_forward))
        targets += [(name, _register_lightning) for name in _LIGHTNING]
        for target, register in targets:
            module = sys.modules.get(target)
            if module is not None:  # e.g. a .pth file imported torch already
                register(module)
            else:
                sys.meta_path.insert(0, _Finder(target, register))
    except Exception:
        _path = None


def _compiled_already():
    """Whether torch.compile has compiled a graph in this process (an optimiser's first step imports dynamo
    without compiling anything)."""
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        return utils is not None and utils.counters["stats"]["unique_graphs"] > 0
    except Exception:
        return True


def attach(path):
    """``golow attach``: starts reporting to the socket at ``path`` in a process that is already running (called
    from a pending call, at a bytecode boundary of the main thread). The process connects at once, and a thread of
    the hook's waits on that connection: when the session ends (golow detaches, exits or is killed) the hook removes
    all it put in the process. True when it reports; False when the process already reports to a golow (a ``--cmd``
    worker's, or another session's)."""
    global _attached, _me
    try:
        with _lock:
            if _installed:
                return False
            _attached = True
            _me = _Process()
            install(path)
            if _path is None:
                return False
            _hold_session()
        return True
    except Exception:
        uninstall()
        return False


def _hold_session():
    """Connects an attached process and starts the thread that lets go of the process when the session ends. A
    ``_thread`` of its own: it is not among the script's ``threading`` threads, and never delays the exit."""
    import _thread
    _connect()
    _thread.start_new_thread(_wait_for_session_end, (_me.sock,))


def _wait_for_session_end(sock):
    try:
        while sock.recv(4096):
            pass
    except Exception:
        pass
    with _lock:
        if _me.sock is sock:
            uninstall()


def uninstall():
    """Removes every hook and wrapper install() put in the process, closes its socket and forgets the module, so
    that the process runs on as if it had never been attached to (a later attach loads the hook afresh). What
    os.register_at_fork registered cannot be removed: it does nothing once the hook is gone."""
    global _installed, _path, _attached
    try:
        with _lock:
            if not _installed:
                return
            _installed = False
            _flush_now()
            _path, _attached, _me.dead = None, False, True
            for finder in [f for f in sys.meta_path if isinstance(f, _Finder)]:
                sys.meta_path.remove(finder)
            while _step_hooks:
                _step_hooks.pop().remove()
            while _forward_hooks:
                _forward_hooks.pop().remove()
            while _wrapped:
                owner, name, original = _wrapped.pop()
                setattr(owner, name, original)
            import atexit
            atexit.unregister(_at_exit)
            if _me.operators:
                _looking(_me.operators.abandon)
            if _me.sock is not None and _me.pid == os.getpid():
                _close_connection(_me.sock)
            sys.modules.pop(_OPERATORS, None)
            if getattr(sys.modules.get(__name__), "__dict__", None) is globals():
                del sys.modules[__name__]
    except Exception:
        pass


def _close_connection(sock):
    """Closes the socket, waking the hook's thread if it waits on it (a plain close leaves a recv() in another thread
    blocked for good)."""
    import socket
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _forked():
    global _me, _lock
    if not _installed:  # removed since: os.register_at_fork keeps its handlers for good
        return
    _lock = threading.RLock()  # the parent's may have been held by another thread
    parent_stepped, parent_optimizing = _me.stepped, _me.optimizing_seen
    if _me.operators:
        # A child forked while the parent records a step (a data loader's workers) must not record on.
        _looking(_me.operators.abandon)
    _me = _Process()
    # Forward passes, and backward passes as steps, stay unsaid where the parent trains with an optimiser.
    _me.stepped, _me.optimizing_seen = parent_stepped, parent_optimizing
    if _attached:  # the parent's connection and its thread are not the child's: it holds the session itself
        try:
            _hold_session()
        except Exception:
            uninstall()


def _flushing_exit(original):
    """os._exit ends a process with no atexit (multiprocessing's forked children end so): what waits is written
    first."""
    def _exit(*args, **kwargs):
        _flush_now()
        return original(*args, **kwargs)
    return _exit


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
        _wrapped.append((owner, name, original))
    except Exception:
        pass


def _register_backward():
    """Times every backward pass (``loss.backward()`` goes through ``torch.autograd.backward``), stamps its start (in
    synchronous data-parallel training the ranks leave a step together, so the moment each starts its backward pass,
    towards the gradients' all-reduce, is what tells which rank arrived last) and keeps what it was called on: the
    loss."""
    def make(original):
        def backward(*args, **kwargs):
            start = None
            try:
                if not _compiling():
                    start = _me.arrived_ns = time.perf_counter_ns()
                    _keep_loss(args[0] if args else kwargs.get("tensors"))
                    _me.hook_ns += time.perf_counter_ns() - start
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
                took = time.perf_counter_ns()
                _me.pending_data_ns += took - start
            try:
                # A collated batch stacks its samples along the first dimension.
                _me.last_batch = _batch_size(batch)
                _me.pending_batches.append(_me.last_batch or 0)
                _me.pending_loader = (int(self._num_workers), bool(self._pin_memory))
                _me.hook_ns += time.perf_counter_ns() - took
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


def _first_tensor(value, depth=0):
    """A tensor, or the first tensor among a tuple's, list's or dict's first items (two levels down): the input a
    batch's size is read from. None where there is none."""
    try:
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return value
        if depth < 2:
            if isinstance(value, dict):
                value = list(value.values())
            if isinstance(value, (list, tuple)):
                for item in value[:4]:
                    tensor = _first_tensor(item, depth + 1)
                    if tensor is not None:
                        return tensor
    except Exception:
        pass
    return None


def _batch_size(value):
    """The first dimension of the first tensor of ``value`` (see _first_tensor): a batch's size, as the model and a
    DataLoader's collation take it. None where there is none."""
    try:
        shape = getattr(_first_tensor(value), "shape", None)
        return int(shape[0]) if shape is not None and len(shape) >= 1 else None
    except Exception:
        return None


def _register_scaler(module):
    """A GradScaler's step is the optimiser's phase too (it unscales and checks the gradients); one that finds
    infinite gradients skips the optimiser's step, which is then said as a skipped step. What it scales for a backward
    pass is a loss times its scale: the loss is the one it was given."""
    def make_step(original):
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

    def make_scale(original):
        def scale(self, outputs, *args, **kwargs):
            scaled = original(self, outputs, *args, **kwargs)
            try:
                if hasattr(scaled, "detach") and hasattr(outputs, "detach"):
                    import weakref
                    _me.scaled = (weakref.ref(scaled), outputs)
            except Exception:
                pass
            return scaled
        return scale

    _wrap(module, "GradScaler", "step", make_step)
    _wrap(module, "GradScaler", "scale", make_scale)


def _register_lightning(module):
    """Lightning's strategies run the module's ``training_step`` through ``Strategy.training_step``: what it returns
    (the loss, or a dict holding it) is the step's loss."""
    def make(original):
        def training_step(self, *args, **kwargs):
            _me.framework = True
            output = original(self, *args, **kwargs)
            _framework_loss(output.get("loss") if isinstance(output, dict) else output)
            return output
        return training_step

    _wrap(module, "Strategy", "training_step", make)


def _register_transformers(module):
    """Hugging Face's Trainer logs its training loss (averaged since its last log) through ``Trainer.log``."""
    def make_log(original):
        def log(self, logs, *args, **kwargs):
            if isinstance(logs, dict):
                _framework_loss(logs.get("loss"))
            return original(self, logs, *args, **kwargs)
        return log

    def make_training_step(original):
        def training_step(self, *args, **kwargs):
            _me.framework = True
            return original(self, *args, **kwargs)
        return training_step

    _wrap(module, "Trainer", "log", make_log)
    _wrap(module, "Trainer", "training_step", make_training_step)


def _framework_loss(value):
    """A loss a framework computed, said as the script's ``loss`` unless the script reports its own."""
    try:
        if _me.own_loss or value is None:
            return
        _say_loss(_host_value(value))
    except Exception:
        pass


def _host_value(value):
    """A number, a one-element tensor's value where reading it costs no wait (on the CPU), or a one-element tensor
    on a CUDA device (read once its copy to the host is done); None for anything else."""
    if not hasattr(value, "detach"):
        return float(value)
    if value.numel() != 1:
        return None
    value = value.detach()
    kind = value.device.type
    if kind == "cpu":
        return value.item()
    return value if kind == "cuda" else None


def _keep_loss(tensors):
    """What backward() is called on, when it is one value: a loss of the step under way. Inside an optimiser's step
    (a closure, evaluated once or many times) only the first counts: the loss at the step's start, which an
    optimiser's ``step(closure)`` returns."""
    if _me.own_loss or _me.framework:
        return
    if isinstance(tensors, (list, tuple)):
        if len(tensors) != 1:
            return
        tensors = tensors[0]
    scaled = _me.scaled
    if scaled is not None and scaled[0]() is tensors:
        tensors = scaled[1]
    value = _host_value(tensors)
    if value is None:
        return
    if _me.optimizing:
        if _me.closure_loss is None and not _me.losses:
            _me.closure_loss = value
        return
    if len(_me.losses) == _MAX_STEP_LOSSES:
        del _me.losses[0]
    _me.losses.append(value)


def _step_loss(by_backward=False):
    """The loss of the step that ends: the sum of its backward passes' outside an optimiser's step (a GAN's
    discriminator's two halves, accumulated micro-batches, each scaled by the script as it wants its gradient), else
    its closure's first; None where there was none. Forgotten then: the next step's starts afresh. A backward pass
    said as a step (no optimiser yet) has its own loss, and leaves it for the optimiser that may come to sum with the
    others of its iteration (the monitor then forgets what those steps said)."""
    if by_backward:
        return _me.losses[-1] if _me.losses else None
    losses, closure = _me.losses, _me.closure_loss
    _me.losses, _me.closure_loss = [], None
    if losses:
        total = losses[0]
        for loss in losses[1:]:
            total = total + loss
        return total
    return closure


def _number(value):
    """A float as JSON carries it: a number, or the schema's word for one that is not finite."""
    value = float(value)
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _say_loss(value):
    """Says a loss as a scalar: a number at once, a CUDA tensor once its copy to the host is done, at a later step."""
    if value is None:
        return
    if hasattr(value, "detach"):
        torch = sys.modules["torch"]
        host = value.to("cpu", non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        _me.pending_losses.append((host, done))
        del _me.pending_losses[:-_MAX_PENDING_LOSSES]
        return
    _send({"type": "scalar", "name": "loss", "value": _number(value)})


def _copied_losses():
    """Says the losses whose copies to the host are done, in their order."""
    try:
        while _me.pending_losses and _me.pending_losses[0][1].query():
            host, _ = _me.pending_losses.pop(0)
            _say_loss(host.item())
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


def _sequence_first_modules(model):
    """The ids of the model's recurrent and attention modules that take their input as (time, batch, …)
    (``batch_first=False``, torch's default): the batch a pass went through is then the second dimension of what
    the first of them takes, not the first of the model's input."""
    nn = sys.modules.get("torch.nn")
    kinds = tuple(kind for kind in (getattr(nn, "RNNBase", None), getattr(nn, "MultiheadAttention", None)) if kind)
    return frozenset(id(m) for m in model.modules() if isinstance(m, kinds) and m.batch_first is False)


def _sequence_batch(args):
    """The batch of a sequence-first module's input: the second dimension of a (time, batch, features) tensor, the
    first size of a packed sequence, one for an unbatched (time, features) tensor."""
    value = args[0] if args else None
    sizes = getattr(value, "batch_sizes", None)  # a PackedSequence
    if sizes is not None:
        return int(sizes[0])
    shape = getattr(value, "shape", None)
    if shape is None or len(shape) < 2:
        return None
    return int(shape[1]) if len(shape) >= 3 else 1


def _on_module_start(module, args):
    """Every module's call: the first with parameters called outside any other is the model, and its calls are
    timed."""
    global _model, _module_calls, _sequence_first
    try:
        if _compiling():
            return
        _module_calls += 1
        if _me.watch is not None:
            _watch_profile()
        if not _counting:
            return
        model = _model() if _model is not None else None
        if model is not None and module is not model:  # the hot path: every other module's call
            if _sequence_first and id(module) in _sequence_first and _me.depth and _me.pass_sequence_samples is None:
                _me.pass_sequence_samples = _sequence_batch(args)
            return
        entered = time.perf_counter_ns()
        with _lock:
            if model is None:
                if next(iter(module.parameters()), None) is None:
                    return
                import weakref
                _model = weakref.ref(module)
                _sequence_first = _sequence_first_modules(module)
                model = module
            if module is not model:
                return
            _me.depth += 1
            if _me.depth == 1:
                # A batch the model takes with gradients was the step's data; one an evaluation pass takes (no
                # gradients) was waited for by the step's "other".
                taken = _me.pending_batches.popleft() if _me.pending_batches else 0
                if _grad_enabled():
                    _me.data_ns += _me.pending_data_ns
                    _me.loader_samples += taken
                    _me.loader = _me.pending_loader or _me.loader
                _me.pending_data_ns = 0
                # torch.jit.trace records what is read of its inputs' shapes: nothing is read there.
                tensor = None if _jit_tracing() else _first_tensor(args)
                _me.pass_input = _weak(tensor)
                size = _batch_size(tensor)
                _me.pass_samples = size if size is not None else _me.last_batch
                _me.pass_sequence_samples = None
                _me.pass_start_ns = time.perf_counter_ns()
                if _me.first_forward_ns is None:
                    _me.first_forward_ns = _me.pass_start_ns
        _me.hook_ns += time.perf_counter_ns() - entered
    except Exception:
        _stop_counting_passes()


def _weak(value):
    if value is None:
        return None
    try:
        import weakref
        return weakref.ref(value)
    except TypeError:
        return None


def _count_pass_samples():
    """Adds the pass that ended to the step's samples, unless its input was counted already in the step."""
    samples = _me.pass_sequence_samples if _me.pass_sequence_samples is not None else _me.pass_samples
    taken = _me.pass_input() if _me.pass_input is not None else None
    if taken is not None:
        if any(ref() is taken for ref in _me.step_inputs):
            return
        if len(_me.step_inputs) < _MAX_STEP_INPUTS:
            _me.step_inputs.append(_me.pass_input)
    _me.input_samples += samples or 0


def _on_module_end(module, args, output):
    try:
        if _compiling():
            return
        if _me.watch is not None:
            _watch_profile()
        if not _counting or _model is None or module is not _model():
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
                _count_pass_samples()
                if _me.optimizing:
                    _me.nested_ns += now - start
            if not _me.stepped:
                last = _me.last_pass_ns
                event = {
                    "type": "forward_pass",
                    "pass": _me.passes,
                    "ms": _ms(now - start),
                    "interval_ms": None if last is None else _ms(start - last),
                    "grad": grad,
                    "t_ns": now,
                }
                _me.passes += 1
                _me.last_pass_ns = start
                _send(event)
        _me.hook_ns += time.perf_counter_ns() - now
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
    entered = time.perf_counter_ns()
    _optimizing_begins()
    _me.hook_ns += time.perf_counter_ns() - entered


def _loader_samples_of_step():
    """The samples of the DataLoader batches the step took. Batches waited on and left untaken, beyond the one a
    loader fetching ahead holds, went into the step all the same (a model called once on several batches)."""
    while len(_me.pending_batches) > 1:
        _me.loader_samples += _me.pending_batches.popleft()
    return _me.loader_samples


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
        "samples": _loader_samples_of_step() or _me.input_samples or None,
        "hook_ms": _ms(_me.hook_ns + (_module_calls - _me.module_calls) * _module_call_ns()),
    }
    if _me.loader is not None:
        cuda = getattr(sys.modules.get("torch"), "cuda", None)
        setup = _me.loader + (bool(cuda is not None and cuda.is_initialized()),)
        if setup != _me.loader_said:
            _me.loader_said = setup
            phases["loader"] = {"num_workers": setup[0], "pin_memory": setup[1], "cuda": setup[2]}
    return phases


def _module_call_ns():
    """What golow's global forward hooks cost one module call, measured once: a module with nothing to compute
    called through torch's hook dispatch, against its forward called directly. Where it cannot be measured, 0."""
    global _call_ns
    if _call_ns is None:
        _call_ns = 0
        try:
            nn = sys.modules["torch.nn"]
            probe = nn.Identity()
            calls = 200
            began = time.perf_counter_ns()
            for _ in range(calls):
                probe(None)
            hooked = time.perf_counter_ns() - began
            began = time.perf_counter_ns()
            for _ in range(calls):
                probe.forward(None)
            direct = time.perf_counter_ns() - began
            _call_ns = max(0, (hooked - direct) // calls)
        except Exception:
            pass
    return _call_ns


def _next_step(now):
    """The step under way ends at ``now``: the next one's phases start from nothing."""
    _me.data_ns = _me.pending_data_ns = _me.forward_ns = _me.backward_ns = _me.optimizer_ns = 0
    _me.forward_passes_in_step = _me.backward_passes_in_step = 0
    _me.loader_samples = _me.input_samples = 0
    _me.step_inputs = []
    _me.hook_ns, _me.module_calls = 0, _module_calls
    _me.tainted = False
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
            event = {"type": "optimizer_step", "optimizer": index, "step": step, "interval_ms": interval_ms,
                     "t_ns": now}
            if _me.arrived_ns is not None:
                # perf_counter is CLOCK_MONOTONIC on Linux: one clock for every rank of the machine.
                event["arrived_ns"] = _me.arrived_ns
                _me.arrived_ns = None
            first = not _me.stepped
            if first:
                _me.stepped = True
                if _me.first_forward_ns is not None:
                    event["first_step_ms"] = _ms(now - _me.first_forward_ns)
                if _me.backward_passes:
                    _steps_are_the_optimisers()
            if index == 0:
                entry[2] = _step_ends(event, step, interval_ms, now, first)
            else:
                _step_loss()  # another optimiser's (a GAN's generator's) loss is not the worker's step's
                _send(event)
                entry[2] = now
            entry[1] = step + 1
    except Exception:
        pass


def _steps_are_the_optimisers():
    """An optimiser steps in a process whose backward passes were said as its steps: profiles are scheduled by the
    optimiser's steps from here, with their budget afresh, and one under way (begun for a backward pass) is dropped,
    its step marked."""
    recorder, _me.operators, _me.watch = _me.operators, None, None
    if recorder and recorder.recording:
        _me.tainted = True
        _looking(recorder.abandon)


def _step_ends(event, step, interval_ms, now, first, by_backward=False):
    """The worker's step (its first optimiser's, or a backward pass while it has none) ends at ``now``: ``event``
    said with where its time went, whether it was profiled and its loss (one on a device said once read, as a
    scalar); the next step is profiled if its turn comes. Returns when the next step's interval starts: what looking
    took is in neither step."""
    if interval_ms is not None:
        event["phases"] = _phases(now)
    operators = _looking(_operators)
    if operators is not None and _looking(operators.end, interval_ms or 0.0):
        event["profiled"] = True
    _me.watch = None
    if _me.tainted:
        event["profiled"] = True
    loss = _step_loss(by_backward)
    on_device = hasattr(loss, "detach")
    if loss is not None and not on_device:
        event["loss"] = _number(loss)
    _send(event, at_once=first)
    if on_device:
        _say_loss(loss)
    if _me.pending_losses:
        _copied_losses()
    if operators is not None:
        _looking(operators.send, _send)
        if _looking(operators.begin, step + 1):
            _watch_begins()
        now = time.perf_counter_ns()
    _next_step(now)
    return now


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
                     "interval_ms": None if last is None else _ms(now - last), "skipped": True, "t_ns": now}
            if index == 0 and last is not None:
                event["phases"] = _phases(now)
            _me.arrived_ns = None
            _step_loss()
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
            interval_ms = None if last is None else _ms(now - last)
            event = {"type": "backward_pass", "pass": _me.backward_passes, "interval_ms": interval_ms, "t_ns": now}
            _me.last_backward_end_ns = _step_ends(
                event, _me.backward_passes, interval_ms, now, last is None, by_backward=True)
            _me.backward_passes += 1
    except Exception:
        pass


def _load_operators():
    """golow_operators, from beside this file, under a name no module of the user's can have."""
    module = sys.modules.get(_OPERATORS)
    if module is None:
        import importlib.machinery
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golow_operators.py")
        loader = importlib.machinery.SourceFileLoader(_OPERATORS, path)
        module = type(sys)(_OPERATORS)
        module.__file__, module.__loader__ = path, loader
        module.__spec__ = importlib.machinery.ModuleSpec(_OPERATORS, loader, origin=path)
        loader.exec_module(module)
        sys.modules[_OPERATORS] = module
    return module


def _operators():
    """The process's operator recorder: steps past the warm-up are profiled, one in GOLOW_OPS_EVERY within a budget
    of time, in a process that is not a rank other than 0 (the monitor charts the first process's steps); None when
    there is nothing to record."""
    if _me.operators is None:
        _me.operators = False
        every = _env_int("GOLOW_OPS_EVERY") or 0
        if every > 0 and _env_int("RANK") in (None, 0):
            warmup = _env_int("GOLOW_OPS_WARMUP") or 0
            # Not the first step past the warm-up, which is rarely like the others yet.
            _me.operators = _load_operators().Operators(every, warmup, first=warmup + max(1, every // 2))
            _me.profiles = True
    return _me.operators or None


def _looking(call, *args):
    """A call of the operator recorder: one that fails turns it off for the process, and never costs the step's
    event."""
    try:
        return call(*args)
    except Exception as e:
        _profiling_off(f"the profiler failed: {type(e).__name__}")
        return None


class _Watch:
    """A profile under way, bounded: it may last at most _PROFILE_MAX_NS and grow the process by at most
    _PROFILE_MAX_GROWTH (read from /proc every _PROFILE_CHECK_NS)."""

    def __init__(self):
        self.since = time.perf_counter_ns()
        self.next_check = self.since + _PROFILE_CHECK_NS
        self.resident = _resident_bytes()

    def overrun(self, now):
        """Why the profile must stop now; None while it may go on."""
        if now - self.since > _PROFILE_MAX_NS:
            return f"a profiled step ran past {_PROFILE_MAX_NS / 1e9:.0f} s"
        if now >= self.next_check:
            self.next_check = now + _PROFILE_CHECK_NS
            resident = _resident_bytes()
            if resident is not None and self.resident is not None and resident - self.resident > _PROFILE_MAX_GROWTH:
                return f"a profiled step grew the process by {(resident - self.resident) >> 20} MiB"
        return None


def _resident_bytes():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        return None


def _watch_begins():
    try:
        _me.watch = _Watch()
    except Exception:
        _me.watch = None


def _watch_profile():
    """Checked at every module call while a step is profiled: a profile past its bounds is given up for good."""
    try:
        why = _me.watch.overrun(time.perf_counter_ns())
        if why is not None:
            with _lock:
                _me.tainted = True
                _profiling_off(why)
    except Exception:
        _me.watch = None


def _profiling_off(reason):
    """No operators are recorded in this process from now on, and the monitor is told why, once."""
    _me.watch = None
    recorder, _me.operators = _me.operators, False
    if recorder:
        try:
            recorder.abandon()
        except Exception:
            pass
    if _me.profiles:
        _me.profiles = False
        _send({"type": "profiling_off", "reason": reason[:_MAX_REASON]})


def _at_exit():
    """At exit: the profile begun for a step that never came is stopped, what the last window holds sent, a process
    that stepped and was never profiled says why, the losses whose copies are done said (the last steps'), and
    everything written."""
    try:
        with _lock:
            if _me.pending_losses:
                _copied_losses()
            recorder = _me.operators
            if recorder:
                recorder.abandon()
                recorder.send(_send, now=True)
                if recorder.profiled == 0:
                    _profiling_off(recorder.why_none())
    except Exception:
        pass
    _flush_now()


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


# One encoder for every line: json.dumps with any option builds a new one per call.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _send(event, at_once=False):
    """Queues one event line, connecting first if this process has not yet; the queue is written once
    _FLUSH_NS have passed since the last write (or it holds _FLUSH_BYTES, or ``at_once``). Silent for good once
    anything fails."""
    if _path is None or _me.dead:
        return
    try:
        began = time.perf_counter_ns()
        if _me.sock is None:
            _connect()
        if not _me.greeted:
            _greet()
            at_once = True
        line = _encode(event) + "\n"
        _me.unsent.append(line)
        _me.unsent_bytes += len(line)
        if at_once or began - _me.flushed_ns >= _FLUSH_NS or _me.unsent_bytes >= _FLUSH_BYTES:
            _flush(began)
        _me.hook_ns += time.perf_counter_ns() - began
    except Exception:
        _fall_silent()


def _flush(now):
    """Writes what waits; the caller catches what fails."""
    if not _me.unsent and not _me.unwritten:
        return
    st = os.fstat(_me.sock.fileno())
    if (st.st_dev, st.st_ino) != _me.sock_id:
        # The script closed our descriptor and its number was reused: never write JSON into its file.
        raise OSError("event socket was replaced")
    data = _me.unwritten + "".join(_me.unsent).encode()
    _me.unsent, _me.unsent_bytes, _me.flushed_ns = [], 0, now
    if not _attached:
        # MSG_NOSIGNAL: a script that restored SIGPIPE's default must not die when the monitor goes.
        _me.sock.sendall(data, _me.no_signal)
        return
    # An attached process never waits for golow: what the socket cannot take now waits for the next write, and a
    # monitor that stops reading for good is let go.
    try:
        sent = _me.sock.send(data, _me.no_signal | _me.no_wait)
    except BlockingIOError:
        sent = 0
    _me.unwritten = data[sent:]
    if len(_me.unwritten) > _MAX_BACKLOG:
        raise OSError("the monitor stopped reading")


def _fall_silent():
    """The monitor cannot be written to: a ``--cmd`` process stays quiet for good, an attached one is let go."""
    _me.dead = True
    if _attached:
        uninstall()  # a no-op when called from uninstall's own last write


def _flush_now():
    if _path is None or _me.dead or _me.sock is None or _me.pid != os.getpid():
        return
    try:
        with _lock:
            _flush(time.perf_counter_ns())
    except Exception:
        _fall_silent()


def _connect():
    import socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inherited by exec'd children
    sock.connect(_path)
    st = os.fstat(sock.fileno())
    _me.sock, _me.sock_id, _me.no_signal = sock, (st.st_dev, st.st_ino), socket.MSG_NOSIGNAL
    _me.no_wait = socket.MSG_DONTWAIT


def _greet():
    """Queues the process's hello first: a process is counted once it has something to say (an attached process
    connects before, and a DataLoader worker forked from it may never say anything)."""
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
    _me.unsent.insert(0, _encode(hello) + "\n")
    _me.greeted = True


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
            _send({"type": "scalar", "name": str(name)[:_MAX_NAME], "value": _number(value)})


def phase(name):
    """golow.phase: marks what the script does from now on, e.g. phase("eval")."""
    with _lock:
        _send({"type": "phase", "name": str(name)[:_MAX_NAME]})
