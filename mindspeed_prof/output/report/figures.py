"""The report's plotly figures, as plain dicts for ``Plotly.newPlot`` (no plotly Python objects:
the page embeds plotly.js once and each figure is a few lines of JSON)."""

from typing import Any, Dict, List, Optional

from ..read import columns
from . import colour

# colour per part, the same in every figure and table
COLOURS = {"Computing": "#4c72b0", "Communication(Not Overlapped)": "#dd8452",
           "Overlapped": "#8172b3", "Free": "#b5b5b5", "step_time": "#55a868"}
SHORT = {"step_time": "Step time", "Computing": "Computing",
         "Communication(Not Overlapped)": "Comm not overlapped",
         "Overlapped": "Comm overlapped", "Free": "Free"}
ROW_PX = 16
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


def heatmap(matrix: Dict[str, Any], part: Dict[str, Any], unit: str,
            tall: bool) -> Dict[str, Any]:
    """One part's rank x step heatmap; ``tall``: the big one (step time)."""
    rows = len(matrix["y"])
    height = max(220, min(ROW_PX * rows, 1100) + 110) if tall else \
        max(200, min(10 * rows, 520) + 100)
    show_every = tall or rows <= 24
    scale = part.get("scale") or colour.scale([v for row in part["z_ms"] for v in row])
    title = part["title"] + (" (band: slowest rank)" if matrix["banded_rows"] else "") + (
        " — all zero" if scale["zero"] else "")
    return {
        "data": [{"type": "heatmap", "z": part["z_ms"], "x": matrix["x"], "y": matrix["y"],
                  "text": part["text"], "colorscale": scale["colorscale"],
                  "zmin": scale["zmin"], "zmax": scale["zmax"],
                  "reversescale": not scale["zero"],  # slow = dark red; zero: one grey
                  "showscale": not scale["zero"],
                  "hoverongaps": False,
                  "hovertemplate": "%{y} · " + unit + " %{x}<br>%{text}<extra></extra>",
                  "colorbar": {"title": {"text": "ms", "side": "right"}, "thickness": 12},
                  "xgap": 1 if len(matrix["x"]) <= 64 else 0,
                  "ygap": 1 if rows <= 64 else 0}],
        "layout": {"title": {"text": title, "x": 0, "xanchor": "left",
                             "font": {"size": 14 if tall else 13}},
                   "height": height, "margin": {"l": 110, "r": 20, "t": 40, "b": 50},
                   "xaxis": {"title": {"text": unit}, "type": "category"},
                   "yaxis": {"title": {"text": ""}, "type": "category", "autorange": "reversed",
                             "showticklabels": True,
                             **({} if show_every else {"nticks": 12})},
                   "font": FONT, "paper_bgcolor": "white", "plot_bgcolor": "white"}}


def step_bars(rows: List[Dict[str, Any]], unit: str) -> Optional[Dict[str, Any]]:
    """The per-step breakdown (means over ranks), stacked: its three parts make the step."""
    if not rows:
        return None
    mixed = len({r["backend"] for r in rows}) > 1
    x = [f"{r['step']} {r['backend']}" if mixed else str(r["step"]) for r in rows]
    data = []
    for key in columns.STEP_PARTS:
        if any(key in r["mean_us"] for r in rows):
            data.append(_bar(x, [r["mean_us"].get(key) for r in rows], key, SHORT[key]))
    if any("Overlapped" in r["mean_us"] for r in rows):
        data.append({"type": "scatter", "mode": "lines+markers", "x": x,
                     "y": [_ms(r["mean_us"].get("Overlapped")) for r in rows],
                     "name": "Comm overlapped (inside Computing)",
                     "line": {"color": COLOURS["Overlapped"], "dash": "dot"},
                     "hovertemplate": "%{y:.3f} ms<extra>Comm overlapped</extra>"})
    if not data:  # a step time with no breakdown (a trace whose steps hold no operator)
        data.append(_bar(x, [r["mean_us"].get("step_time") for r in rows], "step_time",
                         "Step time (no breakdown)"))
    return {"data": data,
            "layout": {"barmode": "stack", "height": 380, "font": FONT,
                       "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
                       "xaxis": {"title": {"text": unit}, "type": "category"},
                       "yaxis": {"title": {"text": "ms per step (mean over ranks)"}},
                       # above the plot, never over the bars
                       "legend": {"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left",
                                  "yanchor": "bottom", "traceorder": "normal"},
                       "paper_bgcolor": "white", "plot_bgcolor": "white"}}


def _bar(x, values_us, key, name):
    return {"type": "bar", "x": x, "y": [_ms(v) for v in values_us], "name": name,
            "marker": {"color": COLOURS[key]},
            "hovertemplate": "%{y:.3f} ms<extra>" + name + "</extra>"}


def _ms(us):
    return None if us is None else us / 1000.0
