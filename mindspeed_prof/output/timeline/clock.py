"""Clocks: the steps each capture recorded, and the offset that puts each rank on one clock.

Ranks on different hosts do not share a clock. Every rank of a step ends it together only in
so far as the step's collectives make them wait for each other, so the offset of a host is
the median, over the step boundaries every chosen rank recorded (the start and the end of
each common ``ProfilerStep#N``), of how far its ranks' boundaries lie from the reference
rank's (the lowest rank). Ranks of one host share its clock and get one offset (the skew
between them is real and stays visible); ranks whose host is unknown (no manifest) get one
each. What is left after the offsets (``residual_us``: the largest gap between a rank's
aligned boundary and the reference's) is stated beside them: it is the tolerance of the
alignment. With no step every rank recorded there is nothing to align on: raw clocks.
"""

import gzip
import math
import os
import zlib
import re
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..read import tracescan

# torch (kineto) writes its events' ts relative to this (after traceEvents, at the file's end)
# (at most 20 digits: a longer number is no clock, and past a float's range)
_BASE_RE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d{1,20})(?![\d.eE])')
_HOST_RE = re.compile(rb'"host_name"\s*:\s*"([A-Za-z0-9._-]{1,253})"')
_EDGE_BYTES = 1 << 16


def recorded_steps(path: str, scan: Optional[tracescan.TraceScan] = None
                   ) -> Tuple[Dict[int, Tuple[float, float]], int, Optional[str]]:
    """({N: (start, end)} in the file's ts, the file's base in ns, the host torch names),
    from ``check``'s scan (``read/tracescan.py``, remembered in the cache: after a check this
    reads no event; ``scan``: the caller's) and the file's first and last 64 KiB. A step whose
    ts or dur is unreadable (read/numbers.py: None) is none to align on."""
    scan = scan if scan is not None else tracescan.remembered_scan(path)
    steps = {n: (ts, ts + dur) for n, (ts, dur) in scan.steps.items()
             if ts is not None and dur is not None}
    base, host = _edges(path)
    return steps, base, host


def _edges(path):
    """torch's ``baseTimeNanoseconds`` and ``host_name``, written beside traceEvents (in a
    ``.gz`` trace as in a plain one: without its base a rank lands decades from the others)."""
    try:
        if path.endswith(".gz"):
            head, tail = _gzip_edges(path)
        else:
            with open(path, "rb") as handle:
                head = handle.read(_EDGE_BYTES)
                size = os.fstat(handle.fileno()).st_size
                handle.seek(max(0, size - _EDGE_BYTES))
                tail = handle.read()
    except (OSError, EOFError, zlib.error):
        return 0, None
    base = _BASE_RE.search(tail) or _BASE_RE.search(head)
    host = _HOST_RE.search(tail) or _HOST_RE.search(head)
    return int(base.group(1)) if base else 0, host.group(1).decode() if host else None


def _gzip_edges(path):
    """The first and last 64 KiB of a gzip file's text (a gzip stream has no index: the
    tail is reached by decompressing through, in constant memory)."""
    with gzip.open(path, "rb") as handle:
        head = tail = handle.read(_EDGE_BYTES)
        while True:
            block = handle.read(1 << 20)
            if not block:
                return head, tail
            tail = (tail + block)[-_EDGE_BYTES:]


@dataclass
class Alignment:
    offsets_us: Dict[int, float]  # rank -> what was added to its timestamps
    aligned_on: Optional[str]  # what the offsets rest on; None: raw clocks
    common_steps: List[int] = field(default_factory=list)
    reference_rank: Optional[int] = None
    clocks: str = "per host"
    residual_us: Dict[int, float] = field(default_factory=dict)

    @property
    def tolerance_us(self) -> Optional[float]:
        return max(self.residual_us.values()) if self.residual_us else None

    def as_dict(self) -> dict:
        return {"offsets_us": {str(r): v for r, v in self.offsets_us.items()},
                "aligned_on": self.aligned_on, "common_steps": self.common_steps,
                "reference_rank": self.reference_rank, "clocks": self.clocks,
                "residual_us": {str(r): v for r, v in self.residual_us.items()},
                "tolerance_us": self.tolerance_us}


def align(steps_by_rank: Dict[int, Dict[int, Tuple[float, float]]],
          hosts: Dict[int, Optional[str]],
          asked: Optional[Tuple[int, int]] = None) -> Alignment:
    """Offsets for every rank of ``steps_by_rank`` ({rank: {N: (start, end)}} on each rank's
    clock); ``asked``: only steps within it are boundaries to align on."""
    ranks = sorted(steps_by_rank)
    common = set.intersection(*(set(s) for s in steps_by_rank.values())) if ranks else set()
    if asked:
        common = {n for n in common if asked[0] <= n <= asked[1]}
    common_steps = sorted(common)
    if not common_steps or not ranks:
        return Alignment({r: 0.0 for r in ranks}, None, [], ranks[0] if ranks else None,
                         "raw")
    reference = ranks[0]

    def gaps(rank):
        ref, mine = steps_by_rank[reference], steps_by_rank[rank]
        return [ref[n][i] - mine[n][i] for n in common_steps for i in (0, 1)]

    groups: Dict[object, List[int]] = {}
    for rank in ranks:  # one clock per host; a rank of no known host is its own
        groups.setdefault(hosts.get(rank) or ("rank", rank), []).append(rank)
    offsets = {}
    for members in groups.values():
        offset = statistics.median(g for r in members for g in gaps(r))
        for rank in members:
            offsets[rank] = 0.0 if reference in members else round(offset, 3)
    # Boundaries far from zero (absolute clocks near 1e15) carry float steps of 1/8 µs and more:
    # the stated residual covers them and is rounded up, so no aligned boundary lies past it.
    slack = 2 * max(math.ulp(abs(v)) for steps in steps_by_rank.values()
                    for bounds in steps.values() for v in bounds)
    residual = {r: math.ceil((max(abs(g - offsets[r]) for g in gaps(r)) + slack) * 1000) / 1000
                for r in ranks}
    shown = _span(common_steps)
    clocks = "per host" if any(isinstance(k, str) for k in groups) else "per rank"
    return Alignment(offsets, f"start and end of ProfilerStep#{shown} (recorded by every rank)",
                     common_steps, reference, clocks, residual)


