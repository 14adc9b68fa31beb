"""Windows decided while the work runs (DESIGN §7): a start or stop that reaches the computing
thread between two units (an HTTP ``/start_profile`` relayed to every engine rank), and what each
recorded unit carried.

A mixin of ``WindowRecorder``, as ``shutdown.py`` is: the recorder plans its windows at start-up;
this half takes windows asked for later, on the thread that computes, at a unit boundary:

- ``request_window(n, request)`` before unit ``n``: skip ``request.delay`` units, then record
  ``request.length`` units (0: until ``stop_window``), in a folder of its own (under
  ``request.prefix`` when given). One window at a time: a request while one runs (or waits for
  its first unit) is refused and said. The disk budget applies as to planned windows; one
  started over HTTP with no length and no ``--profile-max-gb`` gets a budget of its own
  (``http_control.WindowBudget``), so a client that never stops cannot fill the disk.
- ``stop_window(reason)``: the requested window ends at this boundary, whole (it was asked to
  end here); one stopped before its requested length says so (``stopped_early``).
- ``split_per_unit()``: the work turned out to hop threads between units (``step_modern`` called
  inside a running event loop runs each engine step on a new thread): before any window opened,
  every window is recorded as one session per unit.
- ``note(n, info)``: what unit ``n`` carried, kept in its window's manifest entry.
- ``at_boundary()``: a close asked from another thread (a signal, the exit flush) is carried out
  here, on the session's thread, between units, even when no unit runs (an idle server).

Every window entry says who asked for it (``started_by``: flags, trigger, http).
"""

import dataclasses
import itertools
import os
from typing import Any, Dict, Iterable, Iterator, Optional

from .session import Session
from .shutdown import State
from .unit_windows import UnitWindows
from ..config.window import OPEN_ENDED, StepSchedule, WindowRequest
from ..control import http_control

STOP = "/stop_profile"
_UNSET: Any = object()


@dataclasses.dataclass
class _Demand:
    window: StepSchedule
    origin: Dict[str, Any]
    prefix: Optional[str]

    def holds(self, session: Optional[StepSchedule]) -> bool:
        if session is None:
            return False
        end = self.window.end
        return self.window.start <= session.start and (end is None or session.start < end)


