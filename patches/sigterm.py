"""SIGTERM inside a Megatron job: flush this rank's profile, then let the signal do what it did.

When one rank fails, torchrun sends SIGTERM to the others (SIGKILL 30 s later). Python's default
SIGTERM ends the process without running ``finally`` blocks or ``atexit``, so a rank inside its
window would lose its trace. The manager takes SIGTERM over only while nobody else handles it,
but by the time it arms, other code may already have installed a handler (a launcher, a logging
or metrics library); then the manager stayed out and the window was lost.

So when Megatron's args are validated with profiling on, we install a handler that flushes and
then *chains* to whatever was there before (calling it, or dying of SIGTERM as the default would).
That moment comes before Megatron's own ``--exit-signal-handler`` is installed
(``set_global_variables`` runs after ``validate_args``): Megatron's latch then owns SIGTERM, ends
training through ``sys.exit`` at the end of the iteration, and ``train()``'s ``finally`` flushes.

While that ``finally`` flushes, ``deferred()`` holds SIGTERM and SIGINT back: when one rank fails,
torchrun's SIGTERM (or its forwarded SIGINT) reaches the others while they are still closing after
their own exception or Ctrl-C, and would cut the final manifest short. The held signal is sent
again once the profile is on disk, so the process still ends the way it would have.
"""

import contextlib
import os
import signal
import threading

from mindspeed_prof import log
from mindspeed_prof.exits import SIGNAL_FLUSH_TIMEOUT_S
from mindspeed_prof.patches.state import state

# The core's bound, for the same reason: torchrun's SIGKILL follows its SIGTERM after 30 s.
FLUSH_TIMEOUT_S = SIGNAL_FLUSH_TIMEOUT_S


def _flush():
    manager = state.manager or state.finished_manager
    if manager is None:
        return
    if not manager.closed:
        manager.close("signal", "SIGTERM", wait_timeout=FLUSH_TIMEOUT_S)
    elif not manager.wait(FLUSH_TIMEOUT_S):
        log.error(f"SIGTERM: the trace was still being written after {FLUSH_TIMEOUT_S} s; "
                  f"it is incomplete", rank=manager.rank)


def _chained(previous):
    def mindspeed_prof_flush_on_sigterm(signum, frame):
        try:
            _flush()
        finally:
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

    mindspeed_prof_flush_on_sigterm.previous = previous
    return mindspeed_prof_flush_on_sigterm


def install():
    """Take SIGTERM over, chained to the current handler; idempotent, main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is None or current is state.sigterm_handler:
        return  # a handler installed from C (we could not chain to it), or ours already
    state.sigterm_handler = _chained(current)
    signal.signal(signal.SIGTERM, state.sigterm_handler)


def uninstall():
    """Put the handler we chained to back, if ours is still the one installed."""
    handler = state.sigterm_handler
    state.sigterm_handler = None
    if handler is None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is handler:
        signal.signal(signal.SIGTERM, handler.previous)


@contextlib.contextmanager
def deferred(signals=(signal.SIGTERM, signal.SIGINT)):
    """Hold ``signals`` back during the block, then deliver them (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending, saved = [], {}
    for signum in signals:
        handler = signal.getsignal(signum)
        if handler is not None:  # None: installed from C, cannot be restored from Python
            saved[signum] = handler
            signal.signal(signum, lambda received, frame: pending.append(received))
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):
            os.kill(os.getpid(), signum)
