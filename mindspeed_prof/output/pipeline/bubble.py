"""The bubble of every pipeline stage, split into what the schedule implies and the stall.

For one step of one stage (one rank), from its schedule marks:

- the step's span is the ``forward-backward`` mark (the schedule call: warm-up to cool-down);
- compute is the union of its ``forward-compute`` / ``backward-compute`` marks;
- the measured bubble is the span outside compute (waiting on peers, sends and receives, the
  gradient synchronisation the schedule ends with);
- the schedule's own warm-up/cool-down: in a 1F1B schedule a stage idles while the other stages
  take the first microbatch forward and the last one backward, the sum of the other stages'
  per-microbatch compute (divided by the virtual chunks v for the interleaved schedule, whose
  chunks are that much smaller). With p equal stages of per-microbatch time c this is
  (p-1)·c/v, the textbook bubble (p-1)/(v·m+p-1) of the span;
- the stall is the rest: waiting for a peer beyond what the schedule implies (a slower stage,
  a slow link, a host that launched late).

The stage that holds the pipeline back is the one with the most compute in the step; it is named
only when it exceeds the median of the others by ``HOLD_BACK_PCT`` (a balanced pipeline has none).
Stages of one pipeline replica are the ranks that share every coordinate but pp.
"""

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...config import schedule_marks as sm
from .marks import Piece, ScheduleRun

HOLD_BACK_PCT = 25.0  # CPU runs of a balanced pipeline vary by 10-15 % step to step


def theory(schedule: Optional[str], stages: int, chunks: int, microbatches: int) -> Optional[float]:
    """The schedule's bubble fraction with equal stages: (p-1)/(v·m+p-1); 0 without pipelining;
    None for a schedule of unknown shape (another package's in Megatron's place)."""
    if stages < 1 or microbatches < 1 or chunks < 1 or schedule not in (
            sm.NO_PIPELINING, sm.ONE_F_ONE_B, sm.INTERLEAVED):
        return None
    if schedule == sm.NO_PIPELINING or stages == 1:
        return 0.0
    return (stages - 1) / (chunks * microbatches + stages - 1)


@dataclass
class StageStep:
    """One stage's numbers for one step (µs)."""

    rank: int
    stage: int
    step: Optional[int]
    span: float
    compute: float
    per_microbatch: float  # this stage's typical forward+backward time of one microbatch
    microbatches: int

    @property
    def bubble(self) -> float:
        return max(0.0, self.span - self.compute)


@dataclass
class StageBubble:
    rank: int
    stage: int
    step: Optional[int]
    span_us: float
    compute_us: float
    bubble_us: float
    schedule_us: float  # warm-up and cool-down the schedule implies
    stall_us: float
    theory: Optional[float]

    @property
    def fraction(self) -> float:
        return self.bubble_us / self.span_us if self.span_us > 0 else 0.0


@dataclass
class Replica:
    """One pipeline (its stages in order) for one step."""

    key: Tuple[int, ...]
    label: str
    step: Optional[int]
    stages: List[StageBubble] = field(default_factory=list)
    holds_back: Optional[int] = None  # the stage named, or None: balanced
    excess_pct: Optional[float] = None  # how far its compute exceeds the others' median


def _union(pieces: List[Piece], lo: float, hi: float) -> float:
    total, end = 0.0, lo
    for piece in sorted(pieces, key=lambda p: p.start):
        start, stop = max(piece.start, end), min(piece.end, hi)
        if stop > start:
            total += stop - start
            end = stop
    return total


def stage_step(rank: int, run: ScheduleRun) -> StageStep:
    outer = run.outer
    compute = run.compute()
    per_mb: Dict[Tuple[Optional[int], Optional[int]], float] = {}
    for piece in compute:  # forward and backward of one (chunk, microbatch)
        key = (piece.mark.chunk, piece.mark.mb)
        per_mb[key] = per_mb.get(key, 0.0) + (piece.end - piece.start)
    chunks = outer.mark.chunks or 1
    microbatches = outer.mark.microbatches or max(1, len(per_mb) // chunks)
    # a microbatch's time through the whole stage: its chunks' times added
    typical = statistics.median(per_mb.values()) * chunks if per_mb else 0.0
    return StageStep(rank, run.stage, run.step, outer.end - outer.start,
                     _union(compute, outer.start, outer.end), typical, microbatches)


def replica_bubbles(key: Tuple[int, ...], label: str, step: Optional[int],
                    stages: List[StageStep], schedule: Optional[str], chunks: int) -> Replica:
    """The bubbles of one pipeline's stages in one step."""
    replica = Replica(key, label, step)
    count = max([s.stage for s in stages] + [0]) + 1
    count = max(count, len(stages))
    for one in sorted(stages, key=lambda s: s.stage):
        others = sum(s.per_microbatch for s in stages if s is not one)
        implied = min(one.bubble, others / max(chunks, 1)) if schedule != sm.NO_PIPELINING \
            else 0.0
        replica.stages.append(StageBubble(
            rank=one.rank, stage=one.stage, step=step, span_us=one.span,
            compute_us=one.compute, bubble_us=one.bubble, schedule_us=implied,
            stall_us=one.bubble - implied,
            theory=theory(schedule, count, chunks, one.microbatches)))
    if len(stages) > 1:
        slowest = max(stages, key=lambda s: s.compute)
        rest = statistics.median(s.compute for s in stages if s is not slowest)
        if rest > 0:
            excess = 100.0 * (slowest.compute - rest) / rest
            replica.excess_pct = excess
            if excess >= HOLD_BACK_PCT:
                replica.holds_back = slowest.stage
    return replica


def median_over_steps(replicas: List[Replica]) -> Replica:
    """One replica's steps folded into one: each stage's numbers are their medians."""
    first = replicas[0]
    folded = Replica(first.key, first.label, None)
    by_stage: Dict[int, List[StageBubble]] = {}
    for replica in replicas:
        for stage in replica.stages:
            by_stage.setdefault(stage.stage, []).append(stage)
    for number in sorted(by_stage):
        rows = by_stage[number]

        def med(attr: str) -> float:
            return float(statistics.median(getattr(r, attr) for r in rows))

        bubble, implied = med("bubble_us"), med("schedule_us")
        implied = min(implied, bubble)  # the split still adds up to the bubble
        folded.stages.append(StageBubble(
            rank=rows[0].rank, stage=number, step=None, span_us=med("span_us"),
            compute_us=med("compute_us"), bubble_us=bubble, schedule_us=implied,
            stall_us=bubble - implied, theory=rows[0].theory))
    named = [r.holds_back for r in replicas if r.holds_back is not None]
    if named and len(named) * 2 > len(replicas):  # named in most steps
        folded.holds_back = statistics.mode(named)
    excesses = [r.excess_pct for r in replicas if r.excess_pct is not None]
    folded.excess_pct = float(statistics.median(excesses)) if excesses else None
    return folded
