"""Captures by themselves: when a unit is slow, or one rank is, profile the next units (pure).

Two rules, both judged at the trigger's poll boundaries (``--profile-trigger-poll``):

- **slow step** (``--profile-on-slow-step FACTOR``): rank 0 compares each unit's wall time with
  the rolling median of the last ``MEDIAN_OF`` quiet units before it; one above FACTOR x that
  median is a spike. Its evidence travels to every rank on the poll's one collective.
- **straggler** (``--profile-on-straggler FACTOR``): every rank contributes one number, its own
  compute time (the median, over the quiet units since the last poll, of the unit's time minus
  what it waited in collectives), to the poll's one all-gather; when the slowest exceeds
  FACTOR x the median of the *other* ranks, and by at least ``STRAGGLER_MIN_GAP_S`` seconds, at
  ``STRAGGLER_CONFIRM`` polls in a row, that rank and one median rank (the reference) are
  profiled. Against the others, not all ranks: with two
  ranks the median of all is their mean, which no rank can exceed twice.

A unit is *quiet* when no window of the job touches it nor ended within ``SETTLE`` units before
it: profiled units (and the export after a window) are slower by design and must not look like
anomalies, nor teach the median. Every rank knows every window (planned ones from the plan,
requested and captured ones from the poll), so every rank tells quiet units apart alike.

Everything here is pure arithmetic on numbers the ranks exchanged, so every rank reaches the
same decision from the same inputs; ``captures.py`` does the timing and the exchange.
"""

import bisect
import collections
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

# The rolling median covers this many recent quiet units.
MEDIAN_OF = 50
# A spike needs a median of at least this many quiet units after the warm-up.
MIN_SAMPLES = 5
# Units after a window's last one that are not judged: its export may still run.
SETTLE = 2
# A straggler must be the same rank, beyond the factor, at this many polls in a row.
STRAGGLER_CONFIRM = 2
# ... and lose at least this many seconds per unit against the others' median. The ratio alone
# fires on noise: two ranks of an ordinary CPU job on a shared host differed by 1.5-3.8x at
# 40 ms units (up to 0.1 s apart), 2x at a quarter of ten-poll stretches; a straggler worth a
# capture costs the job more than that per unit.
STRAGGLER_MIN_GAP_S = 0.2

SLOW_STEP = "slow step"
STRAGGLER = "straggler"


# The ratios a rule saw are counted above these (the manifest's ``ratios_seen``): how close
# ordinary jitter came to each factor, to choose one without guessing.
RATIO_MARKS = (1.25, 1.5, 2.0, 3.0, 5.0)


def _r(seconds: float) -> float:
    return round(float(seconds), 6)


class RatioStats:
    """How many judged ratios (value / median) reached each mark, and the largest."""

    def __init__(self) -> None:
        self.judged = 0
        self.largest: Optional[float] = None
        self.over = {mark: 0 for mark in RATIO_MARKS}

    def add(self, ratio: float) -> None:
        self.judged += 1
        self.largest = ratio if self.largest is None else max(self.largest, ratio)
        for mark in RATIO_MARKS:
            if ratio > mark:
                self.over[mark] += 1

    def as_dict(self) -> Dict[str, Any]:
        return {"judged": self.judged,
                "largest": None if self.largest is None else round(self.largest, 3),
                "over": {f"{mark:g}": count for mark, count in self.over.items()}}


class RollingMedian:
    """The median of the last ``size`` values."""

    def __init__(self, size: int = MEDIAN_OF) -> None:
        self._values: collections.deque = collections.deque(maxlen=size)

    def add(self, value: float) -> None:
        self._values.append(value)

    def median(self) -> Optional[float]:
        return statistics.median(self._values) if self._values else None

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class Spike:
    """A unit that took more than ``factor`` x the median of the quiet units before it."""

    unit: int
    seconds: float
    median_s: float
    samples: int
    factor: float

    @property
    def ratio(self) -> float:
        return self.seconds / self.median_s

    def evidence(self) -> Dict[str, Any]:
        return {"rule": SLOW_STEP, "factor": self.factor, "unit": self.unit,
                "seconds": _r(self.seconds), "median_s": _r(self.median_s),
                "median_of": self.samples, "ratio": round(self.ratio, 3)}


