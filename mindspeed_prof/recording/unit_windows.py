"""Windows recorded as one session per unit (requests, RL steps): how far each window got.

Work that hops threads between units (a server's requests) records every unit of a window as a
session of its own. Each session can then be whole while its window is not: the server stopped
after request 3 of the window 2-5, the RL loop was killed at step 27 of 20-40, a unit raised, a
colocated role's session kept one from starting. This module keeps, beside the sessions, the
record of the planned window itself (the manifest's ``planned`` entries): which units it
recorded, which never began here, which were refused, and whether it completed or was cut.
``check`` judges the window by it, so a cut window is never called valid.
"""

from typing import Callable, List, Optional, Sequence

from .manifest import Manifest
from .manifest_entries import PlannedWindow
from .notices import window_cut_words
from ..config.units import Unit
from ..config.window import StepSchedule

Report = Callable[[str, str, str], None]


class UnitWindows:
    """The planned windows of one recorder whose sessions are per unit."""

    def __init__(self, unit: Unit, windows: Sequence[StepSchedule], report: Report) -> None:
        self.unit, self._windows, self._report = unit, list(windows), report
        self.current: Optional[PlannedWindow] = None

    def add(self, window: StepSchedule) -> None:
        """A window a trigger request added."""
        self._windows.append(window)

    def for_session(self, manifest: Optional[Manifest], start: int) -> Optional[PlannedWindow]:
        """The planned window the session at unit ``start`` belongs to, its record opened in
        the manifest when the window's first session opens, passes or is refused."""
        current = self.current
        if current is not None and current.start <= start and (
                current.end is None or start < current.end):
            return current
        window = next((w for w in self._windows
                       if w.start <= start and (w.end is None or start < w.end)), None)
        if window is None or manifest is None:
            return None
        self.current = manifest.add_planned(window.start, window.end)
        return self.current

    def record(self, n: int) -> None:
        if self.current is not None:
            self.current.record(n)

    def passed_over(self, manifest: Optional[Manifest], session: StepSchedule) -> bool:
        """The session's unit never began here (a resumed role, a skipped step number): a gap
        in its window, not the loss of the rest of it. False when no window holds it."""
        planned = self.for_session(manifest, session.start)
        if planned is None:
            return False
        if not planned.data["skipped"]:
            last = "" if planned.end is None else planned.end - 1
            self._report("warning", "start", f"{self.unit.name} {session.start} of the window "
                                             f"{planned.start}-{last} never began here (started "
                                             f"later, or the number was skipped); the "
                                             f"{self.unit.plural} that do run are recorded")
        planned.skip([session.start])
        self.session_over(manifest, session)
        return True

    def refused(self, manifest: Optional[Manifest], session: StepSchedule, n: int) -> None:
        planned = self.for_session(manifest, session.start)
        if planned is not None:
            planned.refuse(n)
            self.session_over(manifest, session)

    def session_over(self, manifest: Optional[Manifest], session: StepSchedule) -> None:
        """A unit's session ended, was passed over or refused: the last one ends its window."""
        planned = self.current
        if planned is not None and planned.status == "running" and planned.end is not None \
                and session.end is not None and session.end >= planned.end:
            planned.finish()
            if manifest is not None:
                manifest.save()

    def stop(self, manifest: Optional[Manifest], start: int, stopped_by: Optional[str]) -> None:
        """The window from unit ``start`` was stopped on request (an HTTP stop): whole, up to
        here; ``stopped_by`` when it had a length it did not reach."""
        # Its units are no window's any more: a later window asked for over them is new.
        self._windows = [w for w in self._windows if w.start != start]
        planned = self.current
        if planned is not None and planned.start == start:
            self.current = None  # a later window's sessions find their own record
            if planned.status == "running":
                planned.finish(stopped_by)
                if manifest is not None:
                    manifest.save()

    def cut(self, reason: str, in_progress: Optional[int]) -> None:
        if self.current is not None and self.current.status == "running":
            self.current.mark_cut(reason, in_progress)

    def cut_window(self) -> Optional[PlannedWindow]:
        current = self.current
        return current if current is not None and current.status == "cut" else None

    def close(self, manifest: Manifest, reason: str, in_progress: Optional[int],
              last_begun: Optional[int], partial: Optional[int] = None) -> None:
        """The run ends: a window still open is cut (an open-ended one that ends with its loop
        is whole), and the log says what is on disk, from the record, not the plan."""
        planned = self.current
        if planned is None or planned.status == "complete":
            return
        if planned.status == "running":
            if planned.end is None and reason == "finished":
                planned.finish()
                manifest.save()
                return
            planned.mark_cut(reason, in_progress)
            manifest.save()
        recorded: List[int] = planned.recorded
        self._report("warning", "stop", window_cut_words(
            self.unit, planned.data["cut"]["reason"], last_begun, (planned.start, planned.end),
            recorded, partial))
