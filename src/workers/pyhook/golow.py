"""golow's optional API for a script run under ``golow run --cmd``.

A script needs nothing of this to be measured: golow times its optimiser
steps (and, before any, its model's forward passes) on its own.  This is for a
script that wants its loss, accuracy or throughput in golow's panes, or its
phases told apart.  It is importable only under golow, so guard the import:

    try:
        import golow
    except ImportError:  # not run under golow
        golow = None
    ...
    if golow:
        golow.phase("train")
        golow.report(loss=loss.item(), samples=len(batch))

``report`` takes numbers (``loss``, ``accuracy`` and ``samples`` fill the
panes; any other name is recorded as it comes).  A tensor is read with
``float()``, which waits for the GPU: pass numbers the script already has.
Both calls do nothing when the process is not monitored.
"""

from golow_step_hook import phase, report

__all__ = ["phase", "report"]