class SpikeRule:
    """Rank 0's judge of its own unit times (see the module docstring)."""

    def __init__(self, factor: float, warmup_until: int, size: int = MEDIAN_OF) -> None:
        self.factor, self.warmup_until = factor, warmup_until
        self.history = RollingMedian(size)
        self.seen = RatioStats()

    def observe(self, n: int, seconds: float) -> Optional[Spike]:
        """Judge unit ``n`` against the units before it, then let it join the median."""
        if n <= self.warmup_until:
            return None  # start-up is slow (compilation, allocator, caches): never judged
        median, spike = self.history.median(), None
        if median is not None and len(self.history) >= MIN_SAMPLES and median > 0:
            self.seen.add(seconds / median)
            if seconds > self.factor * median:
                spike = Spike(n, seconds, median, len(self.history), self.factor)
        self.history.add(seconds)
        return spike

    def worst(self, units: Sequence[Tuple[int, float]]) -> Optional[Spike]:
        """Observe each (unit, seconds) in order; the spike with the highest ratio, if any."""
        spikes = [s for s in (self.observe(n, t) for n, t in units) if s is not None]
        return max(spikes, key=lambda s: (s.ratio, -s.unit)) if spikes else None


@dataclass(frozen=True)
class Straggler:
    rank: int
    seconds: float
    median_s: float
    reference: int
    factor: float
    numbers: Tuple[Optional[float], ...]

    def evidence(self) -> Dict[str, Any]:
        return {"rule": STRAGGLER, "factor": self.factor, "straggler": self.rank,
                "reference": self.reference, "seconds": _r(self.seconds),
                "median_s": _r(self.median_s), "ratio": round(self.seconds / self.median_s, 3),
                "per_rank_s": {str(r): (None if x is None else _r(x))
                               for r, x in enumerate(self.numbers)}}


