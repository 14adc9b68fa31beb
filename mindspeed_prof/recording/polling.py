"""The window recorder's poll boundaries: the on-demand trigger and the captures by themselves.

A mixin of ``WindowRecorder`` (as ``shutdown.py`` is): every ``--profile-trigger-poll`` units,
every rank makes the poll's one exchange (``captures.CapturePoll``) and acts on what all of them
agreed: a trigger request (the sessions it asks of this rank), or a capture (``anomaly.py``:
a slow step, a straggler), whose sessions go before the planned ones. Where a capture rule
times units, ``begin``/``end`` are wrapped once, at construction, so the clock reads the work
alone (after the poll and any profiler start, before the profiler's step).
"""

import itertools
from typing import TYPE_CHECKING, Any, Iterator, Optional, Tuple

from ..config import budget
from ..control import trigger
from ..control.anomaly import Capture
from ..control.captures import CapturePoll, measures
from .session import Session
from .shutdown import State
from ..config.window import StepSchedule

if TYPE_CHECKING:
    from .plan import Plan
    from .unit_windows import UnitWindows


class RecorderPolling:
    """The poll half of ``WindowRecorder`` (its attributes are the recorder's)."""

    plan: "Plan"
    schedule: Optional[StepSchedule]
    _queue: Iterator[StepSchedule]
    _state: State
    _poller: Optional[CapturePoll]
    _watcher: Optional[trigger.TriggerWatcher]
    _units: Optional["UnitWindows"]
    _budget: Any
    _layout_of: Any
    backend_name: str

    def report(self, kind: str, phase: str, message: str) -> None:
        raise NotImplementedError  # WindowRecorder's

    def _time_units(self) -> None:
        """At construction: wrap begin/end with the unit clock where a capture rule needs it."""
        if measures(self.plan):
            cls: Any = type(self)
            plain_begin, plain_end = cls.begin, cls.end

            def begin(n: int) -> None:
                plain_begin(self, n)
                poller = self._poller
                if poller is not None and poller.clock is not None:
                    poller.clock.began(n)

            def end(n: int, failure: Optional[Tuple[str, Optional[str]]] = None) -> None:
                poller = self._poller
                if poller is not None and poller.clock is not None:
                    poller.clock.ended(n, failure is not None)
                plain_end(self, n, failure)

            self.begin = self.step_begin = begin  # type: ignore[method-assign]
            self.end = self.step_end = end  # type: ignore[method-assign]

    def _arm_poll(self, plan: "Plan") -> None:
        """At arm: the trigger watcher (with a trigger file) and the poll that shares it."""
        config = plan.config
        if config.profile_trigger_file:
            self._watcher = trigger.TriggerWatcher.for_plan(plan, self.report)
        self._poller = CapturePoll(plan, self.report, self._watcher, room=self._room)
        if self._budget is None and config.captures and config.profile_max_gb is not None:
            # a straggler capture may choose a rank the plan does not: it keeps a share too
            self._budget = budget.RankBudget(config, self.backend_name,
                                             list(plan.selected_ranks))

    def _room(self) -> Optional[Tuple[int, str]]:
        """What this rank tells the poll of its room for a capture (``captures.Room``)."""
        if self._state is State.DONE:
            return 0, "profiling has ended there (a profiler failure or --profile-max-gb)"
        budget_ = self._budget
        left = budget_.units_left(self._used()) if budget_ is not None else None
        if left is None:
            return None
        unit = self.plan.unit
        return left, (f"its share of --profile-max-gb {budget_.limit_gb:g} holds "
                      f"{left} more {unit.name if left == 1 else unit.plural}")

    if TYPE_CHECKING:
        def _used(self) -> int: ...  # RecorderShutdown's

    def _poll(self, n: int) -> None:
        request, capture = self._poller.exchange(n)  # every rank, same unit: one collective
        if request is not None:
            self._take_request(request, n)
        elif capture is not None:
            self._take_capture(capture, n)

    def _take_request(self, request: dict, n: int) -> None:
        if self._state is State.RUNNING or self._poller.capturing(n):
            self._watcher.ignored(request, n, self.plan.unit, "a window is still running")
            return
        sessions, window = trigger.sessions_for(request, n, self.plan, self._layout_of,
                                                self._watcher)
        if sessions:
            if self._units is not None:
                self._units.add(window)
            self._queue = iter(sessions)
            self.schedule = next(self._queue)
            self._state = State.ARMED

    def _take_capture(self, capture: Capture, n: int) -> None:
        sessions = self._poller.sessions(capture)
        if not sessions:
            return  # the capture chose other ranks
        if self._state in (State.RUNNING, State.DONE):
            why = ("profiling has ended on this rank (a profiler failure or --profile-max-gb)"
                   if self._state is State.DONE else "a window is still running on this rank")
            self.report("warning", "capture", f"capture {capture.number} at "
                                              f"{self.plan.unit.name} {n} not recorded here: "
                                              f"{why}")
            return
        if self._units is not None:
            self._units.add(StepSchedule(skip_first=capture.first, warmup=0,
                                         active=capture.last - capture.first + 1))
        later = [self.schedule] if self.schedule is not None else []
        self._queue = itertools.chain(sessions[1:], later, self._queue)
        self.schedule = sessions[0]
        self._state = State.ARMED

    def _say_why(self, session: Session) -> None:
        """The manifest window of a requested or captured session says why it was taken."""
        if self._poller is not None:
            reason = self._poller.reason_for(session.schedule.start)
            if reason is not None:
                session.window.set_trigger(reason)
