"""Per-window, per-step numbers of a dynamic inference engine's profile, for ``summary``.

A rank's manifest of unit ``engine step`` lists each window (``estep_{first}-{last}/``, under
the start's prefix for an HTTP window) with who started it and, for every recorded step, what
it carried (``units``: kind, prefill/decode requests, tokens, the requests that finished) and
its latency measured around the step on the computing thread. The trace's own
``ProfilerStep#N`` spans the step *and* the idle time up to the next one (the profiler steps at
step boundaries), so the step's latency comes from the manifest; the trace gives each step's
span and the window's top operators.
"""

import statistics
from typing import Any, Dict, List, Optional

from ...config.units import ENGINE_STEP
from ..read.windows import manifest_window, manifest_windows
from . import aggregate

TOP_OPS = 5


def engine_windows(manifest: Any, captures: List[tuple], top: int = TOP_OPS) -> List[Dict]:
    """One entry per engine-step window of ``manifest`` (a ManifestFile); ``captures``: this
    rank's (run, partial) pairs as summary read them."""
    if manifest is None or not isinstance(manifest.data, dict) \
            or manifest.data.get("unit") != ENGINE_STEP.name:
        return []
    found = []
    for window in manifest_windows(manifest):
        mine = [(run, partial) for run, partial in captures
                if manifest_window(run, manifest) is window]
        found.append(_window(window, mine, top))
    return found


def _window(window: Dict, captures: List[tuple], top: int) -> Dict:
    spans = {s["step"]: s.get("step_time") for _, partial in captures for s in partial.steps
             if s.get("step") is not None}
    rows = []
    for unit in window.get("units") or []:
        if not isinstance(unit, dict) or not isinstance(unit.get("n"), int):
            continue
        prefill, decode = unit.get("prefill_requests"), unit.get("decode_requests")
        rows.append({
            "step": unit["n"], "kind": unit.get("kind"),
            "requests": None if prefill is None else prefill + (decode or 0),
            "prefill": prefill, "decode": decode, "tokens": unit.get("tokens"),
            "latency_ms": unit.get("latency_ms"),
            "span_ms": None if spans.get(unit["n"]) is None else spans[unit["n"]] / 1000.0,
            "finished_requests": list(unit.get("finished_requests") or []),
        })
    ops: Dict = {}
    for _, partial in captures:
        aggregate.merge_into(ops, partial.ops if partial.ops else partial.kernels)
    ranked = sorted(ops.values(), key=lambda i: (-i.total_us, i.name))[:top]
    latencies = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    tokens = [r["tokens"] for r in rows if r["tokens"] is not None]
    return {
        "dir": window.get("dir"), "status": window.get("status"),
        "started_by": window.get("started_by"), "steps": window.get("iterations_recorded"),
        "rows": rows,
        "mean_latency_ms": _mean(latencies), "mean_tokens": _mean(tokens),
        "tokens_per_s": (sum(tokens) / (sum(latencies) / 1000.0)
                         if tokens and latencies and sum(latencies) > 0 else None),
        "finished_requests": sorted({i for r in rows for i in r["finished_requests"]}),
        "top_ops": [{"name": i.name, "total_us": i.total_us, "count": i.count}
                    for i in ranked],
    }


def _mean(values: List[float]) -> Optional[float]:
    return statistics.fmean(values) if values else None


def table_lines(ranks: List[Dict]) -> List[str]:
    """The terminal lines: per window, one line per step, then the window's top operators."""
    lines: List[str] = []
    for rank in ranks:
        for window in rank.get("engine_windows") or []:
            origin = window.get("started_by") or {}
            by = origin.get("by", "?")
            lines += ["", f"Engine steps, rank {rank['rank']}, {window['dir']} (started by {by}; "
                          f"{len(window['rows'])} steps, mean latency "
                          f"{_ms(window['mean_latency_ms'])} ms, {_num(window['mean_tokens'])} "
                          f"tokens/step, finished requests "
                          f"{window['finished_requests'] or 'none'})"]
            rows = [["STEP", "KIND", "REQUESTS", "PREFILL", "DECODE", "TOKENS", "LATENCY(ms)",
                     "SPAN(ms)", "FINISHED"]]
            for row in window["rows"]:
                rows.append([str(row["step"]), row["kind"] or "-",
                             *("-" if row[k] is None else str(row[k])
                               for k in ("requests", "prefill", "decode", "tokens")),
                             _ms(row["latency_ms"]), _ms(row["span_ms"]),
                             ",".join(map(str, row["finished_requests"])) or "-"])
            lines += _table(rows)
            if window["top_ops"]:
                lines.append("  top operators: " + ", ".join(
                    f"{op['name']} {op['total_us'] / 1000:.2f} ms" for op in window["top_ops"]))
    return lines


def csv_rows(rank: Dict) -> List[List[Any]]:
    """``summary --csv`` rows of section ``engine_step``: one per step and metric."""
    out = []
    for window in rank.get("engine_windows") or []:
        for row in window["rows"]:
            for key in ("requests", "prefill", "decode", "tokens", "latency_ms", "span_ms"):
                if row[key] is not None:
                    out.append(["engine_step", rank["rank"], row["step"], window["dir"],
                                row["kind"] or "", key, row[key]])
    return out


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(rows: List[List[str]]) -> List[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip()
            for row in rows]
