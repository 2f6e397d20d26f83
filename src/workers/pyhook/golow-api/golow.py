"""golow's optional API for a script run under ``golow run --cmd``.

A script needs nothing of this to be measured: golow times its optimiser
steps (and, before any, its model's forward passes), and takes its loss from
what it calls ``backward()`` on, on its own.  This is for a script that wants
a number of its own in golow's panes, or its phases told apart:

    import golow
    ...
    golow.phase("train")
    golow.report(accuracy=correct / total, samples=len(batch))

``report`` takes numbers (``loss``, ``accuracy`` and ``samples`` fill the
panes, a reported ``loss`` replacing the one golow takes itself; any other
name is recorded as it comes).  A tensor is read with ``float()``, which waits
for the GPU: pass numbers the script already has.

Under golow this module comes from the session (last on ``sys.path``: a module
of the script's own named ``golow`` comes first) and speaks to the step hook.
Installed with golow's wheel it is importable anywhere, and both calls do
nothing when the process is not monitored, so a script may call them
unconditionally.
"""

import sys

_HOOK = "golow-step-hook"  # the name golow's sitecustomize loads the step hook under


def report(**scalars):
    """golow.report: numbers the script reports, e.g. report(accuracy=0.9, samples=64)."""
    hook = sys.modules.get(_HOOK)
    if hook is not None:
        hook.report(**scalars)


def phase(name):
    """golow.phase: marks what the script does from now on, e.g. phase("eval")."""
    hook = sys.modules.get(_HOOK)
    if hook is not None:
        hook.phase(name)


__all__ = ["phase", "report"]
