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
* ``final_flush()``: the block every final flush runs in. A signal sent to the whole job reaches
  the DataLoader worker processes in the same instant; PyTorch's SIGCHLD handler then raises
  ``RuntimeError: DataLoader worker (pid N) is killed by signal`` inside whatever Python code runs,
  which would be the profiler's stop/export. During the block SIGCHLD only notes which children
  ended, SIGTERM/SIGINT are held and delivered again afterwards (so the process still ends the
  way it would have; a second SIGINT is delivered at once, so Ctrl-C twice still interrupts a
  flush that hangs), and console writes that fail (a closed pipe) are dropped. What happened is
  kept in ``ExitEvents`` for the manifest.
* ``signal_safe`` and ``SignalSafeLock``: Python runs a signal handler on the main thread between
  two bytecodes of whatever that thread was doing, so a handler that flushed there could wait
  for a lock the interrupted code holds (a manifest half written: the process never ends) or
  find a recorder half way through opening a session. Every lock a flush takes is a
  ``SignalSafeLock``, and every state change a flush reads (a unit's begin and end) runs in a
  ``signal_safe`` section: while the main thread is in one, our handlers only note the signal,
  and the section's end delivers it again, at the first moment the flush can run whole. A
  second Ctrl-C is not noted: it interrupts at once, as it does a flush that hangs.
* A deadline for SIGTERM: a section can block for good (a manifest write into a stalled network
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

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, Optional

from .. import log

# torchrun follows SIGTERM with SIGKILL after 30 s; leave room to die on our own terms.
SIGNAL_FLUSH_TIMEOUT_S = 20
# After the flush bound, the final manifest write and the chaining to the host's handler: the
# watchdog ends a process SIGTERM could not end by then.
ENDING_GRACE_S = 3.0
HELD_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class ExitEvents:
    """What reached the process while its profile was being flushed."""

    signals: List[str] = field(default_factory=list)  # held, delivered again after the flush
    children_ended: List[dict] = field(default_factory=list)  # {"pid", "how"}
    console_writes_lost: int = 0
    held: List[int] = field(default_factory=list, repr=False)  # signal numbers to deliver again

    def as_dict(self) -> dict:
        """The manifest's ``exit_events``: only what happened."""
        out: dict = {}
        if self.signals:
            out["signals"] = list(self.signals)
        if self.children_ended:
            out["children_ended"] = list(self.children_ended)
        if self.console_writes_lost:
            out["console_writes_lost"] = self.console_writes_lost
        return out


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
        # final_flush() nesting, per thread: a window ending on a server's request thread must
        # not make the main thread's flush (a signal's) an inner block that holds nothing.
        self.flushing = threading.local()
        self.interrupted = False  # a SIGINT reached the process (Ctrl-C)
        # The handlers the main thread's final_flush() holds in place of while it runs: what
        # (un)installing ours changes then, so the block's end puts back the right ones.
        self.saved: Optional[dict] = None
        self.insisting = False  # a second Ctrl-C: interrupts even inside a section


_process = _Process()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _handler(signum: int) -> Any:
    """The handler of ``signum`` as the process will have it outside a final flush's hold."""
    saved = _process.saved
    if saved is not None and signum in saved:
        return saved[signum]
    return signal.getsignal(signum)


def _set_handler(signum: int, handler: Any) -> None:
    saved = _process.saved
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


def mindspeed_prof_flush_on_sigterm(signum, frame):
    """The process's SIGTERM handler while ours (named so that a handler dump says whose).

    Inside a ``signal_safe`` section it only notes the signal: the section's end delivers it
    again, and the flush then runs with no lock of ours held by the code it interrupted."""
    if _deferred(signum):
        return
    state = _process
    if state.owner == os.getpid():
        _watchdog.arm(signum)
        # One bound for every recorder together, counted from the signal's arrival (it may
        # have waited for a section): torchrun's SIGKILL does not wait for each.
        deadline = _watchdog.flush_deadline()
        with final_flush():
            name = signal_name(signum)
            for flusher in list(state.flushers):
                flusher.on_signal(name, deadline)
    _watchdog.disarm()
    _chain(state.previous, signum, frame)


def mindspeed_prof_note_sigint(signum, frame):
    """SIGINT: noted for the manifest, then Python's own handler (KeyboardInterrupt), at the end
    of the section it landed in; a second one, or one a final flush was asked twice, at once."""
    state = _process
    state.interrupted = True
    if not state.insisting:
        if signum in _pending:
            _pending.remove(signum)  # Ctrl-C twice: a person insists
        elif _deferred(signum):
            return
    state.insisting = False
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


@contextlib.contextmanager
def final_flush() -> Iterator[ExitEvents]:
    """Run a final flush so that nothing from the dying job aborts it (see the module text).

    Reentrant: a flush inside a flush on the same thread shares the outer block and its events.
    Off the main thread signal handlers cannot be changed; the block then only records console
    losses."""
    flushing = _process.flushing
    outer = not getattr(flushing, "depth", 0)
    if outer:
        flushing.depth, flushing.events = 0, ExitEvents()
    flushing.depth += 1
    events = flushing.events
    saved, lost_before = {}, log.lost_writes()
    try:
        if outer and _main_thread():
            _watchdog.start()
            with signal_safe:  # a signal landing while the holds go in waits for them
                saved = _hold_signals(events)
                _process.saved = saved
        yield events
    finally:
        flushing.depth -= 1
        if outer:
            events.console_writes_lost += log.lost_writes() - lost_before
            flushing.events = None
        if saved:
            _process.saved = None
            _release_signals(saved, events)


def _hold_signals(events: ExitEvents) -> dict:
    saved = {}
    for signum in HELD_SIGNALS:
        handler = signal.getsignal(signum)
        if handler is None or handler == signal.SIG_IGN:
            continue  # installed from C (cannot be restored from Python), or ignored: kept
        saved[signum] = handler

        def hold(received, frame):
            events.signals.append(signal_name(received))
            if received == signal.SIGINT and received in events.held:
                # Ctrl-C twice: a person insists, and may stop a flush that hangs. (SIGTERM
                # comes again from launchers forwarding it, SLURM and torchrun both: held.)
                events.held.remove(received)  # delivered now, not again after the block
                signal.signal(received, saved[received])
                _process.insisting = saved[received] is mindspeed_prof_note_sigint
                os.kill(os.getpid(), received)
                return
            events.held.append(received)
            if received == signal.SIGTERM:
                _watchdog.arm(received)  # the flush may block for good: it has a deadline

        signal.signal(signum, hold)
    sigchld = getattr(signal, "SIGCHLD", None)
    chld_handler = signal.getsignal(sigchld) if sigchld is not None else None
    if sigchld is not None and chld_handler is not None:
        saved[sigchld] = chld_handler
        signal.signal(sigchld, lambda received, frame: _note_children(events))
    return saved


def _release_signals(saved: dict, events: ExitEvents) -> None:
    for signum, handler in saved.items():
        signal.signal(signum, handler)
    if events.held:
        _watchdog.disarm()  # the flush ended: the signals go on to the handlers in place now
    for signum in dict.fromkeys(events.held):
        os.kill(os.getpid(), signum)


def _note_children(events: ExitEvents) -> None:
    """Record the children that ended (a DataLoader worker killed with the job), unreaped:
    whoever owns them (torch, multiprocessing) still collects their status."""
    seen = {c["pid"] for c in events.children_ended}
    for pid in _children():
        if pid in seen:
            continue
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except (ChildProcessError, OSError):
            continue
        if info is None:
            continue
        if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            how = f"killed by {signal_name(info.si_status)}"
        elif info.si_status:
            how = f"exited with code {info.si_status}"
        else:
            continue  # a child that finished its work (the trace's export process) is no news
        events.children_ended.append({"pid": pid, "how": how})


def _children() -> List[int]:
    pids: List[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                pids.extend(int(p) for p in handle.read().split())
        except (OSError, ValueError):
            continue
    return pids


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
