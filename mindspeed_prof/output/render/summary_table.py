"""``summary``'s terminal table: every number with its unit in its column's header, what each
breakdown was computed from, what each SHARE is a share of, and (``--steps``) every step."""

from ..read import columns
from ..summary import engine_steps
from ..summary.compare import SLOW_RANK_PCT
from ..waits.analyse import SLOW_WAIT_PCT as WAIT_PCT
from . import many, safe

SHORT = {
    "Communication(Not Overlapped)": "Comm(NotOvl)",
    "Communication(Not Overlapped and Exclude Receive)": "Comm(NotOvl,ExRecv)",
    "Communication": "Comm",
    "step_time": "Step time",
}
TOPS = (("top_kernels", "kernels", "of every kernel's time"),
        ("op_types", "op types", "of every op type's time"),
        ("top_ops", "torch operators by self time", "of every operator's self time"))


def summary_table(data, steps=False, every=False):
    """``data``: ``summary_dict``'s; ``steps``: add the per-step table (``--steps``);
    ``every`` (``--all``): a row per rank. Past ``many.ROWS_SHOWN`` ranks without it, the notes
    (ranks skipped, files unread) come first and the per-rank table shows the slowest ranks,
    then the mean of every rank."""
    lines = [f"mindspeed-prof summary {data['directory']}"]
    grouped = many.condensed(len(data["ranks"]), every)
    notes = [f"rank {r['rank']}: {n}" for r in data["ranks"] for n in r["notes"]]
    notes += data["notes"]
    if grouped and notes:  # problems first
        lines += [""] + ["note: " + n for n in notes[:many.ROWS_SHOWN]]
        if len(notes) > many.ROWS_SHOWN:
            lines.append(f"note: ... and {len(notes) - many.ROWS_SHOWN} more ({many.ALL_HINT})")
        notes = []
    if data["ranks"]:
        keys = ["step_time", *[k for k in columns.STEP_COMPONENTS
                               if any(k in r["breakdown_us"] for r in data["ranks"])]]
        lines += ["", "Step time and breakdown per rank (mean over its profiled steps; Step "
                      "time = Computing + Comm(NotOvl) + Free)"]
        shown = data["ranks"]
        if grouped:
            shown = _slowest(data["ranks"])
            lines.append(f"the {len(shown)} slowest of {len(data['ranks'])} rows (ranks "
                         f"{many.rank_ranges(r['rank'] for r in data['ranks'])}), then their "
                         f"mean ({many.ALL_HINT})")
        rows = [["RANK", "BACKEND", "STEPS", *[f"{SHORT.get(k, k)}(us)" for k in keys]]]
        for rank in shown:
            # no step ids (an NPU capture without host activity): unknown, never "1"
            rows.append([str(rank["rank"]), rank["backend"] or "-",
                         str(len(rank["steps"])) if rank["steps"] else "-",
                         *[_num(rank["breakdown_us"].get(k)) for k in keys]])
        by_backend = data["overall"].get("by_backend")
        for backend, overall in (sorted(by_backend.items()) if by_backend
                                 else [("", data["overall"])]):
            rows.append(["all", backend, "", *[_num(overall["breakdown_us"].get(k))
                                               for k in keys]])
        lines += _table(rows)
        lines += _bases(data["ranks"])
        if steps:
            lines += _steps_table(data["ranks"], keys)
    lines += _requests_table(data["ranks"])
    lines += engine_steps.table_lines(data["ranks"])
    if len(data["slow_ranks"]) > 1:
        lines += _slow_ranks_lines(data["slow_ranks"])
    for key, what, whole in TOPS:
        items = data["overall"][key]
        if not items:
            continue
        lines += ["", f"Top {data['top']} {what} (all ranks; SHARE = % {whole}, all ranks, "
                      f"listed or not)"]
        rows = [["NAME", "TYPE", "TOTAL(us)", "COUNT", "MEAN(us)", "SHARE(%)"]]
        for item in items:
            rows.append([item["name"][:60], (item["type"] or "")[:24], _num(item["total_us"]),
                         str(item["count"]), _num(item["mean_us"]), f"{item['share_pct']:.1f}%"])
        lines += _table(rows)
    if notes:
        lines += [""] + ["note: " + n for n in notes]
    return safe.lines("\n".join(lines))


def _slowest(ranks, count=5):
    """The ``count`` rows of the longest step time, a row without one first (it is a problem),
    in rank order."""
    order = sorted(ranks, key=lambda r: (r["step_time_us"] is not None,
                                         -(r["step_time_us"] or 0.0), r["rank"]))
    return sorted(order[:count], key=lambda r: (r["rank"], r["backend"] or ""))


