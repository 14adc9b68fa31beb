"""The report's pipeline section: one step drawn as stages × time, and each stage's bubble.

Only for a save path whose manifests say the job was pipelined and whose windows hold the
schedule marks (``pipeline`` reads them). The chart shows the first replica's stages in one
step, on one clock: forwards and backwards in two colours, each bar labelled with its
microbatch (and its virtual chunk where there are several). Beside it are stacked bars of
each stage's bubble: the warm-up/cool-down the schedule implies, the stall beyond it, and the
schedule's theory as a line.
"""

from typing import Any, Dict, List, Optional

from ...errors import ConfigError
from .figures import FONT

FORWARD, BACKWARD = "#4c72b0", "#dd8452"
IMPLIED, STALL, THEORY = "#b5b5b5", "#c62828", "#1a7f37"


def pipeline_data(path: str) -> Optional[Dict[str, Any]]:
    """``{"report": pipeline --json's answer, "chart": one step}`` or None."""
    from ..pipeline.analyze import analyze
    from ..pipeline.chart import step_chart
    from ..pipeline.in_summary import pipelined
    from ..pipeline.render import report_dict

    if not pipelined(path):
        return None
    try:
        report = analyze(path)
    except ConfigError:
        return None
    data = report_dict(report)
    data.pop("per_step")
    return {"report": data, "chart": step_chart(report)}


def step_figure(chart: Dict[str, Any]) -> Dict[str, Any]:
    """Stages × time: a horizontal bar per forward/backward of one microbatch."""
    several_chunks = any(p[1] for s in chart["stages"] for p in s["pieces"])
    traces: List[Dict[str, Any]] = []
    for kind, colour, name in (("F", FORWARD, "forward"), ("B", BACKWARD, "backward")):
        x, base, y, text = [], [], [], []
        for stage in chart["stages"]:
            for piece in stage["pieces"]:
                if piece[0] != kind:
                    continue
                label = f"{piece[2]}" if not several_chunks else f"{piece[2]}.{piece[1]}"
                x.append(round(piece[4] - piece[3], 3))
                base.append(piece[3])
                y.append(f"stage {stage['stage']} (rank {stage['rank']})")
                text.append(label)
        traces.append({"type": "bar", "orientation": "h", "x": x, "base": base, "y": y,
                       "text": text, "textposition": "inside", "insidetextanchor": "middle",
                       "name": name, "marker": {"color": colour},
                       "hovertemplate": "%{y} · " + name + " microbatch %{text}<br>"
                                        "%{base:.3f} ms + %{x:.3f} ms<extra></extra>"})
    rows = len(chart["stages"])
    return {"data": traces,
            "layout": {"barmode": "overlay", "height": max(200, 48 * rows + 110), "font": FONT,
                       "title": {"text": f"{chart['replica']}, iteration {chart['step']}"
                                         f" (microbatch{'.chunk' if several_chunks else ''})",
                                 "x": 0, "xanchor": "left", "font": {"size": 13}},
                       "margin": {"l": 130, "r": 20, "t": 40, "b": 50},
                       "xaxis": {"title": {"text": "ms from the step's first schedule start"}},
                       "yaxis": {"type": "category", "autorange": "reversed"},
                       "legend": {"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left",
                                  "yanchor": "bottom"},
                       "paper_bgcolor": "white", "plot_bgcolor": "white"}}


def bubble_figure(report: Dict[str, Any]) -> Dict[str, Any]:
    """Per stage of every replica: the bubble as warm-up/cool-down + stall, in % of the span."""
    x, implied, stall, theory = [], [], [], []
    for replica in report["replicas"]:
        for stage in replica["stages"]:
            x.append(f"{replica['replica']} stage {stage['stage']}")
            span = stage["span_ms"] or 1.0
            implied.append(round(100 * stage["warmup_cooldown_ms"] / span, 2))
            stall.append(round(100 * stage["stall_ms"] / span, 2))
            theory.append(None if stage["theory"] is None else round(100 * stage["theory"], 2))
    data: List[Dict[str, Any]] = [
        {"type": "bar", "x": x, "y": implied, "name": "warm-up/cool-down",
         "marker": {"color": IMPLIED}, "hovertemplate": "%{y:.1f} %<extra>warm-up/cool-down"
                                                         "</extra>"},
        {"type": "bar", "x": x, "y": stall, "name": "stall", "marker": {"color": STALL},
         "hovertemplate": "%{y:.1f} %<extra>stall</extra>"}]
    if any(t is not None for t in theory):
        data.append({"type": "scatter", "mode": "markers", "x": x, "y": theory,
                     "name": "theory", "marker": {"color": THEORY, "symbol": "line-ew-open",
                                                  "size": 24, "line": {"width": 3}},
                     "hovertemplate": "%{y:.1f} %<extra>theory</extra>"})
    return {"data": data,
            "layout": {"barmode": "stack", "height": 340, "font": FONT,
                       "margin": {"l": 60, "r": 20, "t": 30, "b": 60},
                       "xaxis": {"type": "category"},
                       "yaxis": {"title": {"text": "% of the schedule's span"}},
                       "legend": {"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left",
                                  "yanchor": "bottom"},
                       "paper_bgcolor": "white", "plot_bgcolor": "white"}}


def section(body: Any, data: Dict[str, Any], prefix: str = "") -> None:
    """Add the section to the page's ``Sections``."""
    report = data["report"]
    body.section(prefix + "Pipeline", "How much of each step does every pipeline stage spend "
                 "idle, how much of it does the schedule imply, and which stage holds the "
                 "pipeline back? (`mindspeed-prof pipeline`)")
    chart = data["chart"]
    if chart is not None:
        body.figure(step_figure(chart), "pipeline")
        if chart["aligned_on"] is None:
            body.note("clocks not aligned (no step every rank recorded): each stage on its own "
                      "clock.")
        if chart["cut"]:
            body.note("the chart stops after 4096 microbatch pieces.")
    body.figure(bubble_figure(report), "bubbles")
    for replica in report["replicas"]:
        if replica["holds_back"] is not None:
            body.note(f"{replica['replica']}: stage {replica['holds_back']} holds the pipeline "
                      f"back (its compute {replica['slowest_excess_pct']} % above the other "
                      f"stages'); the others' stall is time spent waiting for it.")
