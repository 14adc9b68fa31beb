"""The entries of a manifest's ``windows`` and ``planned`` lists, and a rank's overall status.

The recorder writes them only through these methods, so what ``check`` reads has one writer.
"""

from typing import Any, Dict, Iterable, List, Optional


class _Entry:
    """A dict of the manifest with the fields every window entry has."""

    __slots__ = ("data",)

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data

    @property
    def start(self) -> int:
        return self.data["start"]

    @property
    def end(self) -> Optional[int]:
        return self.data["end"]

    @property
    def status(self) -> str:
        return self.data["status"]


class WindowEntry(_Entry):
    """One profiler session's window in the manifest. The recorder writes it only through these
    methods, so what ``check`` reads has one writer."""

    __slots__ = ()

    @property
    def recorded(self) -> List[int]:
        """The units that ran to their end inside the window."""
        return self.data["iterations_recorded"]

    @property
    def never_ran(self) -> Optional[int]:
        return self.data.get("never_ran")

    @property
    def is_cut(self) -> bool:
        return "cut" in self.data

    def record(self, n: int) -> None:
        self.data["iterations_recorded"].append(n)

    def mark_cut(self, reason: str, in_progress: Optional[int]) -> None:
        """The run ended inside the window (or its unit failed): it keeps what it recorded."""
        self.data["cut"] = {"reason": reason, "in_progress": in_progress}

    def mark_never_ran(self, n: int) -> None:
        self.data["never_ran"] = n

    def set_trigger(self, evidence: Dict[str, Any]) -> None:
        """Why the window was taken when no plan asked for it: a trigger request, or a capture
        rule and the numbers that fired it (``anomaly.py``)."""
        self.data["trigger"] = evidence

    def mark_stopped_early(self, by: str) -> None:
        self.data["stopped_early"] = by

    def mark_failed(self) -> None:
        self.data["status"] = "failed"

    def set_origin(self, origin: Dict[str, Any]) -> None:
        """Who asked for the window: {"by": "flags" | "trigger" | "http", ...}."""
        self.data["started_by"] = dict(origin)

    def note_unit(self, n: int, info: Dict[str, Any]) -> None:
        """What recorded unit ``n`` carried (an engine step's forward, its finished requests)."""
        self.data.setdefault("units", []).append({"n": n, **info})


class PlannedWindow(_Entry):
    """A window of the plan recorded as one session per unit (requests, RL steps): the sessions
    are window entries of their own; this says how far the window itself got."""

    __slots__ = ()

    @property
    def recorded(self) -> List[int]:
        return self.data["recorded"]

    def record(self, n: int) -> None:
        self.data["recorded"].append(n)

    def skip(self, units: Iterable[int]) -> None:
        """Units of the window the host never ran (a resumed job, a step number it skipped)."""
        self.data["skipped"].extend(units)

    def refuse(self, n: int) -> None:
        self.data["refused"].append(n)

    def finish(self, stopped_by: Optional[str] = None) -> None:
        """The window is whole; ``stopped_by``: it was stopped on request before its end."""
        self.data["status"] = "complete"
        if stopped_by is not None:
            self.data["stopped_early"] = stopped_by

    def set_origin(self, origin: Dict[str, Any]) -> None:
        self.data.setdefault("started_by", dict(origin))

    def mark_cut(self, reason: str, in_progress: Optional[int]) -> None:
        self.data["status"] = "cut"
        self.data["cut"] = {"reason": reason, "in_progress": in_progress}


_SEVERITY = ("failed", "incomplete", "parsing", "running", "unparsed", "cut", "complete")


def overall_status(windows, planned=()):
    """A rank's status across its windows (and planned windows): the most serious one."""
    statuses = {w.get("status") for w in windows} | {p.get("status") for p in planned
                                                      if p.get("status") == "cut"}
    for status in _SEVERITY:
        if status in statuses:
            return status
    return "armed"
