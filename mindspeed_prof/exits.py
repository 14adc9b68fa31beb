"""Flush the profile on the ways out of a process that skip ``finally`` blocks.

``atexit`` covers ``sys.exit`` and a normal end outside any hooked loop. SIGTERM (what torchrun
sends the surviving ranks when one fails) kills a Python process without running ``finally`` or
``atexit``; while a manager is alive we take SIGTERM over, flush, then die of SIGTERM exactly as
the process would have without us. We only take it over when nobody else handles it: Megatron's
``--exit-signal-handler`` installs its own and exits through ``sys.exit``, which we see anyway.
"""

import atexit
import os
import signal
import threading

# torchrun follows SIGTERM with SIGKILL after 30 s; leave room to die on our own terms.
SIGNAL_FLUSH_TIMEOUT_S = 20


class FlushOnExit:
    def __init__(self, close):
        """``close(reason, detail, wait_timeout=None)`` is the manager's idempotent close."""
        self._close = close
        self._took_sigterm = False

    def install(self):
        atexit.register(self._at_exit)
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, self._on_sigterm)
            self._took_sigterm = True

    def uninstall(self):
        atexit.unregister(self._at_exit)
        if self._took_sigterm and threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._took_sigterm = False

    def _at_exit(self):
        self._close("process exit", "the training loop did not close the profiler")

    def _on_sigterm(self, signum, frame):
        self._close("signal", "SIGTERM", wait_timeout=SIGNAL_FLUSH_TIMEOUT_S)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
