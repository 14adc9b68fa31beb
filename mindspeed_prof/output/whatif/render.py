"""The what-if result in words (the terminal) and as strict JSON (``--json``)."""

import math
from typing import Any, Dict, List, Optional

from ..render import safe
from .analysis import GroupEffect, Imbalance, WhatIf

NOTICEABLE = 1.03   # S below this: the stragglers cost little (the artifact's threshold too)
WORTH_NAMING = 0.01  # a fix that saves less than 1 % of a step is not worth a sentence
# The slowdown from which M_W and M_S name a cause. With one DP replica M_W names none: its
# worst ranks are a stage's, and a slow worker cannot be told from a heavy stage.
CLASSIFIED = 1.1
_SHOWN = 8


def _num(value: Optional[float], digits: int = 6) -> Optional[float]:
    return round(value, digits) if value is not None and math.isfinite(value) else None


def _ms(seconds: float) -> Optional[float]:
    return _num(seconds * 1e3, 3)


def _mean(values: List[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _subject(dim: str, name: str) -> str:
    if dim == "stage":
        return f"stage {name} ran like the others"
    if dim == "dp_rank":
        return f"DP rank {name} ran like the others"
    return f"every {safe.cell(name)} took its type's typical time"


def verdict(result: WhatIf) -> List[str]:
    simulated, ideal = _mean(result.simulated_s), _mean(result.ideal_s)
    if not math.isfinite(result.slowdown):
        return ["No step could be simulated."]
    out = []
    if result.slowdown < NOTICEABLE:
        out.append(f"Stragglers cost little (S = {result.slowdown:.3f}): a step takes "
                   f"{simulated * 1e3:.1f} ms, with every op at its type's typical duration "
                   f"{ideal * 1e3:.1f} ms; nothing in particular to blame.")
        return out
    out.append(f"Stragglers slow every step by S = {result.slowdown:.3f}: a step takes "
               f"{simulated * 1e3:.1f} ms; with every op at its type's typical duration it would "
               f"take {ideal * 1e3:.1f} ms ({(ideal / simulated - 1) * 100:+.1f} %).")
    for dim, effects in (("stage", result.by_stage), ("dp_rank", result.by_dp_rank),
                         ("optype", result.by_optype)):
        best = max(effects, key=lambda e: e.saving, default=None)
        if best is not None and best.saving >= WORTH_NAMING:
            out.append(f"If {_subject(dim, best.name)}, a step would take "
                       f"{best.fixed_step_s * 1e3:.1f} ms ({-best.saving * 100:+.1f} %).")
    if result.slowdown < CLASSIFIED:
        return out  # M_W and M_S are shares of a small gap: too noisy to name a cause
    if result.meta.dp_size > 1 and result.m_w.value is not None and result.m_w.value >= 0.5:
        out.append(f"M_W = {result.m_w.value * 100:.0f} %: fixing the worst ranks "
                   f"({', '.join(result.m_w.selected)}) removes most of the slowdown: a worker "
                   f"problem (a slow device, host or link), not the job's shape.")
    if result.m_s.value is not None and result.m_s.value >= 0.5:
        out.append(f"M_S = {result.m_s.value * 100:.0f} %: making the last stage typical "
                   f"removes most of the slowdown: the stages are unevenly partitioned (the last "
                   f"holds the loss, and maybe more layers than the others).")
    return out


def _effects(effects: List[GroupEffect]) -> List[Dict[str, Any]]:
    return [{"name": e.name, "slowdown": _num(e.slowdown), "fixed_step_ms": _ms(e.fixed_step_s),
             "saving": _num(e.saving)} for e in effects]


def _imbalance(value: Imbalance) -> Dict[str, Any]:
    return {"value": _num(value.value), "added": _num(value.added), "selected": value.selected}


def as_dict(result: WhatIf, source: str) -> Dict[str, Any]:
    per_step = [{"step": step, "recorded_ms": _ms(rec), "simulated_ms": _ms(sim),
                 "ideal_ms": _ms(ideal), "slowdown": _num(sim / ideal if ideal > 0 else math.nan)}
                for step, rec, sim, ideal in zip(result.steps, result.recorded_s,
                                                 result.simulated_s, result.ideal_s)]
    return {
        "source": source,
        "job": result.meta.as_dict(),
        "rows": result.rows,
        "steps": result.steps,
        "step_ms": {"recorded": _ms(_mean(result.recorded_s)),
                    "simulated": _ms(_mean(result.simulated_s)),
                    "ideal": _ms(_mean(result.ideal_s))},
        "slowdown": _num(result.slowdown),
        "launch_slowdown": _num(result.launch_slowdown),
        "by_optype": _effects(result.by_optype),
        "by_dp_rank": _effects(result.by_dp_rank),
        "by_stage": _effects(result.by_stage),
        "m_w": _imbalance(result.m_w),
        "m_s": _imbalance(result.m_s),
        "verdict": verdict(result),
        "per_step": per_step,
        "notes": result.notes,
    }


def text(result: WhatIf, source: str) -> str:
    meta = result.meta
    lines = [f"what-if: {safe.cell(source)}  ({result.rows} ops, {len(result.steps)} steps, "
             f"DP {meta.dp_size} x PP {meta.pp_size} x TP {meta.tp_size}, "
             f"world {meta.world_size})", ""]
    lines += verdict(result)
    lines.append("")
    lines.append(f"step time (mean): recorded {_mean(result.recorded_s) * 1e3:.1f} ms, "
                 f"simulated without launch delays {_mean(result.simulated_s) * 1e3:.1f} ms, "
                 f"every op typical {_mean(result.ideal_s) * 1e3:.1f} ms")
    for title, effects in (("op type", result.by_optype), ("DP rank", result.by_dp_rank),
                           ("stage", result.by_stage)):
        lines.append("")
        lines.append(f"{'by ' + title:<28} {'S kept':>8} {'fixed ms':>10} {'saves':>8}")
        for e in effects[:_SHOWN]:
            lines.append(f"{safe.cell(e.name)[:28]:<28} {e.slowdown:>8.3f} "
                         f"{e.fixed_step_s * 1e3:>10.1f} {e.saving * 100:>7.1f}%")
        if len(effects) > _SHOWN:
            lines.append(f"... {len(effects) - _SHOWN} more (--json)")
    negligible = (" of a negligible slowdown" if math.isfinite(result.slowdown)
                  and result.slowdown < NOTICEABLE else "")
    for name, value in (("M_W", result.m_w), ("M_S", result.m_s)):
        shown = "n/a" if value.value is None else f"{value.value * 100:.1f} %{negligible}"
        lines.append(f"{name} = {shown} (fixing {', '.join(value.selected)})"
                     if name == "M_W" else f"{name} = {shown} (fixing the last stage)")
    for note in result.notes:
        lines.append(f"note: {safe.cell(note)}")
    return "\n".join(lines)
