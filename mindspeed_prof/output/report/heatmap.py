"""The rank x step matrices of the report: step time and each breakdown part.

Rows are the summary's rank rows (one per (rank, backend)), columns the step numbers every rank
shares. Rows follow the parallel layout when the manifests record it (PP stage, then TP, CP and
DP coordinates: ``layout_order``), else rank order. Up to ``MAX_ROWS`` rows each rank is its own
row; past that, rows next to each other in that order are gathered into bands of equal size
(so a band is one stage's ranks, never ranks of two stages that merely have consecutive
numbers), each cell the band's slowest rank (the one worth finding), with the band's mean and
that rank named on hover. Steps past ``MAX_COLUMNS`` are banded the
same way. So a 1,024-rank job is 64 readable rows, and the page's size does not grow with the
job's.
"""

import math
import statistics
from typing import Any, Dict, List, Optional

from ..waits.layout import DEFAULT_ORDER, ORDERS

MAX_ROWS = 64
MAX_COLUMNS = 128
# (key in a step of summary --json, title): what each heatmap shows
PARTS = (("step_time", "Step time"),
         ("Computing", "Computing"),
         ("Communication(Not Overlapped)", "Communication not overlapped"),
         ("Overlapped", "Communication overlapped"),
         ("Free", "Free (nothing running)"))


HOST_FREE = "Free: host Python time (no operator running)"


def _cpu_basis(ranks: List[Dict[str, Any]]) -> bool:
    """Every rank's breakdown counts CPU operators (torch traces without device kernels)."""
    bases = [r.get("breakdown_basis") or "" for r in ranks]
    return bool(bases) and all(b.startswith("CPU operators") for b in bases)


def row_label(rank: Dict[str, Any], mixed: bool) -> str:
    """``rank 5``, or ``rank 5 npu`` where backends differ; a rank whose files were not read
    has no backend to name (never ``rank 1 None``)."""
    return f"rank {rank['rank']}" + (f" {rank['backend']}" if mixed and rank["backend"] else "")


def cells(ranks: List[Dict[str, Any]], key: str) -> Dict[tuple, float]:
    """(row index, step) -> the value of ``key`` (µs); a rank with several devices at one step
    keeps its slowest."""
    out: Dict[tuple, float] = {}
    for index, rank in enumerate(ranks):
        for step in rank["steps"]:
            value = step.get(key)
            if step.get("step") is None or value is None:
                continue
            cell = (index, step["step"])
            out[cell] = max(out.get(cell, value), value)
    return out


def _bands(count: int, most: int) -> List[range]:
    size = max(1, math.ceil(count / most))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def coords(rank: int, layout: Dict[str, Any]) -> tuple:
    """(pp, tp, cp, dp) of ``rank`` in the layout of summary --json's ``waits.layout``, in
    its ``order`` (Megatron's tp-cp-ep-dp-pp by default: tensor parallel fastest)."""
    found, rest = {}, rank
    for kind in ORDERS.get(layout.get("order") or "", DEFAULT_ORDER):
        found[kind], rest = rest % layout[kind], rest // layout[kind]
    return (found["pp"], found["tp"], found["cp"], found["dp"])


def _known(numbers: List[int], layout: Optional[Dict[str, Any]]) -> bool:
    world = layout.get("world") if layout else None
    return isinstance(world, int) and all(0 <= n < world for n in numbers)


def layout_order(numbers: List[int], layout: Optional[Dict[str, Any]]) -> List[int]:
    """Indices of ``numbers`` (ranks) in the layout's order (PP stage, then TP, CP, DP), or
    as they are when the layout is unknown or does not hold every rank."""
    order = list(range(len(numbers)))
    if layout and _known(numbers, layout):
        order.sort(key=lambda i: (coords(numbers[i], layout), i))
    return order


def band_label(numbers: List[int], layout: Optional[Dict[str, Any]]) -> str:
    """A band's name: ``pp0 tp0 dp0-15`` in the layout's order, else ``ranks 0-15``."""
    if not layout or not _known(numbers, layout):
        return f"ranks {min(numbers)}-{max(numbers)} ({len(numbers)})" \
            if numbers != list(range(numbers[0], numbers[0] + len(numbers))) \
            else f"ranks {numbers[0]}-{numbers[-1]}"
    first, last = coords(numbers[0], layout), coords(numbers[-1], layout)
    cp = f" cp{first[2]}" if layout["cp"] > 1 else ""
    if first[:3] == last[:3]:
        return f"pp{first[0]} tp{first[1]}{cp} dp{first[3]}-{last[3]}"
    stages = f"pp{first[0]}" if first[0] == last[0] else f"pp{first[0]}-{last[0]}"
    return f"{stages} ({len(numbers)} ranks)"


def matrices(ranks: List[Dict[str, Any]], layout: Optional[Dict[str, Any]] = None) \
        -> Optional[Dict[str, Any]]:
    """Every part's matrix, banded alike, rows in the layout's order when ``layout`` (summary
    --json's ``waits.layout``) is given; None when no rank has a numbered step."""
    steps = sorted({s["step"] for r in ranks for s in r["steps"] if s.get("step") is not None
                    and s.get("step_time") is not None})
    if not steps:
        return None
    mixed = len({r["backend"] for r in ranks if r["backend"]}) > 1
    labels = [row_label(r, mixed) for r in ranks]
    order = layout_order([r["rank"] for r in ranks], layout)
    rows = [[order[i] for i in band] for band in _bands(len(ranks), MAX_ROWS)]
    columns = _bands(len(steps), MAX_COLUMNS)
    y = [labels[b[0]] if len(b) == 1 else band_label([ranks[i]["rank"] for i in b], layout)
         for b in rows]
    x = [str(steps[b[0]]) if len(b) == 1 else f"{steps[b[0]]}-{steps[b[-1]]}" for b in columns]
    result: Dict[str, Any] = {"x": x, "y": y, "banded_rows": any(len(b) > 1 for b in rows),
                              "in_layout_order": bool(layout) and _known(
                                  [r["rank"] for r in ranks], layout),
                              "banded_columns": any(len(b) > 1 for b in columns),
                              "ranks": len(ranks), "steps": len(steps), "parts": []}
    for key, title in PARTS:
        values = cells(ranks, key)
        if not values:
            continue
        z, text = [], []
        for band in rows:
            z_row: List[Optional[float]] = []
            text_row: List[str] = []
            for column in columns:
                found = [(values[(i, steps[j])], i) for i in band for j in column
                         if (i, steps[j]) in values]
                if not found:
                    z_row.append(None)
                    text_row.append("no step recorded")
                    continue
                top, where = max(found)
                z_row.append(top / 1000.0)
                text_row.append(_hover(found, top, labels[where], len(band) * len(column) > 1))
            z.append(z_row)
            text.append(text_row)
        if key == "Free" and _cpu_basis(ranks):  # no device: what is left is the host's
            title = HOST_FREE
        result["parts"].append({"key": key, "title": title, "z_ms": z, "text": text})
    return result


def _hover(found, top, where, banded):
    if not banded:
        return f"{top / 1000.0:.3f} ms"
    mean = statistics.fmean(v for v, _ in found)
    return (f"max {top / 1000.0:.3f} ms ({where})<br>mean {mean / 1000.0:.3f} ms over "
            f"{len(found)} cells")
