"""``diff_paths(a, b)``: two profiles side by side, B against A (the change is B - A).

Each side is a save path, a window folder, or one rank of one (``DIR:rank3``), read by
``summarize_directory`` exactly as ``summary`` reads it: the same per-step breakdown
(Computing / Communication(Not Overlapped) / Overlapped / Free), the same operator self times
(torch) or kernel totals (NPU). Steps are matched by number; when the two sides share none (two
windows of one run) they are paired in order, and the result says so. Operators are compared
per profiled step of one rank (a side's total over its step rows), so a side with more ranks or
steps does not look slower for it. Unlike things are said, not hidden: another unit (iterations
against requests) or another backend cannot be compared step by step (``comparable`` is False);
operator sets that share little time (another model, another size) are compared with a warning.
"""

import os
import re
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...errors import ConfigError
from ...layout import parse_window_dir
from ..read import columns
from ..read.discover import discover
from ..read.roles import role_roots
from ..summary import compare
from ..summary.directory import summarize_directory

_RANK_SPEC = re.compile(r"^(?P<path>.+):rank(?P<rank>\d+)$")
ALIKE_SHARE = 0.5  # below: the operator sets differ (say so)
PARTS = (*columns.STEP_COMPONENTS, "step_time")


@dataclass
class Side:
    label: str  # "A" / "B"
    spec: str
    path: str
    rank: Optional[int]
    summary: object = None
    unit: Optional[str] = None
    role: Optional[str] = None
    notes: List[str] = field(default_factory=list)

    @property
    def ranks(self):
        return [r for r in self.summary.ranks if r.steps or r.ops or r.kernels]

    @property
    def backends(self):
        return compare.backends(self.ranks)

    def step_rows(self):
        return [s for r in self.ranks for s in r.steps if s.get("step") is not None]

    def as_dict(self):
        steps = sorted({s["step"] for s in self.step_rows()})
        return {"spec": self.spec, "path": self.path, "rank": self.rank, "unit": self.unit,
                "role": self.role, "backend": (self.backends or [None])[0],
                "ranks": [r.rank for r in self.ranks], "steps": steps,
                "run": self.summary.run,
                "breakdown_basis": next((r.basis for r in self.ranks if r.basis), None),
                "notes": self.notes + list(self.summary.notes)}


def parse_side(text: str, label: str) -> Side:
    """``DIR``, ``DIR/iter_5-7`` or ``DIR:rankR``; ``ConfigError`` naming A or B otherwise."""
    path, rank = text, None
    match = _RANK_SPEC.match(text)
    if not os.path.exists(text) and match:
        path, rank = match.group("path"), int(match.group("rank"))
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise ConfigError(f"{label} {text}: {path} {what}; give a --profile-save-path, one of "
                          f"its window folders (iter_5-7), or DIR:rankR for one rank of a run.")
    roots = role_roots(path)
    if roots and not (len(roots) == 1 and roots[0].rel == "."):
        names = sorted({r.rel for r in roots})
        raise ConfigError(f"{label} {text} holds RL role output ({', '.join(names)}); compare "
                          f"one role: give its folder, e.g. {os.path.join(path, names[0])}.")
    return Side(label, text, os.path.abspath(path), rank,
                role=roots[0].role if roots else None)


def read_side(side: Side, top: int) -> Side:
    side.summary = summarize_directory(side.path, top=top,
                                       only={side.rank} if side.rank is not None else None)
    if side.rank is not None and not side.summary.ranks:
        raise ConfigError(f"{side.label} {side.spec}: no capture of rank {side.rank} under "
                          f"{side.path}; run `mindspeed-prof summary {side.path}` to see its "
                          f"ranks.")
    side.unit = _unit(side)
    return side


def _unit(side):
    for rank in side.summary.ranks:
        for rel in rank.sources:
            for part in reversed(rel.split(os.sep)[:-1]):
                parsed = parse_window_dir(part)
                if parsed is not None:
                    return parsed[0].name
    found = discover(side.path)
    for manifest in found.manifests:
        unit = manifest.data.get("unit") if isinstance(manifest.data, dict) else None
        if isinstance(unit, str):
            return unit
    parsed = parse_window_dir(os.path.basename(side.path.rstrip(os.sep)))
    return parsed[0].name if parsed else None


def diff_paths(a: str, b: str, top: int = 10) -> dict:
    """What ``mindspeed-prof diff A B --json`` prints (every time in µs; change = B - A)."""
    if top < 1:
        raise ConfigError(f"--top {top} must be >= 1.")
    first, second = parse_side(a, "A"), parse_side(b, "B")
    read_side(first, top)
    read_side(second, top)
    return diff_sides(first, second, top)


