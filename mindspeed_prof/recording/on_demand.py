"""Windows asked for while the work runs (DESIGN §7), the part of ``WindowRecorder`` that keeps
the one asked for at run time (an HTTP ``/start_profile`` relayed to every engine rank) until
its sessions have all opened and ended, or a stop ends it.

The recorder's one door, ``request_window(n, request)``, takes every window that no plan
asked for, on the thread that computes, at a unit boundary: an HTTP start (skip
``request.delay`` units, then record ``request.length`` units, 0: until ``stop_window``, in a
folder of its own under ``request.prefix`` when given), a trigger request or a capture (their
sessions chosen by the poll, ``polling.py``). For a start, this part answers what the routes
and the door ask: whether such a window still waits for its first unit or records
(``holds``), the folder it writes into, and who asked for the window a session belongs to
(``started_by``: flags, trigger, capture, http).
"""

import dataclasses
import os
from typing import Any, Dict, Iterable, Iterator, Optional

from ..config.window import StepSchedule

STOP = "/stop_profile"


@dataclasses.dataclass
class AskedWindow:
    window: StepSchedule
    origin: Dict[str, Any]
    prefix: Optional[str]

    def holds(self, session: Optional[StepSchedule]) -> bool:
        if session is None:
            return False
        end = self.window.end
        return self.window.start <= session.start and (end is None or session.start < end)


class AskedWindows:
    def __init__(self) -> None:
        self.current: Optional[AskedWindow] = None

    def holds(self, session: Optional[StepSchedule]) -> bool:
        """The window asked for at run time holds ``session``."""
        current = self.current
        return current is not None and current.holds(session)

    def ask(self, window: StepSchedule, origin: Dict[str, Any], prefix: Optional[str],
            sessions: Iterable[StepSchedule], rest: Iterator[StepSchedule]
            ) -> Iterator[StepSchedule]:
        """The window is asked for: the sessions to queue, its own first, then ``rest``."""
        asked = self.current = AskedWindow(window, origin, prefix)
        return self._first(asked, sessions, rest)

    def _first(self, asked: AskedWindow, sessions: Iterable[StepSchedule],
               rest: Iterator[StepSchedule]) -> Iterator[StepSchedule]:
        for session in sessions:
            if self.current is not asked:
                break  # stopped: the rest of its sessions never open
            yield session
        if self.current is asked:
            self.current = None  # all its sessions opened and ended
        yield from rest

    def window_dir(self, plan: Any, schedule: StepSchedule) -> str:
        directory = plan.window_dir(schedule)
        current = self.current
        if current is not None and current.prefix and current.holds(schedule):
            save = plan.save_path
            directory = os.path.join(save, current.prefix, os.path.relpath(directory, save))
        return directory

    def origin(self, schedule: StepSchedule, polled: Any) -> Dict[str, Any]:
        """Who asked for the window ``schedule`` belongs to: an HTTP start, the trigger file or
        a capture rule (``polled``: the poll's reason, already in the entry), else the flags."""
        current = self.current
        if current is not None and current.holds(schedule):
            return current.origin
        if isinstance(polled, dict) and "by" in polled:  # another source's part
            return {"by": polled["by"]}
        if isinstance(polled, dict) and polled.get("rule") == "request":
            return {"by": "trigger", "request": polled.get("request")}
        if isinstance(polled, dict):
            return {"by": "capture", "rule": polled.get("rule")}
        return {"by": "flags"}
