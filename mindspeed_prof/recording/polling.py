"""The recorder's poll (a part of ``WindowRecorder``): the on-demand trigger and the captures.

Every ``--profile-trigger-poll`` units, every rank makes the poll's one exchange
(``captures.CapturePoll``) and acts on what all of them agreed: a trigger request (the sessions
it asks of this rank), or a capture (``anomaly.py``: a slow step, a straggler), or what another
source's part (a row of ``config/polled.py``, ``poll_exchange.PollPart``) asked. Each becomes a
``WindowRequest`` that enters the recorder through its one door, ``request_window``; what this
part refuses (a window still running, profiling over) it says itself. Where a capture rule
times units, ``time_units`` wraps ``begin``/``end`` once, at construction, so the clock reads the
work alone (after the poll and any profiler start, before the profiler's step).
"""

import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..control import trigger
from ..control.anomaly import Capture
from ..control.captures import CapturePoll, Room, measures
from ..control.poll_exchange import PollExchange, PollPart
from ..config import polled
from ..config.window import StepSchedule, WindowRequest

Report = Callable[[str, str, str], None]


class RecorderPoll:
    def __init__(self, plan: Any, report: Report, room: Room, layout_of: Any) -> None:
        self.plan, self._report, self._layout_of = plan, report, layout_of
        self.watcher: Optional[trigger.TriggerWatcher] = (
            trigger.TriggerWatcher.for_plan(plan, report)
            if plan.config.profile_trigger_file else None)
        self.poller = CapturePoll(plan, report, self.watcher, room=room)
        # The other sources' parts: the rows of config/polled.py that the config turns on
        self.parts: List[PollPart] = [_part(source, plan, report) for source in polled.SOURCES
                                      if source.part is not None and source.on(plan.config)]
        self._asked: List[Tuple[int, WindowRequest]] = []  # (seen at, request) of those parts
        self.exchange = PollExchange([self.poller, *self.parts], plan.rank, plan.world_size,
                                     self.poller.say_once)

    def take(self, n: int, running: bool, done: bool) -> Optional[WindowRequest]:
        """Every rank, at unit ``n``: the window the poll agreed this rank records, if any
        (``running``: a window records here now; ``done``: profiling has ended here). The
        first part in table order that asks for one wins the poll; a later one is refused."""
        exchanged = self.exchange.share(n)  # every rank, same unit: one collective
        if exchanged is None:
            return None
        taking, shared = exchanged
        chosen: Optional[WindowRequest] = None
        for part in taking:
            if part is self.poller:
                request, capture = self.poller.agreed(n, shared)
                if request is not None:
                    chosen = self._from_trigger(request, n, running)
                elif capture is not None:
                    chosen = self._from_capture(capture, n, running, done)
                continue
            asked = part.agreed(n, shared)
            if asked is None:
                continue
            why = ("profiling has ended on this rank (a profiler failure or --profile-max-gb)"
                   if done else "a window is still running on this rank" if running
                   else "another window was agreed at the same poll" if chosen is not None
                   else None)
            if why is not None:
                self._report("warning", "trigger", f"the window {part.name} asked for at "
                                                   f"{self.plan.unit.name} {n} is not recorded "
                                                   f"here: {why}")
            else:
                chosen = asked
                self._asked.append((n, asked))
        return chosen

    def _from_trigger(self, request: dict, n: int, running: bool) -> Optional[WindowRequest]:
        watcher = self.watcher
        assert watcher is not None  # a request comes only through the trigger file
        if running or self.poller.capturing(n):
            watcher.ignored(request, n, self.plan.unit, "a window is still running")
            return None
        sessions, window = trigger.sessions_for(request, n, self.plan, self._layout_of, watcher)
        if not sessions:
            return None
        return WindowRequest(by="trigger", sessions=tuple(sessions), window=window,
                             replaces_queue=True)

    def _from_capture(self, capture: Capture, n: int, running: bool,
                      done: bool) -> Optional[WindowRequest]:
        sessions = self.poller.sessions(capture)
        if not sessions:
            return None  # the capture chose other ranks
        if running or done:
            why = ("profiling has ended on this rank (a profiler failure or --profile-max-gb)"
                   if done else "a window is still running on this rank")
            self._report("warning", "capture", f"capture {capture.number} at "
                                               f"{self.plan.unit.name} {n} not recorded here: "
                                               f"{why}")
            return None
        window = StepSchedule(skip_first=capture.first, warmup=0,
                              active=capture.last - capture.first + 1)
        return WindowRequest(by="capture", sessions=tuple(sessions), window=window)

    def reason_for(self, start: int) -> Optional[Dict[str, Any]]:
        """Why the window whose first unit is ``start`` was taken (None: not by the poll)."""
        for seen_at, request in reversed(self._asked):
            if any(s.start <= start and (s.end is None or start < s.end)
                   for s in request.sessions):
                return {"by": request.by, "seen_at": seen_at}
        return self.poller.reason_for(start)

    def window_running(self, schedule: StepSchedule) -> None:
        if self.watcher is not None:
            self.watcher.set_state("running", window=[schedule.start, schedule.end])

    def window_ended(self, window: Any) -> None:
        if self.watcher is not None:
            self.watcher.window_ended(window)

    def close(self, reason: str) -> None:
        if self.watcher is not None:
            self.watcher.set_state("idle", reason=reason)
        self.poller.stop()

    def summary(self) -> Dict[str, Any]:
        return self.poller.summary()

    def clock(self) -> Any:
        return self.poller.clock


def _part(source: polled.PolledSource, plan: Any, report: Report) -> PollPart:
    """The part a row names (``"module:Class"``, built with the plan and the reporter)."""
    module, _, name = str(source.part).partition(":")
    part: PollPart = getattr(importlib.import_module(module), name)(plan, report)
    return part


def time_units(recorder: Any) -> None:
    """At construction: wrap begin/end with the unit clock where a capture rule needs it."""
    if not measures(recorder.plan):
        return
    cls: Any = type(recorder)
    plain_begin, plain_end = cls.begin, cls.end

    def begin(n: int) -> None:
        plain_begin(recorder, n)
        clock = recorder.poll_clock()
        if clock is not None:
            clock.began(n)

    def end(n: int, failure: Optional[Tuple[str, Optional[str]]] = None) -> None:
        clock = recorder.poll_clock()
        if clock is not None:
            clock.ended(n, failure is not None)
        plain_end(recorder, n, failure)

    recorder.begin = recorder.step_begin = begin
    recorder.end = recorder.step_end = end
