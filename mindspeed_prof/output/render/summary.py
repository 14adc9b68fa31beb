"""``summary``'s results as JSON (``--json``), long-format CSV (``--csv``) or a terminal table
(``summary_table.py``), all from one ``summary_dict``. Every time is in µs (``*_us`` keys;
the CSV's ``metric`` names end in ``_us`` or are step-trace components, also µs)."""

import csv
import io
import statistics

from ..read import columns
from ..summary import engine_steps
from ..summary.compare import backends, merge, slow_ranks, top_items
from . import jsontext, safe
from .summary_table import SHORT  # noqa: F401 - the other renderers' names for components
from .summary_table import summary_table as render_table


def summary_dict(summary):
    ranks = []
    for r in summary.ranks:
        kernels, kernel_total = top_items(r.kernels, summary.top)
        types, type_total = top_items(r.op_types, summary.top)
        ops, op_total = top_items(r.ops, summary.top)
        breakdown = r.breakdown()
        ranks.append({
            "rank": r.rank, "backend": r.backend, "sources": r.sources,
            "step_time_us": breakdown.get("step_time"), "breakdown_us": breakdown,
            "breakdown_basis": r.basis, "steps": r.steps,
            "top_kernels": [k.as_dict(kernel_total) for k in kernels],
            "kernel_total_us": kernel_total,
            "op_types": [t.as_dict(type_total) for t in types],
            "op_types_source": r.op_types_source,
            "top_ops": [o.as_dict(op_total) for o in ops], "requests": r.requests,
            "engine_windows": r.engine_windows, "notes": r.notes,
        })
    data = {"directory": summary.directory, "top": summary.top, "ranks": ranks,
            "overall": _overall(summary),
            "slow_ranks": slow_ranks(summary.ranks, getattr(summary, "waits", None)),
            "notes": summary.notes}
    if getattr(summary, "waits", None):
        data["waits"] = summary.waits
    if getattr(summary, "communication_matrix", None):
        data["communication_matrix"] = summary.communication_matrix
    if summary.run is not None:
        data["run"] = summary.run
    return data


def _overall(summary):
    groups = backends(summary.ranks)
    overall = {"ranks": len(summary.ranks), **_breakdown_over(summary.ranks)}
    if len(groups) > 1:  # device and CPU timelines: no mean across them
        overall.update(breakdown_us={}, step_time_us=None, max_step_time_us=None)
        overall["by_backend"] = {b: {"ranks": sum(1 for r in summary.ranks if r.backend == b),
                                     **_breakdown_over([r for r in summary.ranks
                                                        if r.backend == b])}
                                 for b in groups}
    for key, attribute in (("top_kernels", "kernels"), ("op_types", "op_types"),
                           ("top_ops", "ops")):
        items, whole = top_items(merge(summary.ranks, attribute), summary.top)
        overall[key] = [i.as_dict(whole) for i in items]
    return overall


def _breakdown_over(rank_summaries):
    breakdowns = [r.breakdown() for r in rank_summaries]
    keys = [k for k in (*columns.STEP_COMPONENTS, "step_time") if any(k in b for b in breakdowns)]
    times = [b["step_time"] for b in breakdowns if "step_time" in b]
    return {"breakdown_us": {k: statistics.fmean(b[k] for b in breakdowns if k in b)
                             for k in keys},
            "step_time_us": statistics.fmean(times) if times else None,
            "max_step_time_us": max(times) if times else None}


def summary_json(summary):
    return jsontext.dumps(summary_dict(summary))


def summary_csv(summary):
    """Long format: section, rank, step, name, type, metric, value (``all`` = every rank)."""
    data = summary_dict(summary)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["section", "rank", "step", "name", "type", "metric", "value"])
    for rank in data["ranks"]:
        for step in rank["steps"]:
            for key, value in step.items():
                if key not in ("step", "device") and value is not None:
                    writer.writerow(["step", rank["rank"], step["step"], "", "", key, value])
        for key, value in rank["breakdown_us"].items():
            writer.writerow(["breakdown", rank["rank"], "", "", "", key, value])
        for section in ("top_kernels", "op_types", "top_ops"):
            _items(writer, section, rank["rank"], rank[section])
        for row in rank["requests"]:
            for key in ("latency_us", "forwards", "prefill", "decode"):
                if row[key] is not None:
                    writer.writerow(["request", rank["rank"], row["request"], "", "", key,
                                     row[key]])
        writer.writerows(engine_steps.csv_rows(rank))
    for key, value in data["overall"]["breakdown_us"].items():
        writer.writerow(["breakdown", "all", "", "", "", key, value])
    for backend, overall in sorted(data["overall"].get("by_backend", {}).items()):
        for key, value in overall["breakdown_us"].items():  # several backends: each its own
            writer.writerow(["breakdown", f"all {backend}", "", "", "", key, value])
    for section in ("top_kernels", "op_types", "top_ops"):
        _items(writer, section, "all", data["overall"][section])
    for slow in data["slow_ranks"]:
        for key in ("step_time_us", "deviation_us", "deviation_pct", "explained_by",
                    "made_wait_us", "arrived_last", "own_wait_us", "reason"):
            if key in slow:
                writer.writerow(["slow_ranks", slow["rank"], "", "", "", key, slow[key]])
    return safe.lines(out.getvalue())


def _items(writer, section, rank, items):
    for item in items:
        for key in ("total_us", "count", "mean_us", "share_pct"):
            writer.writerow([section, rank, "", item["name"], item["type"] or "", key, item[key]])


def summary_table(summary, steps=False, every=False):
    """The terminal table (``render/summary_table.py``); ``steps``: every step too; ``every``
    (``--all``): a row per rank however many there are."""
    return render_table(summary_dict(summary), steps, every)
