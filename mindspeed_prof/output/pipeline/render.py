"""``pipeline``'s answer as strict JSON and as a table (every name through ``render/safe``)."""

from typing import Any, Dict, List, Optional

from ..render import safe
from .analyze import PipelineReport
from .bubble import Replica, StageBubble


def _ms(us: float) -> float:
    return round(us / 1000.0, 3)


def _fraction(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 4)


def stage_dict(stage: StageBubble) -> Dict[str, Any]:
    return {"stage": stage.stage, "rank": stage.rank, "step": stage.step,
            "span_ms": _ms(stage.span_us), "compute_ms": _ms(stage.compute_us),
            "bubble_ms": _ms(stage.bubble_us), "bubble": _fraction(stage.fraction),
            "warmup_cooldown_ms": _ms(stage.schedule_us), "stall_ms": _ms(stage.stall_us),
            "theory": _fraction(stage.theory)}


def replica_dict(replica: Replica) -> Dict[str, Any]:
    excess = None if replica.excess_pct is None else round(replica.excess_pct, 1)
    return {"replica": replica.label, "step": replica.step,
            "stages": [stage_dict(s) for s in replica.stages],
            "holds_back": replica.holds_back, "slowest_excess_pct": excess}


def report_dict(report: PipelineReport) -> Dict[str, Any]:
    return {"directory": report.directory, "schedule": report.schedule,
            "stages": report.stages, "virtual_chunks": report.chunks,
            "microbatches": report.microbatches, "theory": _fraction(report.theory),
            "steps": report.steps, "step": report.step,
            "replicas": [replica_dict(r) for r in report.replicas],
            "per_step": [replica_dict(r) for r in report.per_step],
            "notes": report.notes}


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def report_table(report: PipelineReport) -> str:
    steps = (f"step {report.step}" if report.step is not None else
             f"median of steps {', '.join(map(str, report.steps))}")
    lines: List[str] = [
        f"pipeline: schedule {report.schedule or 'unknown'}, {report.stages} stage(s)"
        + (f" x {report.chunks} virtual chunks" if report.chunks > 1 else "")
        + f", {report.microbatches or '?'} microbatches; theory {_pct(report.theory)}; {steps}"]
    header = ("stage", "rank", "span ms", "compute ms", "bubble ms", "bubble", "theory",
              "warm-up/cool-down ms", "stall ms")
    for replica in report.replicas:
        lines.append("")
        lines.append(f"replica {replica.label}")
        rows = [header] + [(str(s.stage), str(s.rank), f"{s.span_us / 1000:.2f}",
                            f"{s.compute_us / 1000:.2f}", f"{s.bubble_us / 1000:.2f}",
                            _pct(s.fraction), _pct(s.theory), f"{s.schedule_us / 1000:.2f}",
                            f"{s.stall_us / 1000:.2f}") for s in replica.stages]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for row in rows:
            lines.append("  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
        if replica.holds_back is not None:
            lines.append(f"  stage {replica.holds_back} holds the pipeline back: its compute "
                         f"is {replica.excess_pct:.0f}% above the other stages'; the others' "
                         f"stall is time spent waiting for it")
        elif replica.excess_pct is not None:
            lines.append(f"  no stage holds the pipeline back (the busiest stage's compute is "
                         f"{replica.excess_pct:.0f}% above the others'"
                         + (")" if replica.step is not None else " at the median step)"))
    for note in report.notes:
        lines.append(f"note: {note}")
    return safe.lines("\n".join(lines))
