"""``summary`` of the RL role layout: one cross-role table per profiled RL step.

For every RL step and role: the step's time and each stage's, taken from the slowest rank of the
role, and which rank that is. A whole-step capture gives the step (``ProfilerStep#g``) and its
stages (``stage:NAME`` ranges inside it); a stage capture (``{role}/{stage}/``) gives that stage
alone, so the role's step time is then unknown and the stages' sum is shown instead.
"""

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ...layout import ASCEND_OUTPUT_DIR
from ..read import jsonstream
from ..read.discover import discover
from ..read.errors import CorruptFile
from ..read.roles import RoleRoot
from ..read.tracescan import STEP_PREFIX, step_number, to_float

STAGE_PREFIX = "stage:"


@dataclass
class RankStep:
    """One rank of one role at one RL step."""

    step_us: Optional[float] = None
    stages: Dict[str, float] = field(default_factory=dict)

    @property
    def total_us(self):
        return self.step_us if self.step_us is not None else sum(self.stages.values())


@dataclass
class RoleSummary:
    directory: str
    # step -> role -> rank -> RankStep
    steps: Dict[int, Dict[str, Dict[int, RankStep]]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    roots: List[str] = field(default_factory=list)  # each role's (or stage's) folder

    def table(self, step):
        """Rows of the cross-role table of ``step``: one per role."""
        rows = []
        for role, by_rank in sorted(self.steps.get(step, {}).items()):
            slowest = max(sorted(by_rank), key=lambda r: by_rank[r].total_us)
            stages = sorted({s for r in by_rank.values() for s in r.stages})
            timed = [r.step_us for r in by_rank.values() if r.step_us is not None]
            rows.append({
                "role": role, "ranks": sorted(by_rank),
                "step_us": max(timed) if timed else None,
                "stages_us": {s: max(r.stages.get(s, 0.0) for r in by_rank.values())
                              for s in stages},
                "slowest_rank": slowest, "slowest_us": by_rank[slowest].total_us,
                "measured": "step" if timed else "sum of stages",
            })
        return rows

    def as_dict(self):
        return {"directory": self.directory, "layout": "roles", "notes": self.notes,
                "rl_steps": [{"step": step, "roles": self.table(step)}
                             for step in sorted(self.steps)]}


def summarize_roles(path: str, roots: List[RoleRoot]) -> RoleSummary:
    summary = RoleSummary(directory=os.path.abspath(path), roots=[root.path for root in roots])
    for root in roots:
        for run in discover(root.path).runs:
            if run.rank is None:
                summary.notes.append(f"{root.rel}/{run.rel}: rank unknown, left out")
                continue
            trace = run.path if run.backend == "torch" else os.path.join(
                run.path, ASCEND_OUTPUT_DIR, "trace_view.json")
            try:
                steps = read_steps(trace)
            except (CorruptFile, OSError, ValueError, RecursionError, EOFError) as exc:
                summary.notes.append(f"{root.rel}/{run.rel} skipped: {exc}")
                continue
            for number, (step_us, stages) in steps.items():
                entry = summary.steps.setdefault(number, {}).setdefault(
                    root.role, {}).setdefault(run.rank, RankStep())
                if root.stage is None:
                    entry.step_us = step_us
                    entry.stages.update(stages)
                else:
                    entry.stages[root.stage] = stages.get(root.stage, step_us)
    if not summary.steps:
        summary.notes.append(f"no RL step found under {summary.directory} (run `mindspeed-prof "
                             f"check {path}`)")
    return summary


def read_steps(path):
    """``{step: (step_us, {stage: us})}`` from one chrome trace: ``ProfilerStep#N`` events and
    the ``stage:NAME`` ranges that lie inside them."""
    steps, ranges = {}, []
    for event in jsonstream.complete_events(path):
        name = event.get("name")
        if not isinstance(name, str) or str(event.get("cat", "")).startswith("gpu"):
            continue
        ts, dur = to_float(event.get("ts")), to_float(event.get("dur"))
        if ts is None or dur is None:
            continue
        if name.startswith(STEP_PREFIX):
            number = step_number(name)
            if number is not None:
                steps.setdefault(number, (ts, dur))
        elif name.startswith(STAGE_PREFIX):
            ranges.append((name[len(STAGE_PREFIX):], ts, dur))
    result = {number: (dur, {}) for number, (ts, dur) in steps.items()}
    for stage, ts, dur in ranges:
        for number, (start, length) in steps.items():
            if start <= ts <= start + length:
                stages = result[number][1]
                stages[stage] = stages.get(stage, 0.0) + dur
                break
    return result
