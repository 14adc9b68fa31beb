"""``report --baseline DIR``: ``mindspeed-prof diff BASELINE DIR``'s result (the same function,
``compare.diff_paths``), rendered: per step the breakdown side by side and its change, the
overall change, the operators that grew and shrank most, new and vanished ones, and per-rank
step time changes. Change = this run - the baseline."""

from typing import Any, Dict, List

from ...errors import ConfigError
from .figures import SHORT
from .cells import MAX_LISTED, MAX_ROWS, e, table, us_cell

PARTS = ("step_time", "Computing", "Communication(Not Overlapped)", "Overlapped", "Free")


def diff_against(baseline: str, directory: str, top: int = 10) -> Dict[str, Any]:
    try:
        from ..compare import diff_paths
    except ImportError:
        raise ConfigError("--baseline needs `mindspeed-prof diff`, which this installation "
                          "lacks; leave --baseline out.") from None
    return diff_paths(baseline, directory, top=top)


def _signed(value) -> str:
    if value is None:
        return "<td class=n>-</td>"
    return f"<td class=n data-us='{value!r}'>{value / 1000.0:+.3f}</td>"


def _pct(value) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def render_diff(diff: Dict[str, Any]) -> str:
    out: List[str] = [f"<p class=meta>baseline (A): {e(diff['a'].get('path', diff['a']))} · "
                      f"this run (B): {e(diff['b'].get('path', diff['b']))}</p>"]
    for line in diff.get("unlike", []):
        out.append(f"<p class=bad>{e(line, 600)}</p>")
    if not diff.get("comparable", True):
        out.append("<p class=note>not compared: the two sides are unlike.</p>")
        return "".join(out)
    keys = [k for k in PARTS if any(k in s["a"] or k in s["b"] for s in diff["steps"])]
    rows = []
    for step in diff["steps"][:MAX_ROWS]:
        label = str(step["b_step"]) if step["a_step"] == step["b_step"] else \
            f"{step['a_step']} → {step['b_step']}"
        rows.append(f"<tr><td class=n>{e(label)}</td>"
                    + "".join(us_cell(step["a"].get(k)) + us_cell(step["b"].get(k))
                              + _signed(step["change"].get(k)) for k in keys) + "</tr>")
    if rows:
        header = ["STEP"] + [f"{SHORT[k]} {side}" for k in keys
                             for side in ("A (ms)", "B (ms)", "change")]
        out.append("<h3>Per step (mean over ranks)</h3>" + table(header, rows, "diff-steps"))
    overall = diff.get("overall")
    if overall:
        keys = [k for k in PARTS if k in overall["a"] or k in overall["b"]]
        out.append("<h3>Overall (summary's all row)</h3>" + table(
            ["", *[SHORT[k] + " (ms)" for k in keys]],
            [f"<tr><td>{name}</td>" + "".join(
                (_signed if name == "change" else us_cell)(overall[side].get(k))
                for k in keys) + "</tr>"
             for name, side in (("A", "a"), ("B", "b"), ("change", "change"))], "diff-overall"))
    what = diff.get("items") or "operators"
    for key, title in (("grew", f"{what}: grew most"), ("shrank", f"{what}: shrank most")):
        if diff.get(key):
            out.append(f"<h3>{e(title)}</h3>" + table(
                ["NAME", "TYPE", "A (ms/step)", "B (ms/step)", "CHANGE (ms/step)", "CHANGE"],
                [f"<tr><td>{e(c['name'], 120)}</td><td>{e(c['type'] or '')}</td>"
                 f"{us_cell(c['a_us'])}{us_cell(c['b_us'])}{_signed(c['change_us'])}"
                 f"<td class=n>{_pct(c['change_pct'])}</td></tr>"
                 for c in diff[key][:MAX_LISTED]], f"diff-{key}"))
    for key, title, field in (("new", "new in this run", "b_us"),
                              ("vanished", "vanished since the baseline", "a_us")):
        if diff.get(key):
            out.append(f"<h3>{e(what)}: {title}</h3>" + table(
                ["NAME", "TYPE", "MS/STEP"],
                [f"<tr><td>{e(c['name'], 120)}</td><td>{e(c['type'] or '')}</td>"
                 f"{us_cell(c[field])}</tr>" for c in diff[key][:MAX_LISTED]], f"diff-{key}"))
    if diff.get("ranks"):
        out.append("<h3>Per rank: step time change (largest first)</h3>" + table(
            ["RANK (A → B)", "A (ms)", "B (ms)", "CHANGE (ms)", "MOST OF IT"],
            [f"<tr><td>{r['a_rank']} → {r['b_rank']}</td>{us_cell(r['a_step_time_us'])}"
             f"{us_cell(r['b_step_time_us'])}{_signed(r['change_us'])}"
             f"<td>{e(SHORT.get(r['explained_by'], r['explained_by']) or '-')}</td></tr>"
             for r in diff["ranks"][:MAX_LISTED]], "diff-ranks"))
    slow = diff.get("slow_ranks") or {}
    if slow.get("a") is not None and slow.get("b") is not None:
        rows = [f"<tr><td>{side.upper()}</td><td>{e(row['line'])}</td></tr>"
                for side in ("a", "b") for row in slow[side][:MAX_LISTED]]
        out.append("<h3>Slow ranks (the ranks the others wait for)</h3>"
                   + (table(["SIDE", "SLOW RANK"], rows, "diff-slow") if rows else
                      "<p>none on either side.</p>"))
    for note in diff.get("notes", [])[:MAX_LISTED]:
        out.append(f"<p class=note>{e(note, 600)}</p>")
    return "".join(out)
