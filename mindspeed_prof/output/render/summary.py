"""``summary``'s results as a terminal table, JSON (``--json``) or long-format CSV (``--csv``)."""

import csv
import io
import json
import statistics

from ..read import columns
from ..summary import engine_steps
from ..summary.compare import merge, slow_ranks, top_items

SHORT = {
    "Communication(Not Overlapped)": "Comm(NotOvl)",
    "Communication(Not Overlapped and Exclude Receive)": "Comm(NotOvl,ExRecv)",
    "Communication": "Comm",
    "step_time": "Step time",
}


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
            "steps": r.steps,
            "top_kernels": [k.as_dict(kernel_total) for k in kernels],
            "kernel_total_us": kernel_total,
            "op_types": [t.as_dict(type_total) for t in types],
            "op_types_source": r.op_types_source,
            "top_ops": [o.as_dict(op_total) for o in ops], "requests": r.requests,
            "engine_windows": r.engine_windows, "notes": r.notes,
        })
    data = {"directory": summary.directory, "top": summary.top, "ranks": ranks,
            "overall": _overall(summary), "slow_ranks": slow_ranks(summary.ranks),
            "notes": summary.notes}
    if summary.run is not None:
        data["run"] = summary.run
    return data


def _overall(summary):
    breakdowns = [r.breakdown() for r in summary.ranks]
    keys = [k for k in (*columns.STEP_COMPONENTS, "step_time") if any(k in b for b in breakdowns)]
    overall = {"ranks": len(summary.ranks),
               "breakdown_us": {k: statistics.fmean(b[k] for b in breakdowns if k in b)
                                for k in keys}}
    times = [b["step_time"] for b in breakdowns if "step_time" in b]
    overall["step_time_us"] = statistics.fmean(times) if times else None
    overall["max_step_time_us"] = max(times) if times else None
    for key, attribute in (("top_kernels", "kernels"), ("op_types", "op_types"),
                           ("top_ops", "ops")):
        items, whole = top_items(merge(summary.ranks, attribute), summary.top)
        overall[key] = [i.as_dict(whole) for i in items]
    return overall


def summary_json(summary):
    return json.dumps(summary_dict(summary), indent=2)


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
    for section in ("top_kernels", "op_types", "top_ops"):
        _items(writer, section, "all", data["overall"][section])
    for slow in data["slow_ranks"]:
        for key in ("step_time_us", "deviation_us", "deviation_pct", "explained_by"):
            writer.writerow(["slow_ranks", slow["rank"], "", "", "", key, slow[key]])
    return out.getvalue()


def _items(writer, section, rank, items):
    for item in items:
        for key in ("total_us", "count", "mean_us", "share_pct"):
            writer.writerow([section, rank, "", item["name"], item["type"] or "", key, item[key]])


def summary_table(summary):
    data = summary_dict(summary)
    lines = [f"mindspeed-prof summary {data['directory']}"]
    if data["ranks"]:
        lines += ["", "Step time and breakdown (us, mean over profiled steps)"]
        keys = ["step_time", *[k for k in columns.STEP_COMPONENTS
                               if k in data["overall"]["breakdown_us"]]]
        rows = [["RANK", "BACKEND", "STEPS", *[SHORT.get(k, k) for k in keys]]]
        for rank in data["ranks"]:
            rows.append([str(rank["rank"]), rank["backend"] or "-", str(len(rank["steps"])),
                         *[_num(rank["breakdown_us"].get(k)) for k in keys]])
        rows.append(["all", "", "", *[_num(data["overall"]["breakdown_us"].get(k))
                                      for k in keys]])
        lines += _table(rows)
    lines += _requests_table(data["ranks"])
    lines += engine_steps.table_lines(data["ranks"])
    if len(data["slow_ranks"]) > 1:
        lines += ["", "Slow ranks (deviation from the median step time)"]
        rows = [["RANK", "STEP TIME", "DEVIATION", "EXPLAINED BY"]]
        for slow in data["slow_ranks"]:
            rows.append([str(slow["rank"]), _num(slow["step_time_us"]),
                         f"{slow['deviation_us']:+.1f} ({slow['deviation_pct']:+.1f}%)",
                         _cause(slow)])
        lines += _table(rows)
    for title, key in ((f"Top {data['top']} kernels (all ranks)", "top_kernels"),
                       (f"Top {data['top']} op types (all ranks)", "op_types"),
                       (f"Top {data['top']} torch operators by self time (all ranks)",
                        "top_ops")):
        items = data["overall"][key]
        if not items:
            continue
        lines += ["", title]
        rows = [["NAME", "TYPE", "TOTAL(us)", "COUNT", "MEAN(us)", "SHARE"]]
        for item in items:
            rows.append([item["name"][:60], (item["type"] or "")[:24], _num(item["total_us"]),
                         str(item["count"]), _num(item["mean_us"]), f"{item['share_pct']:.1f}%"])
        lines += _table(rows)
    notes = [f"rank {r['rank']}: {n}" for r in data["ranks"] for n in r["notes"]]
    notes += data["notes"]
    if notes:
        lines += [""] + ["note: " + n for n in notes]
    return "\n".join(lines)


def _requests_table(ranks):
    """Inference: one line per request of every rank (latency, forwards, top operators)."""
    rows = [["RANK", "REQUEST", "LATENCY(ms)", "FORWARDS", "PREFILL", "DECODE", "TOP OPERATORS"]]
    for rank in ranks:
        for row in rank["requests"]:
            latency = row["latency_us"]
            rows.append([str(rank["rank"]), str(row["request"]),
                         "-" if latency is None else f"{latency / 1000:.2f}",
                         *("-" if row[k] is None else str(row[k])
                           for k in ("forwards", "prefill", "decode")),
                         ", ".join(row["top_ops"]) + (" (whole capture)"
                                                      if row["top_ops_of"] == "capture" else "")])
    if len(rows) == 1:
        return []
    return ["", "Requests (inference: latency, forwards and top operators per request)",
            *_table(rows)]


def _cause(slow):
    cause = slow["explained_by"]
    if not cause:
        return "-"
    return f"{SHORT.get(cause, cause)} {slow['component_deltas_us'][cause]:+.1f} us vs median"


def _num(value):
    return "-" if value is None else f"{value:.1f}"


def _table(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(widths[i]) if i and c[:1].isdigit() or c[:1] in "-+" and i
                      else c.ljust(widths[i]) for i, c in enumerate(row)).rstrip()
            for row in rows]
