"""How one window runs: a profiler session on one rank, on one thread (DESIGN §6).

A ``Session`` owns a backend for one window: it starts it at a unit, steps it as units end,
stops it, labels ranges, retracts a step that never ran, and knows which unit was in progress
when the run ended. Every backend call runs inside ``failing_safely(phase)``: a profiler failure
is reported (with the fix for that phase) and ends profiling on this rank, but never the work.

Two process-wide rules live here because only sessions see every profiler:
- one *running* session per process (``PROCESS``): torch's and torch_npu's profilers cannot
  nest, so a session that would overlap another recorder's (colocated RL roles) is refused;
- a session is stepped and stopped on the thread that started it: torch.profiler records only
  that thread, and stopping it from another one crashed torch 2.13 in export.
"""

import contextlib
import os
import threading
import time
from typing import Any, Callable, ContextManager, Iterator, List, Optional

from .. import backends
from ..backends.memory import WindowMemory
from .flush import final_flush
from .sections import SignalSafeLock
from .manifest import WindowEntry
from .notices import failure_fix
from ..config.window import StepSchedule

Report = Callable[[str, str, str], None]
_NO_RANGE = contextlib.nullcontext()


class SessionSlot:
    """The process's one running-session slot; a recorder holds it for a session's length."""

    def __init__(self) -> None:
        self._holder: Any = None
        self._lock = SignalSafeLock()  # a signal's flush releases the slot

    def claim(self, owner: Any) -> Any:
        """Take the slot for ``owner``: None when it now holds it, else the owner that does.
        A closed holder gives the slot up."""
        with self._lock:
            holder = self._holder
            if holder is None or holder is owner or holder.closed:
                self._holder = owner
                return None
            return holder

    def release(self, owner: Any) -> None:
        with self._lock:
            if self._holder is owner:
                self._holder = None

    @property
    def taken(self) -> bool:
        return self._holder is not None


PROCESS = SessionSlot()


def window_recording() -> bool:
    """Whether a window records on this process now: a recorder's session holds the process's
    one profiler, from its first unit (a warm-up one included) to its stop. The stable question
    for code outside the recorder that adds to a trace only inside windows (schedule marks); one
    attribute read. A recorder's own ``recording`` answers it for that recorder."""
    return PROCESS.taken


@contextlib.contextmanager
def reporting(report: Report, phase: str, owner: str) -> Iterator[List[Exception]]:
    """Run a profiler call; a failure is reported with its fix, never raised. The yielded list
    holds the exception afterwards, if there was one."""
    failed: List[Exception] = []
    try:
        yield failed
    except Exception as exc:  # noqa: BLE001 - the work must survive any profiler failure
        failed.append(exc)
        report("error", phase, f"{type(exc).__name__}: {exc}{failure_fix(phase, owner)}")


