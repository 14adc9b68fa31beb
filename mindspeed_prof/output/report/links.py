"""The communication section's rank-pair matrix (summary --json's ``communication_matrix``):
per group a src x dst heatmap of bandwidth, the slowest first in colour, and the slow links.

Up to ``MAX_GROUPS`` groups, most bytes first; a group past ``MAX_ROWS`` ranks is banded (each
cell the band's slowest link, the one worth finding, named on hover), so the page does not grow
with the job.
"""

from typing import Any, Dict, List

from .figures import FONT
from .heatmap import MAX_ROWS, _bands

MAX_GROUPS = 4


def bandwidth_figures(matrix: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One heatmap per group that moved bytes between ranks (LOCAL copies left out)."""
    shown = [g for g in matrix["groups"] if g["size"] > 1 and g["bytes"] > 0][:MAX_GROUPS]
    return [_figure(g) for g in shown]


def _figure(group: Dict[str, Any]) -> Dict[str, Any]:
    bands = _bands(group["size"], MAX_ROWS)
    at = {i: n for n, band in enumerate(bands) for i in band}
    cells: Dict[tuple, tuple] = {}
    for p in group["pairs"]:
        if p["src"] == p["dst"] or p["bandwidth_gbps"] is None:
            continue
        key = (at[p["src"]], at[p["dst"]])
        if key not in cells or p["bandwidth_gbps"] < cells[key][0]:
            cells[key] = (p["bandwidth_gbps"], p)
    names = [str(b[0]) if len(b) == 1 else f"{b[0]}-{b[-1]}" for b in bands]
    z: List[List[Any]] = [[None] * len(bands) for _ in bands]
    text = [[""] * len(bands) for _ in bands]
    for (i, j), (bw, p) in cells.items():
        z[i][j] = round(bw, 3)
        text[i][j] = (f"{p['src']} → {p['dst']}: {bw:.2f} GB/s, {'/'.join(p['transports'])}, "
                      f"{p['bytes'] / 1e6:.1f} MB" + (" — SLOW" if p["slow"] else ""))
    title = f"Bandwidth per link, {group['group']} (GB/s; src rows, dst columns, " \
            "ranks of the group)" + (" (band: slowest link)" if len(bands) < group["size"]
                                     else "")
    return {
        "data": [{"type": "heatmap", "z": z, "x": names, "y": names, "text": text,
                  "colorscale": "YlOrRd", "zmin": 0.0, "reversescale": False,
                  "hoverongaps": False, "hovertemplate": "%{text}<extra></extra>",
                  "colorbar": {"title": {"text": "GB/s", "side": "right"}, "thickness": 12},
                  "xgap": 1 if len(bands) <= 32 else 0, "ygap": 1 if len(bands) <= 32 else 0}],
        "layout": {"title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 13}},
                   "height": max(260, min(14 * len(bands), 900) + 110),
                   "margin": {"l": 70, "r": 20, "t": 40, "b": 50},
                   "xaxis": {"title": {"text": "dst"}, "type": "category"},
                   "yaxis": {"title": {"text": "src"}, "type": "category",
                             "autorange": "reversed"},
                   "font": FONT, "paper_bgcolor": "white", "plot_bgcolor": "white"}}
