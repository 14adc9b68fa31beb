"""The final flush's block: nothing from a dying job aborts what runs inside it.

``final_flush()``: the block every final flush runs in. A signal sent to the whole job reaches
the DataLoader worker processes in the same instant; PyTorch's SIGCHLD handler then raises
``RuntimeError: DataLoader worker (pid N) is killed by signal`` inside whatever Python code runs,
which would be the profiler's stop/export. During the block SIGCHLD only notes which children
ended, SIGTERM/SIGINT are held and delivered again afterwards (so the process still ends the
way it would have; a second SIGINT is delivered at once, so Ctrl-C twice still interrupts a
flush that hangs), and console writes that fail (a closed pipe) are dropped. What happened is
kept in ``ExitEvents`` for the manifest.

``ChildGuard``: the same SIGCHLD hazard before the block is entered. A job-wide SIGTERM starts
our handler (``exits``) while the workers are still dying; their SIGCHLD lands in the handler's
first instructions, before any hold is in place, and torch's error then escapes the handler
before it flushed anything (and a recorder's close, begun, must run whole the same way). While a
recorder may take SIGTERM over, the process's SIGCHLD handler is wrapped: inside our SIGTERM
handler or a recorder's close (their frames on the stack: ``flushing.guarded_code``) a child's
death is only noted, and ``hand_on_children`` gives it to the wrapped handler once the outermost
of them is done and the process lives on; everywhere else the wrapped handler runs as it would.
"""

import contextlib
import os
import signal
import threading
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, Callable, Iterator, List, Optional, Set, TypeVar

from .. import log
from .sections import _main_thread, _watchdog, signal_name, signal_safe

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


class _Flushing:
    """What a running final flush shares with the process's handlers (``exits``)."""

    def __init__(self) -> None:
        # final_flush() nesting, per thread: a window ending on a server's request thread must
        # not make the main thread's flush (a signal's) an inner block that holds nothing.
        self.per_thread = threading.local()
        # The handlers the main thread's final_flush() holds in place of while it runs: what
        # (un)installing ours changes then, so the block's end puts back the right ones.
        self.saved: Optional[dict] = None
        self.insisting = False  # a second Ctrl-C: interrupts even inside a section
        # SIGINT handlers that read ``insisting`` (exits' own): a second Ctrl-C put back to one
        # of them must not be held again as a first.
        self.insist_aware: Set[Any] = set()
        # The code of our SIGTERM handler and of a recorder's close (``guarded``): a SIGCHLD
        # landing while one of them is on the stack is only noted (``ChildGuard``), and
        # ``children_noted`` says one was.
        self.guarded_code: Set[CodeType] = set()
        self.children_noted = False


flushing = _Flushing()


class ChildGuard:
    """The process's SIGCHLD handler while ours may take SIGTERM over (see the module text)."""

    def __init__(self, inner: Callable[[int, Optional[FrameType]], Any]) -> None:
        self.inner = inner

    def __call__(self, signum: int, frame: Optional[FrameType]) -> Any:
        if _inside(frame, flushing.guarded_code):
            flushing.children_noted = True
            return None
        return self.inner(signum, frame)


F = TypeVar("F", bound=Callable[..., Any])


def guarded(function: F) -> F:
    """Mark ``function`` as one inside which a child's death is only noted (``ChildGuard``)."""
    flushing.guarded_code.add(function.__code__)
    return function


def hand_on_children(frame: Optional[FrameType]) -> None:
    """A guarded function ends (``frame``: its caller's): a child's death the guard only noted
    reaches the process's SIGCHLD handler now, unless an outer guarded function still runs."""
    if not flushing.children_noted or not _main_thread() \
            or _inside(frame, flushing.guarded_code):
        return  # (signal handlers run on the main thread: so does what they noted)
    flushing.children_noted = False
    current = signal.getsignal(signal.SIGCHLD)  # the guard may have left with the last recorder
    if isinstance(current, ChildGuard):
        current = current.inner
    if callable(current):
        current(signal.SIGCHLD, frame)


def _inside(frame: Optional[FrameType], code: Set[CodeType]) -> bool:
    while frame is not None:
        if frame.f_code in code:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def final_flush() -> Iterator[ExitEvents]:
    """Run a final flush so that nothing from the dying job aborts it (see the module text).

    Reentrant: a flush inside a flush on the same thread shares the outer block and its events.
    Off the main thread signal handlers cannot be changed; the block then only records console
    losses."""
    state = flushing.per_thread
    outer = not getattr(state, "depth", 0)
    if outer:
        state.depth, state.events = 0, ExitEvents()
    state.depth += 1
    events = state.events
    saved, lost_before = {}, log.lost_writes()
    try:
        if outer and _main_thread():
            _watchdog.start()
            with signal_safe:  # a signal landing while the holds go in waits for them
                saved = _hold_signals(events)
                flushing.saved = saved
        yield events
    finally:
        state.depth -= 1
        if outer:
            events.console_writes_lost += log.lost_writes() - lost_before
            state.events = None
        if saved:
            flushing.saved = None
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
                flushing.insisting = saved[received] in flushing.insist_aware
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
        if flushing.children_noted:  # deaths before the hold that ``ChildGuard`` only noted
            _note_children(events)
    return saved


def _release_signals(saved: dict, events: ExitEvents) -> None:
    # SIGCHLD's handler goes back last, after the held signals were delivered: a worker that
    # died in the flush's last instants leaves its SIGCHLD pending, and torch's handler raises
    # the moment it is back; raised before the held SIGTERM went out, it would end the process
    # on that error instead of the signal (without the hold, SIGTERM, the lower number, runs
    # first too).
    sigchld = getattr(signal, "SIGCHLD", None)
    try:
        for signum, handler in saved.items():
            if signum != sigchld:
                signal.signal(signum, handler)
        if events.held:
            _watchdog.disarm()  # the flush ended: the signals go on to the handlers in place now
        for signum in dict.fromkeys(events.held):
            os.kill(os.getpid(), signum)
    finally:
        if sigchld is not None and sigchld in saved:
            signal.signal(sigchld, saved[sigchld])


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

