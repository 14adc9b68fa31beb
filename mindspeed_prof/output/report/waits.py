"""The report's first section: who makes whom wait (summary --json's ``waits``).

The ranks the others wait for, most first, with their place, group and reason; each group's
collectives (count, wait, transfer, bandwidth, slow links); and a rank × step heatmap of
lateness at arrival (a rank's arrival − its collective's first arrival, summed over the step),
banded as the other heatmaps are (64 rows, 128 columns at most; rows in the layout's order,
PP stage then TP, CP and DP, when it is known: ``heatmap.layout_order``).
"""

from typing import Any, Dict, List, Optional

from . import colour
from .heatmap import MAX_COLUMNS, MAX_ROWS, _bands, band_label, layout_order

TOP = 16  # ranks listed by the wait they cause


def ranks_by_wait(waits: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The ranks that made others wait at all, most first (``TOP`` of them), slow ones marked."""
    slow = {row["rank"]: row for row in waits["slow_ranks"]}
    rows = [{**row, **slow.get(row["rank"], {}), "slow": row["rank"] in slow}
            for row in waits["ranks"] if row["made_wait_us"] > 0]
    return rows[:TOP]


def lateness_matrix(waits: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The lateness heatmap's rows (banded to ``MAX_ROWS``), columns and colour scale."""
    late = waits["lateness"]
    if not late["ranks"] or not late["steps"]:
        return None
    layout = waits.get("layout")
    order = layout_order(late["ranks"], layout)
    size = max(1, -(-len(order) // MAX_ROWS))
    bands = [order[i:i + size] for i in range(0, len(order), size)]
    steps = late["steps"]
    columns = _bands(len(steps), MAX_COLUMNS)
    y, z, text = [], [], []
    for band in bands:
        ranks = [late["ranks"][i] for i in band]
        y.append(f"rank {ranks[0]}" if len(ranks) == 1 else band_label(ranks, layout))
        z_row, t_row = [], []
        for column in columns:
            value, where = max((late["us"][i][j], late["ranks"][i]) for i in band
                               for j in column)
            z_row.append(value / 1000.0)
            t_row.append(f"{value / 1000.0:.3f} ms late" + (
                f" (rank {where})" if len(band) * len(column) > 1 else ""))
        z.append(z_row)
        text.append(t_row)
    x = [str(steps[c[0]]) if len(c) == 1 else f"{steps[c[0]]}-{steps[c[-1]]}" for c in columns]
    return {"x": x, "y": y, "z_ms": z, "text": text, "banded_rows": size > 1,
            "scale": colour.scale([v for row in z for v in row])}
