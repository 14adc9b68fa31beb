"""The captures section of ``summary`` (``output/summary/captures.py``) as terminal lines."""

from . import safe
from .summary import SHORT


def _ms(us):
    return "-" if us is None else f"{us / 1000:.1f} ms"


def _steps(steps):
    if not steps:
        return "-"
    return f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else str(steps[0])


def captures_lines(captures):
    """Lines for each capture taken by a rule; [] when the run took none."""
    if not captures:
        return []
    lines = ["", "captures taken by themselves (anomalous rank beside its reference):"]
    for capture in captures:
        lines.append(f"  {capture['dir']}: capture {capture['capture']}, {capture['why']}")
        sides = [(s, role) for s, role in ((capture["anomalous"], "anomalous"),
                                           (capture["reference"], "reference")) if s]
        if capture["rule"] == "straggler":
            sides = [(s, "straggler" if role == "anomalous" else role) for s, role in sides]
        keys = [k for k in dict.fromkeys(k for s, _ in sides for k in s["breakdown_us"])
                if k != "step_time"] + ["step_time"]
        judged = any(s.get("judged_s") is not None for s, _ in sides)
        header = ["rank", "role", "steps", *(SHORT.get(k, k) for k in keys), "compute (trace)",
                  *(["compute (rule)"] if judged else [])]
        rows = [header] + [[str(s["rank"]), role, _steps(s["steps"]),
                            *(_ms(s["breakdown_us"].get(k)) for k in keys), _ms(s["compute_us"]),
                            *([_ms(None if s.get("judged_s") is None else s["judged_s"] * 1e6)]
                              if judged else [])]
                           for s, role in sides]
        rows = [[safe.cell(cell) for cell in row] for row in rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines += [("    " + "  ".join(c.ljust(w) for c, w in zip(row, widths))).rstrip()
                  for row in rows]
        if capture["grew"]:
            mine, theirs = capture["anomalous"]["rank"], capture["reference"]["rank"]
            lines.append(f"    grew most per step, rank {mine} against rank {theirs}:")
            width = max(len(safe.cell(g["name"][:60])) for g in capture["grew"])
            for grew in capture["grew"]:
                lines.append(f"      {safe.cell(grew['name'][:60]):<{width}}  "
                             f"+{grew['grew_us_per_step'] / 1000:.2f} ms "
                             f"({_ms(grew['anomalous_us_per_step'])} vs "
                             f"{_ms(grew['reference_us_per_step'])})")
        if judged:
            lines.append("    compute (rule): what the rule measured before the capture (unit "
                         "time minus collective wait); (trace): the step minus the trace's "
                         "collectives")
        vs = (capture["anomalous"] or {}).get("vs_median")
        if vs is not None:
            lines.append(f"    its steps took {vs:.2f}x the median that fired the capture")
        lines += [f"    note: {note}" for note in capture["notes"]]
    return [safe.lines(line) for line in lines]
