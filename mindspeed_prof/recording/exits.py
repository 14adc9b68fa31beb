"""Flush the profile on every way out of a process, and let nothing from a dying job stop it.

One mechanism for every scenario (training, plain loops, inference and RL drivers):

* ``FlushOnExit(close)``: a recorder registers its idempotent ``close`` while it may hold a
  session. ``atexit`` covers ``sys.exit`` and a normal end outside any hooked loop; SIGTERM
  (what SLURM's ``scancel`` and time limit, ``timeout``, a container stop and torchrun send)
  kills a Python process without running ``finally`` or ``atexit``, so while anything is
  registered the process's SIGTERM handler flushes every registered recorder, then *chains* to
  the handler that was there before (calling it, or dying of SIGTERM as the default would).
* ``install_signal_flush(pin=True)``: an integration may take SIGTERM over earlier than the first
  recorder arms (Megatron's patches do it when the args are validated, before Megatron installs
  its own ``--exit-signal-handler``). The handler is installed once per process: a handler
  installed after ours (Megatron's latch) owns SIGTERM from then on; it ends the loop through
  ``sys.exit``, whose ``finally`` flushes.
* ``flush.final_flush()``: the block every final flush runs in (``flush.py``), and
  ``sections.signal_safe``/``SignalSafeLock``: where our handlers only take note, and the
  deadline a SIGTERM has (``sections.py``). Both are re-exported here.
"""

import atexit
import os
import signal
import sys
import time
from typing import Any, Callable, List, Optional

from .. import log
from .flush import (ChildGuard, ExitEvents, HELD_SIGNALS, final_flush, flushing, guarded,
                    hand_on_children)
from .sections import (ENDING_GRACE_S, SIGNAL_FLUSH_TIMEOUT_S, SignalSafeLock, _deferred,
                       _main_thread, _pending, _watchdog, signal_name, signal_safe, writing)

__all__ = ["ENDING_GRACE_S", "ExitEvents", "FlushOnExit", "HELD_SIGNALS", "SIGNAL_FLUSH_TIMEOUT_S",
           "SignalSafeLock", "exit_reason", "final_flush", "guard_children", "hand_on_children",
           "install_signal_flush",
           "note_process_outcome", "process_end_reason", "signal_name", "signal_safe",
           "uninstall_signal_flush", "writing"]


class _Process:
    """The process-wide part: one SIGTERM handler, the registered flushers, the open guard."""

    def __init__(self) -> None:
        self.lock = SignalSafeLock(reentrant=True)
        self.flushers: List["FlushOnExit"] = []
        self.handler: Any = None  # ours, while installed
        self.previous: Any = None  # the handler ours chains to
        self.owner: Optional[int] = None  # pid that installed it: forked children must not
        # flush its recorders
        self.pinned = False  # installed by an integration: stays when the last flusher leaves
        self.replaced = False  # someone installed a handler over ours: they own SIGTERM now
        self.interrupted = False  # a SIGINT reached the process (Ctrl-C)


_process = _Process()



def _handler(signum: int) -> Any:
    """The handler of ``signum`` as the process will have it outside a final flush's hold."""
    saved = flushing.saved
    if saved is not None and signum in saved:
        return saved[signum]
    return signal.getsignal(signum)


def _set_handler(signum: int, handler: Any) -> None:
    saved = flushing.saved
    if saved is not None and signum in saved:
        saved[signum] = handler  # the hold puts it in place when the flush ends
    else:
        signal.signal(signum, handler)


def install_signal_flush(pin: bool = False) -> None:
    """Take SIGTERM over, chained to the current handler; once per process, main thread only.

    ``pin``: keep it installed when no recorder is registered (until ``uninstall_signal_flush``).
    A process that ignores SIGTERM (or SIGINT) keeps ignoring it: a signal it ignores never ends
    it, and atexit flushes when it does end."""
    if not _main_thread():
        return
    _watchdog.start()
    state = _process
    with state.lock:
        state.pinned = state.pinned or pin
        if state.owner != os.getpid():
            state.handler, state.replaced = None, False  # a forked child starts afresh
        if state.handler is not None:
            if _handler(signal.SIGTERM) is not state.handler:
                state.replaced = True
            return
        current = _handler(signal.SIGTERM)
        if current is None or current == signal.SIG_IGN:
            return  # installed from C (we could not chain to it), or ignored by the host
        if current is not mindspeed_prof_flush_on_sigterm:  # never chained to itself
            state.previous = current
        state.owner, state.replaced = os.getpid(), False
        state.handler = mindspeed_prof_flush_on_sigterm
        _set_handler(signal.SIGTERM, mindspeed_prof_flush_on_sigterm)
        guard_children()
        if _handler(signal.SIGINT) is signal.default_int_handler:
            # Only noted: servers catch the KeyboardInterrupt (werkzeug's serve_forever) and end
            # normally, and the manifest must still say the run was interrupted.
            _set_handler(signal.SIGINT, mindspeed_prof_note_sigint)


def uninstall_signal_flush() -> None:
    """Put the handler we chained to back, if ours is still the one installed."""
    state = _process
    with state.lock:
        handler, state.handler, state.pinned = state.handler, None, False
        if handler is None or not _main_thread() or state.owner != os.getpid():
            return
        if _handler(signal.SIGTERM) is handler:
            _set_handler(signal.SIGTERM, state.previous)
        if _handler(signal.SIGINT) is mindspeed_prof_note_sigint:
            _set_handler(signal.SIGINT, signal.default_int_handler)
        sigchld = getattr(signal, "SIGCHLD", None)
        if sigchld is not None and isinstance(_handler(sigchld), ChildGuard):
            _set_handler(sigchld, _handler(sigchld).inner)


