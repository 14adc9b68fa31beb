"""What the report shows, as one JSON-able dict: ``check``'s verdicts, ``summary --json``'s
numbers as they are (the same functions compute them: one computation, two renderings), and
what the report derives from them (the rank x step matrices, the per-step breakdown, each slow
rank's reason), with communication per group read beside them.

RL output (a save path per role, DESIGN §6) is one part per role folder, each the report of
that folder alone, after the cross-role table ``summary`` prints.
"""

import os
import re
import statistics
from typing import Any, Dict, List, Optional

from ...errors import ConfigError
from ..read import columns, jobruns
from ..read.discover import discover
from . import communication, heatmap, pipeline, reasons, whatif

UNIT_NAME = re.compile(r"[A-Za-z]+( [A-Za-z]+)?")
LAYOUT_ROLES = "roles"
LAYOUT_ONE = "one"


def build(directory: str, top: int = 10, run: Optional[str] = None) -> Dict[str, Any]:
    """The report's data for ``directory`` (``run``: ``--run``, as check and summary take it)."""
    from ..read.roles import role_roots
    from ..summary.directory import check_arguments

    check_arguments(directory, top)
    roots = role_roots(directory)
    if roots and not (len(roots) == 1 and roots[0].rel == "."):
        if run is not None:
            raise ConfigError(f"--run {run}: {directory} holds RL role output (a save path per "
                              f"role); each role's folder has its own runs: give one role's "
                              f"folder.")
        return _roles(directory, roots, top)
    return {"directory": os.path.abspath(directory), "layout": LAYOUT_ONE,
            "parts": [part(directory, top, run)]}


def _roles(directory, roots, top):
    from ..roles.check import check_roles
    from ..roles.summary import summarize_roles

    return {"directory": os.path.abspath(directory), "layout": LAYOUT_ROLES,
            "check": check_roles(directory, roots).as_dict(),
            "roles": summarize_roles(directory, roots).as_dict(),
            "parts": [part(root.path, top, None, title=root.rel, role=root.role,
                           stage=root.stage) for root in roots]}


def summary_data(path: str, top: int, run: Optional[str]) -> Dict[str, Any]:
    """Exactly what ``summary PATH --json`` prints (commands/summary.py assembles it alike)."""
    from ..memory import render as render_memory
    from ..render.summary import summary_dict
    from ..summary.captures import compare_captures
    from ..summary.directory import summarize_directory
    from ..memory.summary import summarize_memory

    data = summary_dict(summarize_directory(path, top=top, run=run))
    memory = summarize_memory(path, top=top)
    if memory:
        data["memory"] = render_memory.memory_dicts(memory)
    captures = compare_captures(path, top=top)
    if captures:
        data["captures"] = captures
    return data


def part(path: str, top: int, run: Optional[str], title: Optional[str] = None,
         role: Optional[str] = None, stage: Optional[str] = None) -> Dict[str, Any]:
    """The report of one save path (a training or inference run, or one role's folder)."""
    from ..check.directory import check_directory

    # check first: it reads every big file once, and summary takes their numbers from the cache
    report = check_directory(path, None, run=run)
    summary = summary_data(path, top, run)
    pipelined = pipeline.pipeline_data(path)  # None unless pipelined and marked
    if pipelined is not None:  # summary --json's per-stage bubble, from the same reading
        from ..pipeline.in_summary import folded
        summary["pipeline"] = folded(pipelined["report"])
    found = discover(path)
    chosen = jobruns.choose(found.manifests, run)
    runs = jobruns.keep_runs(found.runs, chosen) if chosen.left_out else found.runs
    layout = _layout(chosen.chosen)
    return {"title": title, "role": role, "stage": stage, "path": os.path.abspath(path),
            "unit": _unit(chosen.chosen), "check": report.as_dict(),
            "exit_code": report.exit_code, "summary": summary,
            "heatmap": heatmap.matrices(summary["ranks"], layout.as_dict()),
            "per_step": per_step(summary["ranks"], summary.get("waits")),
            "slow_ranks": reasons.slow_ranks(summary["slow_ranks"]),
            "communication": communication.communication(
                [r for r in runs if r.rank is not None], layout),
            "whatif": whatif.whatif_data(path, chosen.chosen),
            "pipeline": pipelined}


