"""``pipeline``'s answer for one save path: every replica's stages, their bubbles, the theory.

The captures are chosen as ``timeline`` chooses them (one window, the newest run, ``--step``
among its steps); each rank's marks are read on its own clock (a bubble is a duration on one
rank, so no clock alignment is needed); ranks are grouped into pipeline replicas by their
coordinates in the manifests' layout (every coordinate but pp), stages by the marks' ``stage``.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...config import schedule_marks as sm
from ...errors import ConfigError
from ..read import jobruns
from ..read.discover import discover
from ..timeline import choose, clock
from . import bubble
from .marks import RankMarks, read_rank


@dataclass
class PipelineReport:
    directory: str
    schedule: Optional[str]
    stages: int
    chunks: int
    microbatches: Optional[int]
    theory: Optional[float]
    steps: List[int]
    step: Optional[int]  # the step asked for; None: each stage's median over ``steps``
    replicas: List[bubble.Replica] = field(default_factory=list)
    per_step: List[bubble.Replica] = field(default_factory=list)  # every replica, every step
    notes: List[str] = field(default_factory=list)
    marks: Dict[int, RankMarks] = field(default_factory=dict)  # rank -> its schedule calls
    # rank -> what puts its marks on one clock (its trace's base plus the aligned offset, µs)
    shift_us: Dict[int, float] = field(default_factory=dict)
    aligned_on: Optional[str] = None  # what the clocks rest on; None: raw clocks


def _coordinates(directory: str) -> Dict[int, dict]:
    found = discover(directory)
    manifests = jobruns.choose(found.manifests).chosen
    coords = {}
    for rank, manifest in manifests.items():
        data = manifest.data if isinstance(manifest.data, dict) else {}
        where = choose.coordinates(rank, data)
        if where is not None:
            coords[rank] = where
    return coords


def _replica_of(rank: int, coords: Dict[int, dict]) -> Tuple[Tuple[int, ...], str]:
    where = coords.get(rank)
    if where is None:
        return (0,), "pipeline"
    key = (where["dp"], where["tp"], where["cp"])
    label = f"dp{where['dp']}" + (f" tp{where['tp']}" if where["tp"] else "") \
        + (f" cp{where['cp']}" if where["cp"] else "")
    return key, label


def analyze(directory: str, step: Optional[int] = None) -> PipelineReport:
    """Raises ``ConfigError`` when DIR or ``--step`` cannot be read as asked (the message
    names the fix)."""
    try:
        selection = choose.select(directory, steps=None if step is None else str(step))
    except ConfigError as exc:  # timeline's words name its own --steps A-B
        text = str(exc)
        asked = f"--steps {step}"
        if step is not None and text.startswith(asked):
            raise ConfigError(f"--step {step}" + text[len(asked):]) from None
        raise
    notes = list(selection.notes)
    coords = _coordinates(selection.root)
    ranks: List[RankMarks] = []
    unmarked: List[int] = []
    for track in selection.tracks:
        marks = read_rank(track.rank, [c.path for c in track.captures])
        notes.extend(marks.notes)
        if marks.unreadable:
            notes.append(f"rank {track.rank}: {marks.unreadable} schedule mark(s) without a "
                         f"usable timestamp or duration, left out")
        if marks.runs and not any(run.compute() for run in marks.runs.values()):
            unmarked.append(track.rank)  # a span with no compute in it is no 100 % bubble
        elif marks.runs:
            ranks.append(marks)
    if not ranks and unmarked:
        raise ConfigError(f"DIR {directory}: the schedule's steps are marked but none of their "
                          f"microbatches ({sm.NO_MICROBATCHES}), so no bubble can be measured.")
    if not ranks:
        raise ConfigError(f"DIR {directory} holds no pipeline schedule marks; they are written "
                          f"inside profiling windows of Megatron training by mindspeed_prof "
                          f"(see docs/training.md): profile a training run and point pipeline at "
                          f"its --profile-save-path.")
    if unmarked:
        notes.append(f"rank(s) {', '.join(map(str, unmarked))}: the schedule's steps are marked "
                     f"but none of their microbatches ({sm.NO_MICROBATCHES}); left out")
    outers = [run.outer.mark for r in ranks for run in r.runs.values()]
    schedule = next((m.schedule for m in outers if m.schedule), None)
    stages = max([m.stages or 1 for m in outers] + [max(m.stage for m in outers) + 1])
    chunks = max(m.chunks or 1 for m in outers)
    microbatches = next((m.microbatches for m in outers if m.microbatches), None)
    all_steps = sorted({n for r in ranks for n in r.runs if n >= 0})
    if step is not None and step not in all_steps:
        shown = ", ".join(map(str, all_steps)) or "none"
        raise ConfigError(f"--step {step}: no rank recorded a schedule in step {step}; the "
                          f"marked steps are {shown}.")
    chosen = [step] if step is not None else all_steps
    report = PipelineReport(directory, schedule, stages, chunks, microbatches,
                            bubble.theory(schedule, stages, chunks, microbatches or 0),
                            chosen, step, notes=notes)
    alignment = clock.align({t.rank: t.steps() for t in selection.tracks},
                            {t.rank: t.host for t in selection.tracks})
    report.aligned_on = alignment.aligned_on
    for track in selection.tracks:
        base = track.captures[0].base_ns / 1000.0 if track.captures else 0.0
        report.shift_us[track.rank] = base + alignment.offsets_us.get(track.rank, 0.0)
    report.marks = {m.rank: m for m in ranks}
    groups: Dict[Tuple[int, ...], Tuple[str, List[RankMarks]]] = {}
    for marks in ranks:
        key, label = _replica_of(marks.rank, coords)
        groups.setdefault(key, (label, []))[1].append(marks)
    for key in sorted(groups):
        label, members = groups[key]
        per_step = []
        for number in chosen:
            rows = [bubble.stage_step(m.rank, m.runs[number]) for m in members
                    if number in m.runs]
            if rows:
                per_step.append(bubble.replica_bubbles(key, label, number, rows, schedule,
                                                       chunks))
        report.per_step.extend(per_step)
        if per_step:
            report.replicas.append(per_step[0] if step is not None
                                   else bubble.median_over_steps(per_step))
    return report
