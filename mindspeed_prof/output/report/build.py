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
from . import communication, heatmap, reasons, whatif

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
    found = discover(path)
    chosen = jobruns.choose(found.manifests, run)
    runs = jobruns.keep_runs(found.runs, chosen) if chosen.left_out else found.runs
    return {"title": title, "role": role, "stage": stage, "path": os.path.abspath(path),
            "unit": _unit(chosen.chosen), "check": report.as_dict(),
            "exit_code": report.exit_code, "summary": summary,
            "heatmap": heatmap.matrices(summary["ranks"]),
            "per_step": per_step(summary["ranks"]),
            "slow_ranks": reasons.slow_ranks(summary["slow_ranks"]),
            "communication": communication.communication([r for r in runs
                                                          if r.rank is not None]),
            "whatif": whatif.whatif_data(path, chosen.chosen)}


def _unit(manifests) -> str:
    """The unit the manifests name ("iteration", "request", "engine step", "RL step"); a name
    that is not a few plain words is not one of ours and is never put in the page's figures."""
    units = sorted({str(m.data.get("unit")) for m in manifests.values()
                    if isinstance(getattr(m, "data", None), dict) and m.data.get("unit")})
    units = [u for u in units if UNIT_NAME.fullmatch(u)]
    return "/".join(units) if units else "iteration"


def per_step(ranks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per step number: each component's mean over the ranks (and devices) that recorded it,
    the slowest rank's step time and which rank that is. Rows of different backends are not
    averaged together: one row per (step, backend)."""
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
        rows.append({"step": number, "backend": backend, "ranks": len({r["rank"]
                                                                        for r, _ in found}),
                     "mean_us": means, "max_step_time_us": slowest[0],
                     "slowest_rank": slowest[1]})
    return rows
