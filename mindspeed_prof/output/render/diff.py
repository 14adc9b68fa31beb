"""``diff``'s terminal table, from ``diff_paths``' dict (one computation, two renderings)."""

from .summary_table import SHORT
from . import safe

SHOWN = ("Computing", "Communication(Not Overlapped)", "Overlapped", "Free", "step_time")


def diff_table(data: dict) -> str:
    a, b = data["a"], data["b"]
    lines = [f"mindspeed-prof diff  A {a['spec']}  ->  B {b['spec']}   (change = B - A, µs)"]
    for label, side in (("A", a), ("B", b)):
        lines.append(f"  {label}: {side['backend'] or '-'} · {side['unit'] or 'unit unknown'} · "
                     f"rank(s) {_list(side['ranks'])} · steps {_list(side['steps'])}"
                     + (f" · role {side['role']}" if side["role"] else ""))
    for reason in data["unlike"]:
        lines.append(f"UNLIKE: {reason}")
    if not data["comparable"]:
        lines.append("not compared.")
        return safe.lines("\n".join(lines))
    keys = [k for k in SHOWN if data["overall"] and k in data["overall"]["change"]]
    if data["steps"]:
        lines += ["", f"Per step (matched by {data['matched_by']}; mean over each side's ranks "
                      f"of summary's breakdown)"]
        rows = [["STEP A", "STEP B", "", *[f"{SHORT.get(k, k)}" for k in keys]]]
        for step in data["steps"]:
            rows.append([str(step["a_step"]), str(step["b_step"]), "A",
                         *[_num(step["a"].get(k)) for k in keys]])
            rows.append(["", "", "B", *[_num(step["b"].get(k)) for k in keys]])
            rows.append(["", "", "change", *[_delta(step["change"].get(k), step["a"].get(k))
                                             for k in keys]])
        lines += _table(rows)
    if data["overall"]:
        overall = data["overall"]
        lines += ["", "Whole profile (summary's \"all\" row)"]
        rows = [["", *[SHORT.get(k, k) for k in keys]],
                ["A", *[_num(overall["a"].get(k)) for k in keys]],
                ["B", *[_num(overall["b"].get(k)) for k in keys]],
                ["change", *[_delta(overall["change"].get(k), overall["a"].get(k))
                             for k in keys]]]
        lines += _table(rows)
    what = data["items"] or "items"
    for key, title in (("grew", f"{what} that grew most"), ("shrank", f"{what} that shrank most")):
        if data[key]:
            lines += ["", f"{title.capitalize()} ({data['items_basis']})"]
            rows = [["NAME", "TYPE", "A(us)", "B(us)", "CHANGE(us)"]]
            rows += [[c["name"], c["type"] or "", _num(c["a_us"]), _num(c["b_us"]),
                      _delta(c["change_us"], c["a_us"])] for c in data[key]]
            lines += _table(rows)
    for key, title, value in (("new", "New in B", "b_us"), ("vanished", "Gone from A", "a_us")):
        if data[key]:
            lines += ["", f"{title} ({what}, µs per step of one rank)"]
            lines += _table([["NAME", "TYPE", "US"]] + [[c["name"], c["type"] or "",
                                                          _num(c[value])] for c in data[key]])
    if data["ranks"]:
        lines += ["", "Step time per rank (mean over its steps)"]
        rows = [["RANK A", "RANK B", "A(us)", "B(us)", "CHANGE(us)", "EXPLAINED BY"]]
        rows += [[str(r["a_rank"]), str(r["b_rank"]), _num(r["a_step_time_us"]),
                  _num(r["b_step_time_us"]), _delta(r["change_us"], r["a_step_time_us"]),
                  SHORT.get(r["explained_by"], r["explained_by"] or "-")] for r in data["ranks"]]
        lines += _table(rows)
    lines += _slow_ranks(data.get("slow_ranks"))
    for note in data["notes"]:
        lines.append(f"note: {note}")
    return safe.lines("\n".join(lines))


def _slow_ranks(slow):
    """Each side's slow ranks: the ranks the others wait for (output/waits)."""
    if not slow or slow.get("a") is None or slow.get("b") is None:
        return []
    lines = ["", "Slow ranks (the ranks the others wait for in collectives)"]
    for label in ("a", "b"):
        found = slow[label]
        lines += [f"  {label.upper()}: " + ("none" if not found else found[0]["line"])]
        lines += [f"     {row['line']}" for row in found[1:4]]
    if slow["new"]:
        lines.append(f"  slow in B only: rank(s) {_list(slow['new'])}")
    if slow["gone"]:
        lines.append(f"  slow in A only: rank(s) {_list(slow['gone'])}")
    return lines


def _list(values):
    if not values:
        return "none"
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ",".join(map(str, values[:8])) + (" ..." if len(values) > 8 else "")


def _num(value):
    return "-" if value is None else f"{value:,.1f}"


def _delta(change, base):
    if change is None:
        return "-"
    pct = f" ({100.0 * change / base:+.1f}%)" if base else ""
    return f"{change:+,.1f}{pct}"


def _table(rows):
    rows = [[safe.cell(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
