"""One rank's schedule marks, read from its timeline files, grouped by the step they ran in.

The marks (``config/schedule_marks.py``) are complete events in a torch trace, or mstx ranges in
torch_npu's ``trace_view.json``. On an NPU capture a compute mark (put on the device stream)
is there twice, on the host (when it was issued) and on the device (when the device ran it):
the device's copy is kept, as it is what the device spent; the other marks are host ranges. Each ``forward-backward`` mark is one
schedule call; the other marks that start inside it are its pieces; its step is the
``ProfilerStep#N`` it starts in.
"""

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from ...config import schedule_marks as sm
from ..read import jsonstream, tracescan
from ..read.errors import CorruptFile


@dataclass
class Piece:
    mark: sm.ScheduleMark
    start: float  # µs, the file's own clock
    end: float


@dataclass
class ScheduleRun:
    """One schedule call of one rank: its ``forward-backward`` span and the pieces inside."""

    step: Optional[int]
    outer: Piece
    pieces: List[Piece] = field(default_factory=list)

    @property
    def stage(self) -> int:
        return self.outer.mark.stage

    def compute(self) -> List[Piece]:
        return [p for p in self.pieces if p.mark.is_compute]


@dataclass
class RankMarks:
    rank: int
    runs: Dict[int, ScheduleRun] = field(default_factory=dict)  # step -> its schedule call
    unreadable: int = 0  # marks whose times were not numbers
    notes: List[str] = field(default_factory=list)


def _number(value: object) -> Optional[float]:
    number = tracescan.to_float(value)
    return number if number is not None and number == number and abs(number) < 1e18 else None


def _events(paths: Iterable[str], notes: List[str]) -> Iterable[Tuple[object, str, float, float]]:
    for path in paths:
        try:
            for event in jsonstream.complete_events(path):
                name = event.get("name")
                if not isinstance(name, str):
                    continue
                ts, dur = _number(event.get("ts")), _number(event.get("dur"))
                if ts is None or dur is None or dur < 0:
                    if sm.parse(name) is not None:
                        yield None, name, 0.0, -1.0
                    continue
                yield event.get("pid"), name, ts, ts + dur
        except CorruptFile as exc:
            notes.append(f"{path}: {exc}; the marks read before it are kept")


def read_rank(rank: int, paths: List[str]) -> RankMarks:
    """The schedule calls of one rank in ``paths`` (its captures' timeline files)."""
    found = RankMarks(rank)
    steps: List[Tuple[float, float, int]] = []
    by_pid: Dict[object, List[Piece]] = {}
    for pid, name, start, end in _events(paths, found.notes):
        if end < 0:
            found.unreadable += 1
            continue
        number = tracescan.step_number(name) if name.startswith(tracescan.STEP_PREFIX) else None
        if number is not None:
            steps.append((start, end, number))
            continue
        mark = sm.parse(name)
        if mark is not None:
            by_pid.setdefault(pid, []).append(Piece(mark, start, end))
    pieces = _device_copy(by_pid)
    steps.sort()
    outers = sorted((p for p in pieces if p.mark.timer == sm.FORWARD_BACKWARD),
                    key=lambda p: p.start)
    inner = sorted((p for p in pieces if p.mark.timer != sm.FORWARD_BACKWARD),
                   key=lambda p: p.start)
    for outer in outers:
        step = _step_of(outer.start, steps)
        key = step if step is not None else -len(found.runs) - 1
        found.runs[key] = ScheduleRun(step, outer)
    runs = sorted(found.runs.values(), key=lambda r: r.outer.start)
    index = 0
    for piece in inner:
        while index < len(runs) and runs[index].outer.end < piece.start:
            index += 1
        if index < len(runs) and runs[index].outer.start <= piece.start:
            runs[index].pieces.append(piece)
    return found


def _device_copy(by_pid: Dict[object, List[Piece]]) -> List[Piece]:
    """The compute marks of the process that holds the most of them, where two hold as many
    (an NPU's host and device copies of the same ranges) the one that ran later: the device;
    the other marks (host ranges only) of the process that holds the most schedule calls."""
    if not by_pid:
        return []

    def weight(compute: bool):
        def of(pid: object) -> Tuple[int, float]:
            pieces = [p for p in by_pid[pid] if p.mark.is_compute == compute]
            mean = sum(p.start for p in pieces) / len(pieces) if pieces else 0.0
            return len(pieces), mean
        return of

    compute = max(by_pid, key=weight(True))
    rest = max(by_pid, key=weight(False))
    return [p for p in by_pid[compute] if p.mark.is_compute] + \
        [p for p in by_pid[rest] if not p.mark.is_compute]


def _step_of(ts: float, steps: List[Tuple[float, float, int]]) -> Optional[int]:
    for start, end, number in steps:
        if start <= ts <= end:
            return number
    return None