class Session:
    """One window's profiler on this rank (see the module docstring). ``on_saved(session)`` runs
    when its data reaches disk (from the export thread for async exports); ``on_failure(session)``
    when a profiler call failed and profiling ends on this rank."""

    def __init__(self, *, schedule: StepSchedule, window: WindowEntry, backend_name: str,
                 backend_args: dict, report: Report, owner: str,
                 on_saved: Callable[["Session"], None],
                 on_failure: Callable[["Session"], None]) -> None:
        self.schedule, self.window = schedule, window
        self.thread = threading.get_ident()
        self.backend: Any = None
        self.running = False
        # end(n) leaves the profiler's step to begin(n + 1): a run that stops after n then
        # closes ProfilerStep#n, never a step opened for a unit that does not run.
        self.step_due = False
        self._backend_name, self._backend_args = backend_name, backend_args
        self._report, self._owner = report, owner
        self._on_saved, self._on_failure = on_saved, on_failure
        self.memory = WindowMemory(backend_args["config"], report, backend_name)
        self.ending_s = 0.0  # the window's end on its thread: the last step's save and the stop

    @classmethod
    def for_plan(cls, plan: Any, schedule: StepSchedule, manifest: Any, backend_name: str,
                 parallel: Optional[dict], report: Report, *,
                 on_saved: Callable[["Session"], None],
                 on_failure: Callable[["Session"], None],
                 directory: Optional[str] = None) -> "Session":
        """The session of ``schedule`` under ``plan``: its folder (the plan's, unless
        ``directory`` says), capture name and manifest window entry (written now, as running)."""
        directory = directory or plan.window_dir(schedule)
        window = manifest.add_window(schedule.start, schedule.end,
                                     os.path.relpath(directory, plan.save_path))
        return cls(schedule=schedule, window=window, backend_name=backend_name,
                   backend_args=dict(config=plan.config, rank=plan.rank, save_dir=directory,
                                     metadata=parallel, worker=plan.worker_name(schedule)),
                   report=report, owner=plan.unit.owner, on_saved=on_saved,
                   on_failure=on_failure)

    @contextlib.contextmanager
    def failing_safely(self, phase: str) -> Iterator[None]:
        """A backend call: its failure is reported and ends profiling here, never the work."""
        with reporting(self._report, phase, self._owner) as failed:
            yield
        if not failed:
            return
        if self.backend is not None:
            self.backend.failed = True
        if self.running:
            self.running = False
            with reporting(self._report, "stop", ""):
                self.backend.stop()
            self._save_memory()
            self._on_saved(self)
        self._on_failure(self)

    # -- the unit calls (on the session's thread) ----------------------------------------------

    def start(self, n: int) -> None:
        """Build the backend and start it with its step counter at unit ``n``."""
        self.backend = backends.backend_class(self._backend_name)(
            schedule=self.schedule, report=self._report, **self._backend_args)
        self.backend.on_saved = lambda: self._on_saved(self)
        self.running = True
        self.memory.start()  # --profile-memory-snapshot: the allocator's history, this window
        self.backend.start(n)

    @property
    def on_own_thread(self) -> bool:
        return self.thread == threading.get_ident()

    def catch_up(self, n: int) -> bool:
        """Units the host skipped (Megatron's --iterations-to-skip) never reached the hook; step
        the profiler past them so the schedule stays aligned with the numbers. True when the
        window's last unit was among them (the trace is saved then)."""
        backend = self.backend
        while self.running and backend.step_num < n:
            if self.step_due:  # the step end(n - 1) left for this begin
                self.step_due = False
                backend.step()
            elif self.unit_ended(backend.step_num, executed=False):  # a unit the host skipped
                return True
        return False

    def ends_window(self, n: int) -> bool:
        """Unit ``n`` is the window's last: its end saves the trace."""
        end = self.schedule.end
        return end is not None and n + 1 >= end

    def unit_ended(self, n: int, executed: bool = True) -> bool:
        """Unit ``n`` ended; True when it was the window's last (the trace is saved then)."""
        if executed and n >= self.schedule.start:
            self.window.record(n)
        if self.ends_window(n):
            began = time.perf_counter()
            self.backend.step()  # the schedule's last step: the trace is saved here
            self.ending_s += time.perf_counter() - began
            return True
        self.step_due = True
        return False

    def stop(self) -> None:
        """Stop and save. A signal whose flush ran inside this stop would stop the session a
        second time, mid-export: it is held (with torch's worker-death errors) until then."""
        with final_flush():
            if self.running:
                self.running = False
                began = time.perf_counter()
                with self.failing_safely("stop"):
                    self.backend.stop()
                self.ending_s += time.perf_counter() - began
            self._save_memory()
            self._on_saved(self)

    def ending_words(self, unit: Any) -> str:
        """What the window's end added to its last unit, for the log line beside the host's own
        unit times (Megatron's iteration time of that unit includes it)."""
        last = self.schedule.end - 1 if self.schedule.end is not None else None
        export = getattr(self.backend, "export_s", None)
        where = f"{unit.name} {last}" if last is not None else f"the last {unit.name}"
        if export is not None:
            spent = (f"the profiler's stop took {max(0.0, self.ending_s - export):.3f} s and "
                     f"writing its trace {export:.3f} s")
        elif self._backend_args["config"].profile_analyse == "sync":
            spent = f"the profiler's stop and export took {self.ending_s:.3f} s"
        else:
            spent = (f"the profiler's stop took {self.ending_s:.3f} s (the trace is written in "
                     f"the background: --profile-analyse async)")
        return (f"window {self.schedule.start}-{last} ended: {spent}, inside {where}; that "
                f"{unit.name}'s time in the log includes it")

    def _save_memory(self) -> None:
        self.memory.finish(self._backend_args["save_dir"], self._backend_args["rank"])

    def range(self, name: str) -> ContextManager[Any]:
        """A labelled range in the trace, or a no-op off the session's thread."""
        if not (self.running and self.on_own_thread):
            return _NO_RANGE
        return self.backend.range(name)

    def mark(self, name: str, device: bool = False) -> ContextManager[Any]:
        """A pipeline-schedule mark (the backend's ``mark``), or a no-op off the session's thread."""
        if not (self.running and self.on_own_thread):
            return _NO_RANGE
        return self.backend.mark(name, device)

    def retract(self, n: int) -> None:
        """Unit ``n`` was begun but never ran: leave its step out (torch) or name it for check
        (``never_ran``, NPU traces are parsed later by torch_npu)."""
        if not self.running or self.step_due or not self.on_own_thread:
            return
        if self.step_num() != n:
            return
        self.window.mark_never_ran(n)
        self.backend.never_ran = n

    def step_num(self) -> Optional[int]:
        try:
            return self.backend.step_num
        except Exception:  # noqa: BLE001 - a profiler that never started has no step
            return None

    def in_progress(self) -> Optional[int]:
        """The unit that had begun but not ended when the window was cut, if any."""
        if self.step_due or self.backend is None:
            return None
        n = self.step_num()
        if n is None or n == self.window.never_ran or n < self.schedule.start \
                or n in self.window.recorded:
            return None
        return n

    def abandon(self) -> None:
        """This session will never be stopped (its thread is gone or elsewhere)."""
        self.running = False
        if self.backend is not None:
            self.backend.abandon()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for a background export/parse; True when nothing is pending."""
        return self.backend is None or self.backend.wait(timeout)

    def outputs(self) -> List[str]:
        return (self.backend.outputs() if self.backend is not None else []) \
            + self.memory.outputs()

    def status(self) -> str:
        return self.backend.status() if self.backend is not None else "failed"
