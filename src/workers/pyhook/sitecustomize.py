"""golow start-up hook, put first on PYTHONPATH by ``golow run``.

Python imports this automatically.  It arms the optimiser-step hook (see
golow-hook/golow_step_hook.py) and then runs the user's own sitecustomize,
which ours otherwise shadows.

Nothing else of golow's is importable from this directory: the hook's modules
live in ``golow-hook/`` (not a name an import statement can reach) and are
loaded by path under names no module of the user's can have, and the optional
API (``import golow``) goes last on ``sys.path``, so that a module of the
user's named ``golow`` (or anything else) is found before any of golow's.
"""

import os
import sys

_HOOK = "golow-step-hook"  # its name in sys.modules: a hyphen no import statement can spell


def _load(name, path):
    """The module at ``path``, run under ``name``; importlib.util is not used, it pulls in contextlib & co (~3 ms)."""
    import importlib.machinery

    loader = importlib.machinery.SourceFileLoader(name, path)
    module = type(sys)(name)
    module.__file__ = path
    module.__loader__ = loader
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader, origin=path)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _install_step_hook(here):
    # The API is importable wherever golow put this directory; its calls do nothing unless the hook is loaded.
    sys.path.append(os.path.join(here, "golow-api"))
    if "GOLOW_EVENT_SOCKET" not in os.environ:  # not monitored: cost nothing
        return
    try:
        _load(_HOOK, os.path.join(here, "golow-hook", "golow_step_hook.py")).install()
    except Exception:  # never break the user's program
        pass


def _chain_sitecustomize(here):
    import importlib.machinery

    path = [p for p in sys.path
            if isinstance(p, str) and os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    import importlib.util  # only now: it pulls in contextlib & co (~3 ms)

    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        # Errors in the user's sitecustomize are theirs: let site.py report
        # them exactly as it would have without golow.
        sys.modules.pop("sitecustomize", None)
        raise


_here = os.path.dirname(os.path.realpath(__file__))
_install_step_hook(_here)
_chain_sitecustomize(_here)
del _here