class StragglerRule:
    """Judges the per-rank numbers of one poll (the same on every rank)."""

    def __init__(self, factor: float, confirm: int = STRAGGLER_CONFIRM,
                 min_gap_s: float = STRAGGLER_MIN_GAP_S) -> None:
        self.factor, self.confirm, self.min_gap_s = factor, confirm, min_gap_s
        self._streak: Tuple[Optional[int], int] = (None, 0)
        self.seen = RatioStats()

    def judge(self, numbers: Sequence[Optional[float]]) -> Optional[Straggler]:
        known = [(x, r) for r, x in enumerate(numbers) if x is not None]
        if len(known) < 2:
            self._streak = (None, 0)
            return None
        slowest, rank = max(known, key=lambda t: (t[0], -t[1]))
        others = sorted(t for t in known if t[1] != rank)
        median = statistics.median(x for x, _ in others)
        if median > 0:
            self.seen.add(slowest / median)
        if median <= 0 or slowest <= self.factor * median or slowest - median < self.min_gap_s:
            self._streak = (None, 0)
            return None
        count = self._streak[1] + 1 if self._streak[0] == rank else 1
        self._streak = (rank, count)
        if count < self.confirm:
            return None
        self._streak = (None, 0)
        reference = others[(len(others) - 1) // 2][1]  # the median rank of the others
        return Straggler(rank, slowest, median, reference, self.factor, tuple(numbers))


class JobWindows:
    """Every window of the job, as inclusive (first touched, last) units: the plan's, the
    trigger's and the captures'. The same on every rank."""

    def __init__(self, planned: Sequence[Tuple[int, int]] = ()) -> None:
        self._spans: List[Tuple[int, int]] = sorted(planned)
        self._firsts = [a for a, _ in self._spans]

    def add(self, first: int, last: int) -> None:
        index = bisect.bisect(self._firsts, first)
        self._spans.insert(index, (first, last))
        self._firsts.insert(index, first)

    def busy(self, n: int) -> bool:
        """Unit ``n`` is in a window or settles after one: not judged, not captured."""
        index = bisect.bisect_right(self._firsts, n)
        # windows do not overlap, so only the few starting at or before n can hold it
        for first, last in self._spans[max(0, index - 3):index]:
            if first <= n <= last + SETTLE:
                return True
        return False

    def next_first(self, n: int) -> Optional[int]:
        """The first unit of the next window touching a unit after ``n``, if any."""
        index = bisect.bisect_right(self._firsts, n)
        return self._firsts[index] if index < len(self._firsts) else None


@dataclass
class CaptureLimits:
    """``--profile-max-captures`` and the cool-down (units between two captures)."""

    max_captures: int
    cooldown: int
    taken: int = 0
    next_allowed: int = 0

    @property
    def exhausted(self) -> bool:
        return self.taken >= self.max_captures

    def refusal(self, n: int) -> Optional[str]:
        """Why no capture may start at unit ``n``, or None."""
        if self.exhausted:
            return f"--profile-max-captures {self.max_captures} reached"
        if n < self.next_allowed:
            return f"cool-down (--profile-capture-cooldown) until {self.next_allowed}"
        return None

    def took(self, last: int) -> int:
        self.taken += 1
        self.next_allowed = last + 1 + self.cooldown
        return self.taken


@dataclass(frozen=True)
class Capture:
    """A capture every rank agreed on: units ``first..last`` (inclusive) on ``ranks`` (None:
    the selected ranks), and why (``evidence``, as the manifest's window ``trigger``)."""

    number: int
    first: int
    last: int
    ranks: Optional[Tuple[int, ...]]
    evidence: Dict[str, Any] = field(default_factory=dict)

    def role_of(self, rank: int) -> Optional[str]:
        if self.evidence.get("rule") != STRAGGLER:
            return None
        return "straggler" if rank == self.evidence["straggler"] else "reference"


def capture_span(n: int, steps: int, last_unit: Optional[int], windows: JobWindows
                 ) -> Optional[Tuple[int, int]]:
    """The units a capture decided at ``n`` records: ``steps`` from ``n``, cut at the run's last
    unit and before the next planned window; None when nothing is left."""
    last = n + steps - 1
    if last_unit is not None:
        last = min(last, last_unit)
    following = windows.next_first(n)
    if following is not None:
        last = min(last, following - 1)
    return (n, last) if last >= n else None


# Why the ranks a capture chooses could not record it: (its ranks, None for the selected ones;
# its number of units) -> the reason, or None when every one of them can.
RoomCheck = Callable[[Optional[Tuple[int, ...]], int], Optional[str]]


def decide(n: int, *, spike: Optional[Dict[str, Any]], straggler: Optional[Straggler],
           limits: CaptureLimits, windows: JobWindows, steps: int, last_unit: Optional[int],
           no_room: Optional[RoomCheck] = None) -> Tuple[Optional[Capture], Optional[str]]:
    """The capture that starts at unit ``n`` (and records it in ``limits`` and ``windows``), or
    (None, why an anomaly seen now is not captured); (None, None) when there is no anomaly.
    ``spike``: rank 0's evidence, as exchanged. ``no_room``: what the ranks shared of their disk
    budget; a capture one of its ranks could not record is refused, so it takes no slot."""
    if spike is None and straggler is None:
        return None, None
    why = limits.refusal(n)
    if why is None and windows.busy(n):
        why = "another window is running"
    span = None if why else capture_span(n, steps, last_unit, windows)
    if why is None and span is None:
        why = "no unit is left before the next window or the end"
    if why is not None or span is None:
        return None, why
    first, last = span
    if spike is not None:
        evidence, ranks = dict(spike), None
    elif straggler is not None:
        evidence = straggler.evidence()
        ranks = tuple(sorted({straggler.rank, straggler.reference}))
    else:  # not reached: no anomaly returned at the top
        return None, None
    why = no_room(ranks, last - first + 1) if no_room is not None else None
    if why is not None:
        return None, why
    number = limits.took(last)
    evidence.update(capture=number, max_captures=limits.max_captures, seen_at=n)
    windows.add(first, last)
    return Capture(number, first, last, ranks, evidence), None
