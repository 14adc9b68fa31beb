"""One step of the pipeline drawn as stages × time: what the report's pipeline chart shows.

Each stage's forward and backward compute of every microbatch, on one clock (each rank's marks
shifted as ``timeline`` aligns its steps), relative to the step's earliest schedule start.
Bounded: at most ``MAX_PIECES`` pieces, so a long schedule's chart stays a few hundred kB.
"""

from typing import Any, Dict, List, Optional

from ...config import schedule_marks as sm
from .analyze import PipelineReport

MAX_PIECES = 4096


def chosen_step(report: PipelineReport) -> Optional[int]:
    """The asked step, else the latest step every rank of the first replica marked."""
    if report.step is not None:
        return report.step
    if not report.replicas:
        return None
    ranks = [s.rank for s in report.replicas[0].stages]
    common = [n for n in report.steps
              if all(n in report.marks[r].runs for r in ranks if r in report.marks)]
    return common[-1] if common else None


def step_chart(report: PipelineReport) -> Optional[Dict[str, Any]]:
    """``{"step", "replica", "aligned_on", "stages": [{"stage", "rank", "pieces": [[kind,
    chunk, mb, start_ms, end_ms]]}]}`` for the first replica, or None."""
    step = chosen_step(report)
    if step is None:
        return None
    replica = report.replicas[0]
    rows: List[Dict[str, Any]] = []
    origin = None
    for stage in replica.stages:
        run = report.marks[stage.rank].runs.get(step)
        if run is None:
            continue
        shift = report.shift_us.get(stage.rank, 0.0)
        start = run.outer.start + shift
        origin = start if origin is None else min(origin, start)
        rows.append({"stage": stage.stage, "rank": stage.rank, "shift": shift, "run": run})
    if origin is None:
        return None
    left = MAX_PIECES
    stages = []
    for row in rows:
        pieces = []
        for piece in row["run"].compute()[:max(left, 0)]:
            kind = "F" if piece.mark.timer == sm.FORWARD_COMPUTE else "B"
            pieces.append([kind, piece.mark.chunk, piece.mark.mb,
                           round((piece.start + row["shift"] - origin) / 1000.0, 3),
                           round((piece.end + row["shift"] - origin) / 1000.0, 3)])
        left -= len(pieces)
        stages.append({"stage": row["stage"], "rank": row["rank"], "pieces": pieces})
    return {"step": step, "replica": replica.label, "aligned_on": report.aligned_on,
            "stages": stages, "cut": left < 0}