def _slow_ranks_lines(entries):
    """Only ranks at least SLOW_RANK_PCT above the median are listed; else one line says so.
    Where the wait analysis judged the ranks: the ranks others wait for (``_waited_for``)."""
    if any(e.get("judged_by") == "waits" for e in entries):
        return _waited_for([e for e in entries if e.get("judged_by") == "waits"]) + (
            _slow_ranks_lines([e for e in entries if e.get("judged_by") != "waits"])
            if sum(1 for e in entries if e.get("judged_by") != "waits") > 1 else [])
    mixed = any("backend" in s for s in entries)
    flagged = [s for s in entries if s.get("slow", True)]
    if not flagged:
        largest = max(entries, key=lambda s: s["deviation_pct"])
        return ["", f"Slow ranks: none (every rank's step time is within {SLOW_RANK_PCT:g}% of "
                    f"the median{' of its backend' if mixed else ''}; the largest deviation is "
                    f"rank {largest['rank']}, {largest['deviation_pct']:+.1f}%)"]
    lines = ["", f"Slow ranks (step time at least {SLOW_RANK_PCT:g}% above the median"
             + (" of the same backend)" if mixed else ")")]
    rows = [["RANK", *(["BACKEND"] if mixed else []), "STEP TIME(us)", "DEVIATION(us)",
             "EXPLAINED BY"]]
    for slow in flagged:
        rows.append([str(slow["rank"]), *([slow["backend"]] if mixed else []),
                     _num(slow["step_time_us"]),
                     f"{slow['deviation_us']:+.1f} ({slow['deviation_pct']:+.1f}%)",
                     _cause(slow)])
    return lines + _table(rows)


WAITED_SHOWN = 16  # slow ranks listed on the terminal; --json has every one


def _waited_for(entries):
    """The ranks whose lateness the others wait out in collectives, with the reason."""
    flagged = [e for e in entries if e["slow"]]
    if not flagged:
        most = max(entries, key=lambda e: (e["made_wait_us"] or 0.0, -e["rank"]))
        return ["", f"Slow ranks: none (no rank made the other members of its collectives wait "
                    f"{WAIT_PCT:g}% of the median step time or more per step; the most: rank "
                    f"{most['rank']}, {(most['delay_per_step_us'] or 0.0) / 1000:.3f} ms per "
                    f"step)"]
    lines = ["", f"Slow ranks: the ranks others wait for in collectives (each member waited "
                 f"{WAIT_PCT:g}% of the median step time or more per step for it)"]
    rows = [["RANK", "PLACE", "GROUP", "ARRIVED LAST", "OTHERS WAITED(ms)", "SHARE",
             "REASON", "STEP TIME VS MEDIAN"]]
    shown = flagged[:WAITED_SHOWN]
    for e in shown:
        rows.append([str(e["rank"]), e["place"] or "-", f"{e['group']} {e['kind']}",
                     str(e["arrived_last"]), f"{e['made_wait_us'] / 1000:.3f}",
                     f"{e['group_share_pct']:.0f}%", e["reason"] or "not in the breakdown",
                     f"{e['deviation_pct']:+.1f}%"])
    more = len(flagged) - len(shown)
    return lines + _table(rows) + [e["line"] for e in shown] + (
        [f"... and {more} more slow rank(s) (summary --json lists every one)"] if more else [])


def _bases(ranks):
    """Where each backend's breakdown comes from, once per basis."""
    seen = {}
    for rank in ranks:
        if rank.get("breakdown_basis"):
            seen.setdefault((rank["backend"], rank["breakdown_basis"]), []).append(rank["rank"])
    if not seen:
        return []
    return ["breakdown from: " + "; ".join(
        f"{backend} rank(s) {_ranks(found)}: {basis}" if len(seen) > 1 else f"{basis}"
        for (backend, basis), found in seen.items())]


def _steps_table(ranks, keys):
    """``--steps``: one line per profiled step of every rank."""
    devices = any(step.get("device") is not None for rank in ranks for step in rank["steps"])
    rows = [["RANK", "BACKEND", "STEP", *(["DEVICE"] if devices else []),
             *[f"{SHORT.get(k, k)}(us)" for k in keys]]]
    for rank in ranks:
        for step in rank["steps"]:
            rows.append([str(rank["rank"]), rank["backend"] or "-",
                         "-" if step["step"] is None else str(step["step"]),
                         *([_num(step.get("device"), "d")] if devices else []),
                         *[_num(step.get(k)) for k in keys]])
    if len(rows) == 1:
        return []
    return ["", "Per step (every profiled step of every rank)", *_table(rows)]


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


def _ranks(numbers):
    if len(numbers) > many.ROWS_SHOWN:
        return many.rank_ranges(numbers)
    return ",".join(str(n) for n in numbers)


def _num(value, form=".1f"):
    return "-" if value is None else format(value, form)


def _table(rows):
    rows = [[safe.cell(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(widths[i]) if i and c[:1].isdigit() or c[:1] in "-+" and i
                      else c.ljust(widths[i]) for i, c in enumerate(row)).rstrip()
            for row in rows]