def diff_sides(a: Side, b: Side, top: int = 10) -> dict:
    result: dict = {"a": a.as_dict(), "b": b.as_dict(), "comparable": True, "unlike": [],
                    "notes": [], "matched_by": None, "steps": [], "overall": None,
                    "items": None, "items_basis": None, "grew": [], "shrank": [], "new": [],
                    "vanished": [], "ranks": [], "slow_ranks": _slow_ranks(a, b)}
    unlike = result["unlike"]
    for side in (a, b):
        if not side.ranks:
            unlike.append(f"{side.label} ({side.spec}) has no step times and no operators: "
                          f"nothing to compare (run `mindspeed-prof check {side.path}`)")
    if a.unit and b.unit and a.unit != b.unit:
        unlike.append(f"another unit: A counts {a.unit}s, B counts {b.unit}s; their steps are "
                      f"not the same thing")
    if a.ranks and b.ranks and a.backends != b.backends:
        unlike.append(f"another backend: A is {'+'.join(a.backends)}, B is "
                      f"{'+'.join(b.backends)} (CPU operators or CUDA kernels against NPU "
                      f"kernels)")
    if len(a.backends) > 1 or len(b.backends) > 1:
        unlike.append("a side holds captures of both backends; compare one backend's folder")
    if unlike:
        result["comparable"] = False
        return result
    if a.role != b.role:
        result["notes"].append(f"A is role {a.role}, B is role {b.role}")
    result["steps"], result["matched_by"], note = _steps(a, b)
    if note:
        result["notes"].append(note)
    result["overall"] = _overall(a, b)
    _items(result, a, b, top)
    result["ranks"] = _ranks(a, b, result["notes"])
    return result


def _per_step(side) -> Dict[int, dict]:
    """{N: mean over the side's rows of step N of each component}, as summary's rows hold
    them (one row per rank, or per device of a rank)."""
    rows: Dict[int, list] = {}
    for row in side.step_rows():
        rows.setdefault(row["step"], []).append(row)
    return {n: {"rows": len(found), **{k: statistics.fmean(r[k] for r in found
                                                            if r.get(k) is not None)
                                       for k in PARTS if any(r.get(k) is not None
                                                             for r in found)}}
            for n, found in rows.items()}


def _change(a: dict, b: dict) -> dict:
    return {k: b[k] - a[k] for k in PARTS if k in a and k in b}


def _steps(a, b) -> Tuple[list, Optional[str], Optional[str]]:
    steps_a, steps_b = _per_step(a), _per_step(b)
    common = sorted(set(steps_a) & set(steps_b))
    note = None
    if common:
        pairs, how = [(n, n) for n in common], "number"
        alone = sorted(set(steps_a) ^ set(steps_b))
        if alone:
            note = (f"steps in one side only, left out of the per-step table: "
                    f"{', '.join(map(str, alone[:10]))}{' ...' if len(alone) > 10 else ''}")
    elif steps_a and steps_b:
        pairs = list(zip(sorted(steps_a), sorted(steps_b)))
        how = "position"
        note = (f"no step number in common (A: {_span(sorted(steps_a))}, B: "
                f"{_span(sorted(steps_b))}): steps paired in order, first with first")
    else:
        return [], None, "a side has no step times: no per-step table"
    table = []
    for n_a, n_b in pairs:
        one, two = steps_a[n_a], steps_b[n_b]
        table.append({"a_step": n_a, "b_step": n_b, "a_rows": one["rows"],
                      "b_rows": two["rows"],
                      "a": {k: one[k] for k in PARTS if k in one},
                      "b": {k: two[k] for k in PARTS if k in two},
                      "change": _change(one, two)})
    return table, how, note


def _overall(a, b):
    """Each side's breakdown as summary's "all" row computes it (mean over ranks of each
    rank's mean over its steps), and the change."""
    from ..render.summary import summary_dict

    one = summary_dict(a.summary)["overall"]["breakdown_us"]
    two = summary_dict(b.summary)["overall"]["breakdown_us"]
    return {"a": one, "b": two, "change": _change(one, two)}


