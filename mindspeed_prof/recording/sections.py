"""Signal-safe sections: where our signal handlers only take note, and how long they may wait.

``signal_safe`` and ``SignalSafeLock``: Python runs a signal handler on the main thread between
two bytecodes of whatever that thread was doing, so a handler that flushed there could wait
for a lock the interrupted code holds (a manifest half written: the process never ends) or
find a recorder half way through opening a session. Every lock a flush takes is a
``SignalSafeLock``, and every state change a flush reads (a unit's begin and end) runs in a
``signal_safe`` section: while the main thread is in one, our handlers only note the signal,
and the section's end delivers it again, at the first moment the flush can run whole. A
second Ctrl-C is not noted: it interrupts at once, as it does a flush that hangs.

A deadline for SIGTERM: a section can block for good (a manifest write into a stalled network
or FUSE mount of the save path), and so can a flush. From the moment SIGTERM reaches the
process, noted, held or flushing, a watchdog thread counts ``SIGNAL_FLUSH_TIMEOUT_S`` (the
flush bound) plus ``ENDING_GRACE_S``; past it, the process ends with ``os._exit(128 + N)``,
having said on stderr what it could not write (``writing``). Why a thread: the main thread is
then inside a system call that Python restarts after each handler (PEP 475) and our handler
only notes the signal there, so nothing on that thread ever runs again; a blocking write
releases the GIL, so another thread can; ``os._exit`` ends every thread at once and runs no
Python clean-up (closing the blocked file would block again). Not ``signal.alarm``: SIGALRM
may be the host's, and the kernel's default action could not say what was lost. A C call that
holds the GIL while it blocks (kineto's save) stops the watchdog too: torchrun's SIGKILL, 30 s
after its SIGTERM, remains the last resort there.
"""

import contextlib
import os
import signal
import threading
import time
from typing import Any, Iterator, List, Optional

from .. import log

# torchrun follows SIGTERM with SIGKILL after 30 s; leave room to die on our own terms.
SIGNAL_FLUSH_TIMEOUT_S = 20
# After the flush bound, the final manifest write and the chaining to the host's handler: the
# watchdog ends a process SIGTERM could not end by then.
ENDING_GRACE_S = 3.0


class _Sections(threading.local):
    """Per thread: how deep it is in ``signal_safe`` sections (only the main thread's count
    matters: handlers run there)."""

    depth = 0


_sections = _Sections()
_pending: List[int] = []  # signals our handlers noted inside the main thread's sections


class _SignalSafe:
    """``with signal_safe:`` a section our signal handlers do not run inside (on the main
    thread): a signal that lands in it is delivered again when the outermost section ends."""

    __slots__ = ()

    def __enter__(self) -> None:
        _sections.depth += 1

    def __exit__(self, *exc: Any) -> None:
        _sections.depth -= 1
        if not _sections.depth and _pending and _main_thread():
            _deliver_pending()


signal_safe = _SignalSafe()


class SignalSafeLock:
    """A lock whose holder, on the main thread, runs in a ``signal_safe`` section: our handlers
    never wait for it on the thread that holds it (they wait, bounded, for other threads)."""

    __slots__ = ("_lock",)

    def __init__(self, reentrant: bool = False) -> None:
        self._lock = threading.RLock() if reentrant else threading.Lock()

    def __enter__(self) -> "SignalSafeLock":
        _sections.depth += 1
        try:
            self._lock.acquire()
        except BaseException:
            signal_safe.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()
        signal_safe.__exit__()


def _deferred(signum: int) -> bool:
    """Our handler's first question: True when the main thread is inside a section, the signal
    then noted for the section's end."""
    if not _sections.depth:
        return False
    _pending.append(signum)
    if signum == signal.SIGTERM:
        _watchdog.arm(signum)
    return True


def _deliver_pending() -> None:
    """The outermost section ended: deliver what landed in it to the handlers installed now
    (a final flush's hold, ours, or the one put back), synchronously (raise_signal runs the
    Python handler before it returns)."""
    while _pending:
        signal.raise_signal(_pending.pop(0))


def _forget_sections() -> None:
    # A forked child runs none of its parent's sections, and has no watchdog thread.
    _sections.depth = 0
    del _pending[:]
    _watchdog.forget()


class _Writing:
    """What the process is writing now (``writing``), for the watchdog's last words."""

    def __init__(self) -> None:
        self.paths: List[str] = []


_writing = _Writing()


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """A write to ``path`` that could block (a stalled mount): the watchdog names it if a
    SIGTERM's deadline passes while it runs."""
    _writing.paths.append(path)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _writing.paths.remove(path)


class _Watchdog:
    """Ends the process when a SIGTERM is still not handled at its deadline (module text).

    Lock-free on the signal side: ``arm`` runs inside signal handlers on the main thread, which
    may have interrupted any code, so it only assigns and writes one byte to a pipe; the thread
    sleeps in ``os.read`` on that pipe (GIL released) until then."""

    def __init__(self) -> None:
        self.deadline: Optional[float] = None  # time.monotonic() past which the process ends
        self.signum: int = signal.SIGTERM
        self._wake: Optional[int] = None  # the pipe's write end
        self._pid: Optional[int] = None  # the process whose thread reads the pipe

    def start(self) -> None:
        """Start the thread (once per process; main-thread code outside handlers)."""
        if self._pid == os.getpid():
            return
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)  # a handler never blocks on a full pipe
        self._wake, self._pid = write_end, os.getpid()
        threading.Thread(target=self._watch, args=(read_end,), daemon=True,
                         name="mindspeed_prof-signal-deadline").start()

    def forget(self) -> None:
        self.deadline, self._pid = None, None

    def arm(self, signum: int) -> None:
        if self.deadline is None:
            self.signum = signum
            self.deadline = time.monotonic() + SIGNAL_FLUSH_TIMEOUT_S + ENDING_GRACE_S
        if self._wake is not None and self._pid == os.getpid():
            try:
                os.write(self._wake, b"!")
            except OSError:  # full: the thread is awake already
                pass

    def disarm(self) -> None:
        """The signal was handled: the host's own handler decides what happens now."""
        self.deadline = None

    def flush_deadline(self) -> float:
        """When a signal's flush must be done: the flush bound from the signal's arrival."""
        deadline = self.deadline
        if deadline is None:
            return time.monotonic() + SIGNAL_FLUSH_TIMEOUT_S
        return deadline - ENDING_GRACE_S

    def _watch(self, read_end: int) -> None:
        while True:
            try:
                if not os.read(read_end, 64):
                    return
            except OSError:
                return
            while True:
                deadline = self.deadline
                if deadline is None:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    _end_now(self.signum)
                time.sleep(min(left, 0.5))


_watchdog = _Watchdog()


def _end_now(signum: int) -> None:
    """The watchdog's end of the process: one line on stderr (bounded: stderr may block too),
    then ``os._exit``."""
    name = signal_name(signum)
    paths = list(_writing.paths)
    what = (f"writing {', '.join(paths)} did not finish (a stalled mount of "
            f"--profile-save-path?): it is not written or out of date") if paths else \
        "the profile's flush did not finish: the last window may be incomplete"
    line = (f"{log.PREFIX} ERROR: {name} arrived {SIGNAL_FLUSH_TIMEOUT_S + ENDING_GRACE_S:g} s "
            f"ago and could not be handled: {what}; the process ends now "
            f"(exit code {128 + signum})\n").encode(errors="replace")
    writer = threading.Thread(target=_write_stderr, args=(line,), daemon=True)
    writer.start()
    writer.join(1.0)
    os._exit(128 + signum)


def _write_stderr(data: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(2, data)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_sections)



def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"