def guard_children() -> None:
    """Wrap the process's SIGCHLD handler in ``flush.ChildGuard`` while ours owns SIGTERM.

    Called when SIGTERM is taken over and at every unit's start (main thread): torch installs
    its handler when the first DataLoader iterator with workers starts, after the recorder
    armed. A no-op when the guard is in place or nothing is installed from Python."""
    sigchld = getattr(signal, "SIGCHLD", None)
    state = _process
    if sigchld is None or state.handler is None:
        return
    current = _handler(sigchld)  # the usual answer, at every unit: in place already
    if isinstance(current, ChildGuard) or not callable(current):
        return
    if state.owner == os.getpid() and _main_thread():
        _set_handler(sigchld, ChildGuard(current))


@guarded
def mindspeed_prof_flush_on_sigterm(signum, frame):
    """The process's SIGTERM handler while ours (named so that a handler dump says whose).

    Inside a ``signal_safe`` section it only notes the signal: the section's end delivers it
    again, and the flush then runs with no lock of ours held by the code it interrupted."""
    if _deferred(signum):
        return
    state = _process
    try:
        if state.owner == os.getpid():
            _watchdog.arm(signum)
            # One bound for every recorder together, counted from the signal's arrival (it may
            # have waited for a section): torchrun's SIGKILL does not wait for each.
            deadline = _watchdog.flush_deadline()
            with final_flush():
                name = signal_name(signum)
                for flusher in list(state.flushers):
                    flusher.on_signal(name, deadline)
    finally:
        # Whatever the flush's end raised (torch's SIGCHLD handler, back with a worker's death
        # pending), the signal still goes where it would have gone without us.
        _watchdog.disarm()
        _chain(state.previous, signum, frame)
        hand_on_children(frame)  # the host's handler returned: the process lives on


def mindspeed_prof_note_sigint(signum, frame):
    """SIGINT: noted for the manifest, then Python's own handler (KeyboardInterrupt), at the end
    of the section it landed in; a second one, or one a final flush was asked twice, at once."""
    _process.interrupted = True
    if not flushing.insisting:
        if signum in _pending:
            _pending.remove(signum)  # Ctrl-C twice: a person insists
        elif _deferred(signum):
            return
    flushing.insisting = False
    signal.default_int_handler(signum, frame)


def _chain(previous, signum, frame):
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


class FlushOnExit:
    """One recorder's part: its ``close`` runs at interpreter exit and on SIGTERM."""

    def __init__(self, close: Callable, wait: Optional[Callable[[float], bool]] = None):
        """``close(reason, detail, wait_timeout=None)`` is the recorder's idempotent close;
        ``wait(timeout) -> bool`` waits for a background export that outlives ``close``."""
        self._close = close
        self._wait = wait
        self._pid: Optional[int] = None

    def install(self) -> None:
        self._pid = os.getpid()
        atexit.register(self._at_exit)
        with _process.lock:
            if self not in _process.flushers:
                _process.flushers.append(self)
        install_signal_flush()

    def uninstall(self, pending: bool = False) -> None:
        """The recorder closed. ``pending``: its export still runs; a SIGTERM waits for it."""
        atexit.unregister(self._at_exit)
        state = _process
        with state.lock:
            if pending and self._wait is not None:
                return  # stays registered: on_signal waits for the export
            if self in state.flushers:
                state.flushers.remove(self)
            if not state.flushers and not state.pinned and not state.replaced:
                uninstall_signal_flush()

    def on_signal(self, name: str, deadline: float) -> None:
        """SIGTERM arrived: close (a no-op when closed) and wait for a pending export, both
        until ``deadline`` (``time.monotonic()``)."""
        if self._pid != os.getpid():
            return
        self._close("signal", name, wait_timeout=max(0.0, deadline - time.monotonic()))
        if self._wait is not None and not self._wait(max(0.0, deadline - time.monotonic())):
            log.error(f"{name}: the trace was still being written after "
                      f"{SIGNAL_FLUSH_TIMEOUT_S} s; it is incomplete")
        self.uninstall()

    def _at_exit(self):
        if self._pid == os.getpid():
            self._close(*process_end_reason("the loop did not close the profiler"))



# How the process is ending, when an entry point saw it (the launcher runs the script inside a
# try/except): (reason, detail).
_outcome: Optional[tuple] = None


def note_process_outcome(reason: str, detail: Optional[str]) -> None:
    """An entry point saw how the script ended (returned, sys.exit, an exception)."""
    global _outcome
    _outcome = (reason, detail)


def process_end_reason(unknown_detail: Optional[str] = None) -> tuple:
    """How this process is ending, for a flush at interpreter exit: what the launcher saw, else
    the exception the interpreter is reporting (``sys.last_value``: an uncaught exception in the
    main script, Ctrl-C included), else ``process exit`` (the script ended, normally or through
    ``sys.exit``: from inside the process the two cannot be told apart)."""
    if _outcome is not None and _outcome[0] != "finished":
        return _outcome
    value = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if isinstance(value, BaseException):
        return exit_reason(type(value), value)
    if _process.interrupted:
        return "interrupted", "SIGINT (Ctrl-C), the script then ended by itself"
    if _outcome is not None:
        return _outcome
    return "process exit", unknown_detail


def exit_reason(exc_type, exc):
    """How a block ended, in the words the manifest records."""
    if exc_type is None:
        return "finished", None
    if issubclass(exc_type, SystemExit):
        return "sys.exit", f"exit code {exc.code!r}"
    if issubclass(exc_type, KeyboardInterrupt):
        return "interrupted", "KeyboardInterrupt (SIGINT)"
    return "exception", f"{exc_type.__name__}: {exc}"


flushing.insist_aware.add(mindspeed_prof_note_sigint)
