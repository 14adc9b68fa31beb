"""Windows recorded as one session per unit (requests, RL steps): how far each window got.

Work that hops threads between units (a server's requests) records every unit of a window as a
session of its own. Each session can then be whole while its window is not: the server stopped
after request 3 of the window 2-5, the RL loop was killed at step 27 of 20-40, a unit raised, a
colocated role's session kept one from starting. This module keeps, beside the sessions, the
record of the planned window itself (the manifest's ``planned`` entries): which units it
recorded, which never began here, which were refused, and whether it completed or was cut.
``check`` judges the window by it, so a cut window is never called valid.

A window asked for at run time (an HTTP start) over units a planned window also holds records
them in its own record; the planned window then says those units were recorded by the other
window (``recorded_elsewhere``), not that they never began.
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .manifest import Manifest
from .manifest_entries import PlannedWindow
from .notices import window_cut_words
from ..config.units import Unit
from ..config.window import StepSchedule

Report = Callable[[str, str, str], None]


class UnitWindows:
    """The planned windows of one recorder whose sessions are per unit."""

    # How many recent units remember the record that recorded them (a passed-over session is
    # the unit just recorded, or a few before it).
    RECENT = 64

    def __init__(self, unit: Unit, windows: Sequence[StepSchedule], report: Report) -> None:
        self.unit, self._windows, self._report = unit, list(windows), report
        self.current: Optional[PlannedWindow] = None
        self._asked: List[StepSchedule] = []  # windows asked for at run time, newest first
        # id(window) -> (window, its record): a window's sessions share one record.
        self._records: Dict[int, Tuple[StepSchedule, PlannedWindow]] = {}
        self._recorded_by: Dict[int, PlannedWindow] = {}  # unit -> the record that recorded it

    def add(self, window: StepSchedule) -> None:
        """A window a trigger request added."""
        self._windows.append(window)

    def add_asked(self, window: StepSchedule) -> None:
        """A window asked for at run time (an HTTP start): its sessions come first, so units
        a planned window also holds are recorded in this window's record."""
        self._asked.insert(0, window)
        self._windows.insert(0, window)

    def for_session(self, manifest: Optional[Manifest], start: int,
                    other_than: Optional[PlannedWindow] = None) -> Optional[PlannedWindow]:
        """The planned window the session at unit ``start`` belongs to, its record opened in
        the manifest when the window's first session opens, passes or is refused;
        ``other_than``: not that record's window (it recorded the unit already)."""
        asked = next((w for w in self._asked if _holds(w, start)
                      and not self._is_record(w, other_than)), None)
        current = self.current
        if asked is None and current is not None and current is not other_than \
                and _holds(current, start):
            return current
        window = asked or next((w for w in self._windows if _holds(w, start)
                                and not self._is_record(w, other_than)), None)
        if window is None or manifest is None:
            return None
        record = self._record_of(window)
        if record is None:
            record = manifest.add_planned(window.start, window.end)
            self._records[id(window)] = (window, record)
        self.current = record
        return record

    def _is_record(self, window: StepSchedule, record: Optional[PlannedWindow]) -> bool:
        return record is not None and self._record_of(window) is record

    def _record_of(self, window: StepSchedule) -> Optional[PlannedWindow]:
        entry = self._records.get(id(window))
        return entry[1] if entry is not None and entry[0] is window else None

    def record(self, n: int) -> None:
        if self.current is not None:
            self.current.record(n)
            self._recorded_by[n] = self.current
            if len(self._recorded_by) > self.RECENT:
                del self._recorded_by[next(iter(self._recorded_by))]

    def passed_over(self, manifest: Optional[Manifest], session: StepSchedule) -> bool:
        """The session's unit never began here (a resumed role, a skipped step number): a gap
        in its window, not the loss of the rest of it. False when no window holds it. A unit
        another window recorded (an HTTP start's, over a planned window) did begin: said so."""
        other = self._recorded_by.get(session.start)
        planned = self.for_session(manifest, session.start, other_than=other)
        if planned is None:
            return False
        if other is not None:
            self._recorded_elsewhere(planned, session.start, other)
            self.session_over(manifest, session)
            return True
        if not planned.data["skipped"]:
            last = "" if planned.end is None else planned.end - 1
            self._report("warning", "start", f"{self.unit.name} {session.start} of the window "
                                             f"{planned.start}-{last} never began here (started "
                                             f"later, or the number was skipped); the "
                                             f"{self.unit.plural} that do run are recorded")
        planned.skip([session.start])
        self.session_over(manifest, session)
        return True

    def _recorded_elsewhere(self, planned: PlannedWindow, n: int, other: PlannedWindow) -> None:
        origin = other.data.get("started_by") or {}
        prefix = origin.get("prefix")
        by = {"http": "started over HTTP", "trigger": "asked for by the trigger file"}.get(
            str(origin.get("by")), "of its own")
        where = f" under {prefix}/" if prefix else ""
        planned.data.setdefault("recorded_elsewhere", []).append(
            {"unit": n, "window": [other.start, other.end], "started_by": origin.get("by"),
             "prefix": prefix})
        last = "" if planned.end is None else planned.end - 1
        self._report("warning", "start", f"{self.unit.name} {n} of the window {planned.start}-"
                                         f"{last} was recorded by the window {by}{where} (from "
                                         f"{self.unit.name} {other.start}), not in this window's "
                                         f"folder (one window at a time)")

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

    def stop(self, manifest: Optional[Manifest], window: StepSchedule,
             stopped_by: Optional[str]) -> None:
        """The window ``window`` (asked for at run time) was stopped on request (an HTTP stop):
        whole, up to here; ``stopped_by`` when it had a length it did not reach."""
        # Its units are no window's any more: a later window asked for over them is new.
        planned = self._record_of(window)
        self._windows = [w for w in self._windows if w is not window]
        self._asked = [w for w in self._asked if w is not window]
        self._records.pop(id(window), None)
        if planned is None:
            return
        if planned is self.current:
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


def _holds(window: "StepSchedule | PlannedWindow", n: int) -> bool:
    return window.start <= n and (window.end is None or n < window.end)
