"""The report's HTML: one file, plotly.js embedded once, every figure and table inline.

Nothing read from an output folder reaches the page unescaped: text goes through
``html.escape``, figure data through ``json.dumps`` with ``</`` broken, so a file name or a note
cannot close a tag. Every table cell holding a time carries the exact value of summary --json
in ``data-us`` (the text shows it in ms, rounded).
"""

import html
import json
from typing import Any, Dict, Optional

from ...version import __version__
from ..render import jsontext
from . import figures, whatif
from .sections import Sections

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;
background:#f6f7f9}
main{max-width:1360px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:28px 0 4px;border-bottom:1px solid
#ddd;padding-bottom:4px}h3{font-size:15px;margin:16px 0 4px}
.answers{color:#555;margin:0 0 10px;font-size:13px}.meta{color:#555;font-size:13px}
.card{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:8px 12px;margin:8px 0}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:8px}
table{border-collapse:collapse;font-size:13px;margin:4px 0 8px;background:#fff}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.bad{color:#c62828;font-weight:600}
.tag{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#eef}
.slow{background:#fff1e6}.note{color:#666;font-size:12px;margin:2px 0}
nav a{margin-right:12px;font-size:13px}details>summary{cursor:pointer;color:#345}
"""


def render(data: Dict[str, Any], plotlyjs: str, baseline: Optional[Dict[str, Any]] = None) \
        -> str:
    """The whole page for ``build``'s ``data`` (``baseline``: the diff against a baseline)."""
    body = Sections()
    parts = data["parts"]
    header = (f"<h1>mindspeed-prof report</h1><p class=meta>{_e(data['directory'])} · "
              f"mindspeed-prof {_e(__version__)}</p>")
    if data["layout"] == "roles":
        body.roles(data)
    for index, part in enumerate(parts):
        # what changed since the baseline is read right after the verdicts, not at the end
        _part(body, part, len(parts) > 1, baseline if index == 0 else None)
    if baseline is not None and not parts:
        body.baseline(baseline)
    scripts = "\n".join(
        f"Plotly.newPlot({json.dumps(div)},{_json(fig['data'])},{_json(fig['layout'])},"
        f"{{displaylogo:false,responsive:true}});" for div, fig in body.figures)
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>mindspeed-prof report · {_e(data['directory'])}</title>"
            f"<style>{STYLE}</style><script>{plotlyjs}</script></head><body><main>"
            f"{header}{body.nav()}{body.html()}</main><script>{scripts}</script></body></html>\n")


def _part(body: Sections, part: Dict[str, Any], several: bool,
          baseline: Optional[Dict[str, Any]] = None) -> None:
    prefix = f"{part['title']}: " if several and part.get("title") else ""
    summary, unit = part["summary"], part["unit"]
    body.section(prefix + "Who makes whom wait", "Which ranks do the others wait for in "
                 "collectives, in which group, and why? Matched collective by collective.")
    body.waits(summary.get("waits"), unit)
    body.section(prefix + "Verdicts", "Can these files be trusted? check's verdict per rank.")
    body.verdicts(part)
    if baseline is not None:
        body.baseline(baseline)
    body.section(prefix + f"Rank × {unit} heatmaps",
                 f"Which rank, which {unit}? Each cell is one rank's time in one {unit}; "
                 f"hover for the numbers.")
    matrix = part["heatmap"]
    if matrix is None:
        body.note(f"no rank has a timed {unit}: nothing to draw (see the notes below).")
    else:
        if matrix["banded_rows"]:
            order = "the layout's order (PP stage, then TP, then DP)" if \
                matrix["in_layout_order"] else "rank order (no layout recorded)"
            body.note(f"{matrix['ranks']} rank rows gathered into {len(matrix['y'])} bands in "
                      f"{order}: each cell is the band's maximum of that map's "
                      f"metric (the rank it came from named on hover, with the band's mean).")
        main, *rest = matrix["parts"]
        body.figure(figures.heatmap(matrix, main, unit, tall=True), "heatmap")
        body.grid([figures.heatmap(matrix, p, unit, tall=False) for p in rest], "heatmap")
    body.section(prefix + f"Breakdown per {unit}",
                 f"Where does each {unit}'s time go? Mean over ranks; Computing + Comm not "
                 f"overlapped + Free = the step.")
    bars = figures.step_bars(part["per_step"], unit)
    if bars:
        body.figure(bars, "steps")
    body.per_step_table(part["per_step"], unit)
    if any(r["requests"] for r in summary["ranks"]):
        body.section(prefix + "Requests", "How long did each request take, in how many "
                     "forwards, and what ran longest in it?")
        body.requests(summary["ranks"])
    body.section(prefix + "Slow ranks", "Who holds the others back, and why? The ranks others "
                 "wait for (else, mean step time against the median rank), and the reason.")
    body.slow_ranks(part["slow_ranks"])
    body.section(prefix + "Per-rank breakdown", "Each rank's mean over its profiled steps "
                 "(summary's table).")
    body.rank_table(summary["ranks"])
    body.section(prefix + "Top operators", "What computes longest? Totals over every rank.")
    body.tops(summary)
    body.section(prefix + "Communication per group", "Which collectives, in which group, how "
                 "many bytes, how fast? Where the files say it.")
    body.communication(part["communication"])
    body.links(summary.get("communication_matrix"))
    if part.get("pipeline"):
        from .pipeline import section as pipeline_section
        pipeline_section(body, part["pipeline"], prefix)
    body.section(prefix + "Captures taken by themselves", "What did the anomaly rules catch, "
                 "and what grew against the reference rank?")
    body.captures(summary.get("captures") or [])
    body.section(prefix + "Memory", "How high did allocated and reserved memory go?")
    body.memory(summary.get("memory") or [])
    whatif.section(body, part.get("whatif"), prefix)
    notes = [f"rank {r['rank']}: {n}" for r in summary["ranks"] for n in r["notes"]]
    notes += summary["notes"]
    if notes:
        body.section(prefix + "Notes", "What summary said about these files.")
        body.notes(notes)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _json(value: Any) -> str:
    # strict, as every JSON the readers write: a non-finite number is null (a gap in a figure)
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:
        text = json.dumps(jsontext.strict(value)[0], separators=(",", ":"), allow_nan=False,
                          default=str)
    return text.replace("</", "<\\/")

