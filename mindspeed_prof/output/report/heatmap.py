"""The rank x step matrices of the report: step time and each breakdown part.

Rows are the summary's rank rows (one per (rank, backend)), columns the step numbers every rank
shares. Up to ``MAX_ROWS`` rows each rank is its own row; past that, consecutive rows are
gathered into bands of equal size, each cell the band's slowest rank (the one worth finding),
with the band's mean and that rank named on hover. Steps past ``MAX_COLUMNS`` are banded the
same way. So a 1,024-rank job is 64 readable rows, and the page's size does not grow with the
job's.
"""

import math
import statistics
from typing import Any, Dict, List, Optional

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


def matrices(ranks: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Every part's matrix, banded alike; None when no rank has a numbered step."""
    steps = sorted({s["step"] for r in ranks for s in r["steps"] if s.get("step") is not None
                    and s.get("step_time") is not None})
    if not steps:
        return None
    mixed = len({r["backend"] for r in ranks if r["backend"]}) > 1
    labels = [row_label(r, mixed) for r in ranks]
    rows, columns = _bands(len(ranks), MAX_ROWS), _bands(len(steps), MAX_COLUMNS)
    y = [labels[b[0]] if len(b) == 1 else f"ranks {ranks[b[0]]['rank']}-{ranks[b[-1]]['rank']}"
         for b in rows]
    x = [str(steps[b[0]]) if len(b) == 1 else f"{steps[b[0]]}-{steps[b[-1]]}" for b in columns]
    result: Dict[str, Any] = {"x": x, "y": y, "banded_rows": any(len(b) > 1 for b in rows),
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
