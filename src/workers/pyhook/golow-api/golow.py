"""golow's optional API for a script run under ``golow run --cmd``.

A script needs nothing of this to be measured: golow times its optimiser
steps (and, before any, its model's forward passes) on its own.  This is for a
script that wants its loss, accuracy or throughput in golow's panes, or its
phases told apart:

    import golow
    ...
    golow.phase("train")
    golow.report(loss=loss.item(), samples=len(batch))

``report`` takes numbers (``loss``, ``accuracy`` and ``samples`` fill the
panes; any other name is recorded as it comes).  A tensor is read with
``float()``, which waits for the GPU: pass numbers the script already has.

Under golow this module comes from the session and speaks to its step hook.
Installed with golow's wheel it is importable anywhere, and both calls do
nothing when the process is not monitored, so a script may call them
unconditionally.
"""

try:
    from golow_step_hook import phase, report
except ImportError:  # not run under golow: there is no one to tell

    def report(**scalars):
        """golow.report: numbers the script reports; nothing to do unmonitored."""

    def phase(name):
        """golow.phase: marks what the script does from now on; nothing to do unmonitored."""


__all__ = ["phase", "report"]