def _span(numbers):
    if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}-{numbers[-1]}"
    return ",".join(str(n) for n in numbers)


def trace_clock(path: str) -> Tuple[int, Optional[str]]:
    """(torch's ``baseTimeNanoseconds``, its ``host_name``) of a trace: ts + base is the
    rank's clock."""
    return _edges(path)


# Members of one collective leave it together: their ends agree within the link's latency and
# the profiler's own jitter: tens of µs on a device; gloo's threads on a loaded CPU finish a
# ring's last chunk up to a few ms apart (measured: 4.7 ms on two ranks sharing two cores).
END_TOLERANCE_US = 10000.0


@dataclass
class CollectiveClocks:
    """Offsets from collective ends: what each host's clock is off (not any rank's lateness)."""

    offsets_us: Dict[int, float]  # rank -> what is added to its timestamps
    reference_rank: Optional[int]
    clocks: str  # "per host" / "per rank" / "raw"
    basis: Dict[int, str] = field(default_factory=dict)  # rank -> what its offset rests on
    uncertainty_us: Dict[int, float] = field(default_factory=dict)
    ends_used: Dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"offsets_us": {str(r): v for r, v in self.offsets_us.items()},
                "reference_rank": self.reference_rank, "clocks": self.clocks,
                "basis": {str(r): v for r, v in self.basis.items()},
                "uncertainty_us": {str(r): v for r, v in self.uncertainty_us.items()},
                "ends_used": {str(r): v for r, v in self.ends_used.items()}}


def align_on_collectives(ends: Dict[tuple, Dict[int, float]], hosts: Dict[int, Optional[str]],
                         prior: Dict[int, float], window_us: float,
                         tolerance_us: float = END_TOLERANCE_US) -> CollectiveClocks:
    """Each clock's offset from the ends of the collectives it shares with the reference's.

    ``ends``: {collective key: {rank: end on the rank's clock}}; ``prior``: a first guess per
    rank (from step boundaries), within ``window_us`` of which the truth lies: a key matched by
    order that is no shared collective (a group of one on each rank) ends far from it and is
    left out. Of the differences left, the densest cluster (ends within ``tolerance_us`` of
    each other) gives the offset, its median: a late rank moves its arrival, never its end,
    and one odd collective is outvoted. Ranks of one host share its clock and one offset; a
    clock that shares no collective with the reference keeps the step boundaries' estimate."""
    ranks = sorted({r for members in ends.values() for r in members} | set(prior))
    if not ranks:
        return CollectiveClocks({}, None, "raw")
    clocks: Dict[object, List[int]] = {}
    for rank in ranks:
        clocks.setdefault(hosts.get(rank) or ("rank", rank), []).append(rank)
    reference = ranks[0]
    home = next(k for k, members in clocks.items() if reference in members)
    mine = set(clocks[home])
    result = CollectiveClocks({}, reference,
                              "per host" if any(isinstance(k, str) for k in clocks) else "per rank")
    for key, members in clocks.items():
        if key == home:
            for rank in members:
                result.offsets_us[rank] = 0.0
                result.basis[rank] = "reference clock"
                result.uncertainty_us[rank] = 0.0
            continue
        theirs = set(members)
        guess = statistics.median(prior.get(r, 0.0) for r in members)
        diffs = []
        for found in ends.values():
            ref = [found[r] for r in found if r in mine]
            other = [found[r] for r in found if r in theirs]
            if ref and other:
                d = statistics.median(ref) - statistics.median(other)
                if abs(d - guess) <= window_us:
                    diffs.append(d)
        cluster = _densest(sorted(diffs), tolerance_us)
        if len(cluster) >= 1:
            offset = statistics.median(cluster)
            spread = max(abs(d - offset) for d in cluster)
            basis, used = "collective ends", len(cluster)
        else:
            offset, spread, basis, used = guess, None, "step boundaries (no collective shared " \
                f"with rank {reference}'s clock)", 0
        for rank in members:
            result.offsets_us[rank] = round(offset, 3)
            result.basis[rank] = basis
            if spread is not None:
                result.uncertainty_us[rank] = math.ceil(spread * 1000) / 1000
            result.ends_used[rank] = used
    return result


def _densest(values: List[float], width: float) -> List[float]:
    """The most values within ``width`` of one another's first (sorted ``values``)."""
    best, lo = (0, 0), 0
    for hi in range(len(values)):
        while values[hi] - values[lo] > width:
            lo += 1
        if hi - lo + 1 > best[1] - best[0]:
            best = (lo, hi + 1)
    return values[best[0]:best[1]]