def _items(result, a, b, top):
    backend = a.backends[0] if a.backends else None
    attribute = "kernels" if backend == "npu" else "ops"
    result["items"] = "kernels (total time)" if attribute == "kernels" else \
        "operators (self time)"
    one, two = (_normalised(side, attribute) for side in (a, b))
    result["items_basis"] = ("µs per profiled step of one rank: each side's total over its "
                             f"step rows (A: {one[1]}, B: {two[1]})")
    one, two = one[0], two[0]
    both = set(one) & set(two)
    changes = []
    for key in both:
        (name, kind, a_us), (_, _, b_us) = one[key], two[key]
        changes.append({"name": name, "type": kind, "a_us": a_us, "b_us": b_us,
                        "change_us": b_us - a_us,
                        "change_pct": 100.0 * (b_us - a_us) / a_us if a_us else None})
    result["grew"] = sorted((c for c in changes if c["change_us"] > 0),
                            key=lambda c: (-c["change_us"], c["name"]))[:top]
    result["shrank"] = sorted((c for c in changes if c["change_us"] < 0),
                              key=lambda c: (c["change_us"], c["name"]))[:top]
    result["new"] = _alone(two, set(two) - both, top, "b_us")
    result["vanished"] = _alone(one, set(one) - both, top, "a_us")
    total_a = sum(v[2] for v in one.values())
    total_b = sum(v[2] for v in two.values())
    if total_a and total_b:
        shared_a = sum(one[k][2] for k in both) / total_a
        shared_b = sum(two[k][2] for k in both) / total_b
        result["shared_time"] = {"a_pct": 100.0 * shared_a, "b_pct": 100.0 * shared_b}
        if min(shared_a, shared_b) < ALIKE_SHARE:
            result["unlike"].append(
                f"unlike {result['items'].split(' ')[0]}: only {100 * shared_a:.0f}% of A's "
                f"time and {100 * shared_b:.0f}% of B's is in {result['items'].split(' ')[0]} "
                f"both have (another model, size or configuration?); the changes below "
                f"compare what they share")


def _normalised(side, attribute):
    merged = compare.merge(side.ranks, attribute)
    rows = len(side.step_rows()) or len(side.ranks) or 1
    items = {}
    for key, item in merged.items():
        items[key] = (item.name, item.kind, item.total_us / rows)
    return items, rows


def _alone(items, keys, top, field_name):
    chosen = sorted(keys, key=lambda k: (-items[k][2], items[k][0]))[:top]
    return [{"name": items[k][0], "type": items[k][1], field_name: items[k][2]} for k in chosen]


def _slow_ranks(a, b):
    """Each side's slow ranks as the wait analysis names them (``output/waits``: the ranks the
    others wait for, with their reason), and which became slow or stopped being so."""
    sides = {}
    for side in (a, b):
        waits = getattr(side.summary, "waits", None) if side.summary is not None else None
        sides[side.label.lower()] = None if not waits else [
            {k: row.get(k) for k in ("rank", "place", "group", "kind", "reason",
                                     "made_wait_us", "delay_per_step_us", "line")}
            for row in waits["slow_ranks"]]
    if sides["a"] is None or sides["b"] is None:
        return {**sides, "new": [], "gone": []}
    ranks_a = {r["rank"] for r in sides["a"]}
    ranks_b = {r["rank"] for r in sides["b"]}
    return {**sides, "new": sorted(ranks_b - ranks_a), "gone": sorted(ranks_a - ranks_b)}


def _ranks(a, b, notes):
    if a.rank is not None or b.rank is not None or len(a.ranks) == 1 == len(b.ranks):
        pairs = [(a.ranks[0], b.ranks[0])] if a.ranks and b.ranks else []
    else:
        by_b = {r.rank: r for r in b.ranks}
        pairs = [(r, by_b[r.rank]) for r in a.ranks if r.rank in by_b]
        alone = sorted({r.rank for r in a.ranks} ^ set(by_b))
        if alone:
            notes.append(f"rank(s) in one side only: {', '.join(map(str, alone))}")
    rows = []
    for one, two in pairs:
        x, y = one.breakdown(), two.breakdown()
        if "step_time" not in x or "step_time" not in y:
            continue
        change = _change(x, y)
        parts = {k: v for k, v in change.items() if k in columns.STEP_PARTS}
        cause = max(parts, key=parts.get) if parts and change["step_time"] > 0 else None
        rows.append({"a_rank": one.rank, "b_rank": two.rank,
                     "a_step_time_us": x["step_time"], "b_step_time_us": y["step_time"],
                     "change_us": change["step_time"],
                     "change_pct": 100.0 * change["step_time"] / x["step_time"]
                     if x["step_time"] else None,
                     "explained_by": cause if cause and parts[cause] > 0 else None,
                     "component_changes_us": change})
    return sorted(rows, key=lambda r: (-abs(r["change_us"]), r["a_rank"]))


def _span(numbers):
    if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}-{numbers[-1]}"
    return ",".join(str(n) for n in numbers[:10]) + (" ..." if len(numbers) > 10 else "")