class OnDemandWindows:
    """The recorder's half that takes windows asked for while the work runs (see the module)."""

    # The recorder's attributes this half uses (set in WindowRecorder.__init__).
    plan: Any
    idle: bool
    closed: bool
    schedule: Optional[StepSchedule]
    manifest: Any
    _queue: Iterator[StepSchedule]
    _session: Optional[Session]
    _state: State
    _windows_opened: int
    _units: Optional[UnitWindows]
    _stop_wanted: Optional[str]
    _demand: Optional[_Demand] = None
    config: Any
    backend_name: str
    _budget: Any
    _planned_budget: Any = _UNSET  # the job's budget, while a window has one of its own

    def _used(self) -> int:
        raise NotImplementedError  # RecorderShutdown's

    def report(self, kind: str, phase: str, message: str) -> None:
        raise NotImplementedError  # WindowRecorder's

    def _finish_window(self) -> None:
        raise NotImplementedError  # RecorderShutdown's

    def _next_window(self) -> None:
        raise NotImplementedError

    def _stop_here(self, failure: Any) -> None:
        raise NotImplementedError

    # -- asked for at a boundary ----------------------------------------------------------------

    @property
    def window_running(self) -> bool:
        """A session records, or a requested window waits for its first unit."""
        return self._state is State.RUNNING or (
            self._state is State.ARMED and self._demand is not None
            and self._demand.holds(self.schedule))

    @property
    def asked_window_pending(self) -> bool:
        """A window asked for at run time still waits for its first unit or records: False
        once it ended, by its length, a stop, or by itself here (its budget, the recorder
        closing): what a server's routes must learn (``http_control.WindowControl``)."""
        return self._demand is not None and not self.closed and self.window_running

    @property
    def planned_window_running(self) -> bool:
        """A window from the flags or the trigger records now (not one asked for at run time)."""
        session = self._session
        return self._state is State.RUNNING and session is not None and not (
            self._demand is not None and self._demand.holds(session.schedule))

    def request_window(self, n: int, request: WindowRequest) -> str:
        """Before unit ``n``, on the computing thread: queue the window ``request`` asks for.
        Returns "queued", else why not (said in the log and the manifest)."""
        unit = self.plan.unit
        if self.idle or self.closed:
            return "not recorded here" if self.idle else "closed"
        if self.window_running:
            running = self._session.schedule.start if self._state is State.RUNNING else None
            self.report("warning", "start", f"a start asked before {unit.name} {n} was ignored: "
                                            f"the window from {unit.name} "
                                            f"{running if running is not None else n} is still "
                                            f"running (one window at a time)")
            return "busy"
        start = n + request.delay
        window = StepSchedule(skip_first=start, warmup=0, active=request.length or OPEN_ENDED)
        demand = _Demand(window, request.origin(n), request.prefix)
        self._demand = demand
        # The planned session waiting for its unit goes after it (one refused by the budget,
        # which left the recorder done, does not).
        pending = [self.schedule] if self.schedule is not None \
            and self._state is State.ARMED else []
        self._queue = self._demand_first(demand, self.plan.sessions([window]),
                                         itertools.chain(pending, self._queue))
        self.schedule = next(self._queue, None)
        if self._units is not None:
            self._units.add_asked(window)
        self._own_budget(request)
        self._state = State.ARMED
        return "queued"

    def _own_budget(self, request: WindowRequest) -> None:
        """The budget the window ``request`` opens runs under: the job's, or a default one of
        its own (an HTTP start with no length and no --profile-max-gb)."""
        if self._planned_budget is _UNSET:
            self._planned_budget = self._budget
        limit = http_control.default_budget_gb(self.config, request)
        self._budget = self._planned_budget if limit is None else http_control.WindowBudget(
            self.config, self.backend_name, limit, self._used())

    def _demand_first(self, demand: _Demand, sessions: Iterable[StepSchedule],
                      rest: Iterator[StepSchedule]) -> Iterator[StepSchedule]:
        for session in sessions:
            if self._demand is not demand:
                break  # stopped: the rest of its sessions never open
            yield session
        if self._demand is demand:
            self._demand = None  # all its sessions opened and ended
        yield from rest

    def stop_window(self, reason: str = STOP) -> str:
        """At a boundary, on the computing thread: end the requested window here. Returns
        "stopped", or "not running" (nothing asked for runs: said in the log)."""
        if self.idle:
            return "not recorded here"
        demand = self._demand
        session = self._session
        running = self._state is State.RUNNING and session is not None
        if demand is None or not (running and demand.holds(session.schedule)
                                  or self.window_running):
            self.report("warning", "stop", f"a stop ({reason}) arrived while no window asked "
                                           f"for at run time was running; nothing to stop")
            return "not running"
        self._demand = None  # the generator opens none of its remaining sessions
        if self._planned_budget is not _UNSET:
            self._budget = self._planned_budget  # the window's own budget ends with it
        finite = demand.window.end is not None
        if running and session.on_own_thread:
            if finite and self._units is None:
                # A window with a length that completes ends by itself (and is no demand any
                # more): one still running here is stopped before its length.
                session.window.mark_stopped_early(reason)
            if self._units is not None:
                self._units.stop(self.manifest, demand.window, reason if finite else None)
            self._finish_window()
            return "stopped"
        # Still in its delay, or between two units' sessions.
        if self._units is not None:
            self._units.stop(self.manifest, demand.window, reason if finite else None)
        if demand.holds(self.schedule):
            self._next_window()
        if self._windows_opened == 0 or not self._recorded_in(demand):
            self.report("warning", "stop", f"the window asked for from {self.plan.unit.name} "
                                           f"{demand.window.start} was stopped ({reason}) "
                                           f"before its first {self.plan.unit.name} ran; "
                                           f"nothing was recorded for it")
        return "stopped"

    def _recorded_in(self, demand: _Demand) -> bool:
        session = self._session
        return session is not None and demand.holds(session.schedule)

    # -- how the work runs ----------------------------------------------------------------------

    def split_per_unit(self) -> bool:
        """The work hops threads between units: record every window one session per unit from
        now on. Only before the first window opened; True when the split happened (or was)."""
        if self.plan.session_per_unit:
            return True
        if self._windows_opened or self._state is State.RUNNING or self.idle:
            return False
        remaining = ([self.schedule] if self.schedule is not None else []) + list(self._queue)
        self.plan = dataclasses.replace(self.plan, session_per_unit=True)
        self._queue = self.plan.sessions(remaining)
        self.schedule = next(self._queue, None)
        self._units = UnitWindows(self.plan.unit, remaining, self.report)
        return True

    def note(self, n: int, info: Dict[str, Any]) -> None:
        """What unit ``n`` carried, into the running window's entry (before its ``end(n)``)."""
        session = self._session
        if self._state is State.RUNNING and session is not None and session.on_own_thread \
                and n >= session.schedule.start:
            session.window.note_unit(n, info)

    def at_boundary(self) -> None:
        """Between units on the computing thread: a close asked from another thread stops the
        running session here."""
        session = self._session
        if self._stop_wanted is not None and self._state is State.RUNNING \
                and session is not None and session.on_own_thread:
            self._stop_here(None)

    # -- used by the recorder when a session opens ----------------------------------------------

    def _window_dir(self, schedule: StepSchedule) -> str:
        directory = self.plan.window_dir(schedule)
        demand = self._demand
        if demand is not None and demand.prefix and demand.holds(schedule):
            save = self.plan.save_path
            directory = os.path.join(save, demand.prefix, os.path.relpath(directory, save))
        return directory

    def _window_opened(self, session: Session) -> None:
        """Who asked for the window the session belongs to: an HTTP start, the trigger file or
        a capture rule (the poll's reason, already in the entry), else the flags."""
        demand = self._demand
        polled = session.window.data.get("trigger")
        if demand is not None and demand.holds(session.schedule):
            origin = demand.origin
        elif isinstance(polled, dict) and polled.get("rule") == "request":
            origin = {"by": "trigger", "request": polled.get("request")}
        elif isinstance(polled, dict):
            origin = {"by": "capture", "rule": polled.get("rule")}
        else:
            origin = {"by": "flags"}
        session.window.set_origin(origin)
        if self._units is not None and self._units.current is not None:
            self._units.current.set_origin(origin)
