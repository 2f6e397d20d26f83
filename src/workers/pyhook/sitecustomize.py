"""golow start-up hook, put first on PYTHONPATH by ``golow run``.

Python imports this automatically.  It arms the optimiser-step hook (see
golow_step_hook) and then runs the user's own sitecustomize, which ours
otherwise shadows.
"""

import os
import sys


def _install_step_hook():
    if "GOLOW_EVENT_SOCKET" not in os.environ:  # not monitored: cost nothing
        return
    try:
        import golow_step_hook
        golow_step_hook.install()
    except Exception:  # never break the user's program
        pass


def _chain_sitecustomize():
    import importlib.machinery

    here = os.path.dirname(os.path.realpath(__file__))
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


_install_step_hook()
_chain_sitecustomize()