def _layout(manifests):
    """The parallel layout the manifests record (groups are named by it)."""
    from ..waits import Layout

    return Layout.from_manifests({rank: m.data.get("parallel") for rank, m in manifests.items()
                                  if isinstance(getattr(m, "data", None), dict)})


def _unit(manifests) -> str:
    """The unit the manifests name ("iteration", "request", "engine step", "RL step"); a name
    that is not a few plain words is not one of ours and is never put in the page's figures."""
    units = sorted({str(m.data.get("unit")) for m in manifests.values()
                    if isinstance(getattr(m, "data", None), dict) and m.data.get("unit")})
    units = [u for u in units if UNIT_NAME.fullmatch(u)]
    return "/".join(units) if units else "iteration"


def per_step(ranks: List[Dict[str, Any]], waits: Optional[Dict[str, Any]] = None) \
        -> List[Dict[str, Any]]:
    """Per step number: each component's mean over the ranks (and devices) that recorded it,
    the longest step time and the slowest rank: the one the others waited for most in that
    step where the wait analysis covers it (in a synchronous job step times are equal), else
    the one with the longest step. Rows of different backends are not averaged together: one
    row per (step, backend). A step 10 % or more over the median step is slow, with the part
    that grew most."""
    waited = {row["step"]: row for row in (waits or {}).get("per_step", []) if row["rank"]
              is not None}
    keys = (*columns.STEP_COMPONENTS, "step_time")
    grouped: Dict[tuple, list] = {}
    for rank in ranks:
        for step in rank["steps"]:
            if step.get("step") is not None:
                grouped.setdefault((step["step"], rank["backend"]), []).append((rank, step))
    rows = []
    for (number, backend), found in sorted(grouped.items(), key=lambda kv: (kv[0][0],
                                                                            str(kv[0][1]))):
        means = {k: statistics.fmean(s[k] for _, s in found if s.get(k) is not None)
                 for k in keys if any(s.get(k) is not None for _, s in found)}
        timed = [(s["step_time"], r["rank"]) for r, s in found if s.get("step_time") is not None]
        slowest = max(timed, key=lambda t: (t[0], -t[1])) if timed else (None, None)
        by_waits = backend == (waits or {}).get("backend") and number in waited
        rows.append({"step": number, "backend": backend, "ranks": len({r["rank"]
                                                                        for r, _ in found}),
                     "mean_us": means, "max_step_time_us": slowest[0],
                     "slowest_rank": waited[number]["rank"] if by_waits else slowest[1],
                     "slowest_by": "waits" if by_waits else "step time"})
    _slow_steps(rows)
    return rows


SLOW_STEP = 1.10  # a step this far over its backend's median step is called out


def _slow_steps(rows: List[Dict[str, Any]]) -> None:
    """Mark each slow step with what grew against the median step (of its backend)."""
    for backend in {r["backend"] for r in rows}:
        mine = [r for r in rows if r["backend"] == backend and "step_time" in r["mean_us"]]
        if len(mine) < 3:
            continue
        median = statistics.median(r["mean_us"]["step_time"] for r in mine)
        parts = {k: statistics.median(r["mean_us"][k] for r in mine if k in r["mean_us"])
                 for k in columns.STEP_PARTS if all(k in r["mean_us"] for r in mine)}
        for row in mine:
            if median > 0 and row["mean_us"]["step_time"] >= SLOW_STEP * median:
                grew = {k: row["mean_us"][k] - v for k, v in parts.items()}
                top = max(grew, key=lambda k: grew[k]) if grew else None
                row["slow_step"] = {"over_median_pct": 100.0 * (row["mean_us"]["step_time"]
                                                                / median - 1.0),
                                    "grew": top, "grew_us": grew.get(top) if top else None}
