"""golow: one event per PyTorch optimiser step, without touching the user's script.

Loaded by golow's sitecustomize.  Importing torch takes seconds, so nothing
here imports it: a meta-path finder waits for the user's code to import
``torch.optim.optimizer`` and only then registers a global step post-hook.
Whatever goes wrong in here must never reach the user's program.
"""

import json
import os
import signal
import sys
import threading
import time

_TARGET = "torch.optim.optimizer"

_installed = False
_fd = None          # event fd; None once emitting has stopped
_fd_id = None       # (st_dev, st_ino) of the fd when we took it
_pid = None         # only this process emits; forked children inherit the fd
_lock = threading.Lock()  # optimisers may step from several threads
_step = 0
_last_ns = None


def install():
    """Start watching for torch if golow gave us a usable event fd."""
    global _installed, _fd, _fd_id, _pid
    try:
        if _installed:  # a second copy of the hook dir must not double events
            return
        _installed = True
        # Consume the variable: our descendants may have an unrelated fd with
        # that number (spawned workers, subprocesses) and must not write to it.
        raw = os.environ.pop("GOLOW_EVENT_FD", None)
        if raw is None:
            return
        fd = int(raw)
        if fd < 0 or not _writable(fd):
            return
        st = os.fstat(fd)
        if fd > 2:
            # Keep the pipe's write end out of exec'd children, so that one
            # lingering grandchild cannot hide EOF from the monitor.
            os.set_inheritable(fd, False)
        _fd, _fd_id, _pid = fd, (st.st_dev, st.st_ino), os.getpid()

        module = sys.modules.get(_TARGET)
        if module is not None:  # e.g. a .pth file imported torch already
            _register(module)
        else:
            sys.meta_path.insert(0, _Finder())
    except Exception:
        _fd = None


def _writable(fd):
    import fcntl
    try:
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:  # closed or never opened
        return False
    return mode in (os.O_WRONLY, os.O_RDWR)


class _Finder:
    """Lets the real finders locate torch.optim.optimizer, then wraps its loader."""

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:  # the hot path for every other import
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
            spec.loader = _Loader(spec.loader)
            return spec
        except Exception:
            # Defer to the normal machinery; it will redo (and report) the search.
            return None


class _Loader:
    def __init__(self, loader):
        self._loader = loader

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
        _register(module)


def _register(module):
    try:
        module.register_optimizer_step_post_hook(_on_step)
    except Exception:
        pass


def _on_step(optimizer, args, kwargs):
    global _step, _last_ns, _fd
    try:
        if _fd is None or os.getpid() != _pid:
            return
        with _lock:
            now = time.perf_counter_ns()
            interval = None if _last_ns is None else round((now - _last_ns) / 1e6, 3)
            event = {"type": "optimizer_step", "step": _step, "interval_ms": interval}
            _step += 1
            _last_ns = now
            _write((json.dumps(event, separators=(",", ":")) + "\n").encode())
    except Exception:
        _fd = None  # the monitor went away or the fd was reused: stop quietly


def _write(data):
    # If the script closed our fd and the number got reused, do not write
    # JSON into the user's file.
    st = os.fstat(_fd)
    if (st.st_dev, st.st_ino) != _fd_id:
        raise OSError("event fd was replaced")
    # A script that restored SIGPIPE to SIG_DFL would be killed by a write to
    # a closed pipe; block it around the write and discard it if it fired.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    try:
        while data:
            data = data[os.write(_fd, data):]
    except BrokenPipeError:
        if signal.SIGPIPE not in old and signal.SIGPIPE in signal.sigpending():
            signal.sigtimedwait({signal.SIGPIPE}, 0)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
