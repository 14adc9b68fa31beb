"""``check`` and ``summary`` of the RL role layout on the terminal, as JSON or as CSV."""

import csv
import io

from ..check.report import label
from ..render import jsontext, safe

MS = 1000.0


def _columns(rows):
    rows = [[safe.cell(cell) for cell in row] for row in rows]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in rows)


def _ranks(numbers):
    return ",".join(str(n) for n in numbers) or "none"


def role_check_json(result):
    return jsontext.dumps(result.as_dict())


def role_check_table(result):
    rows = [("ROLE", "RANK", "VERDICT", "PARTS")]
    for entry in result.ranks:
        parts = "; ".join(f"{part}: {label(verdict)}" for part, verdict in sorted(
            entry.parts.items()))
        rows.append((entry.role, entry.rank, label(entry.verdict), parts))
    lines = [f"RL roles under {result.directory}",
             "expected ranks: " + "; ".join(f"{role} {_ranks(ranks)}"
                                            for role, ranks in sorted(result.expected.items()))]
    if len(rows) > 1:
        lines += ["", _columns(rows)]
    problems = [f"{e.role} rank {e.rank}: {p}" for e in result.ranks for p in e.problems]
    if problems or result.warnings:
        lines.append("")
    lines += problems + [f"warning: {w}" for w in result.warnings]
    bad = sum(1 for e in result.ranks if e.verdict != "valid")
    lines += ["", f"{len(result.ranks) - bad} of {len(result.ranks)} (role, rank) valid: "
                  f"exit {result.exit_code}"]
    return safe.lines("\n".join(lines))


def _ms(us):
    return "-" if us is None else f"{us / MS:.1f}"


def role_summary_table(summary):
    lines = [f"RL steps across roles under {summary.directory} (ms; per role its slowest rank)"]
    for step in sorted(summary.steps):
        rows = summary.table(step)
        stages = sorted({s for row in rows for s in row["stages_us"]})
        header = ("ROLE", "RANKS", "STEP", *stages, "SLOWEST RANK")
        table = [header]
        for row in rows:
            step_cell = _ms(row["step_us"]) if row["step_us"] is not None else \
                f"({_ms(row['slowest_us'])})"
            table.append((row["role"], _ranks(row["ranks"]), step_cell,
                          *(_ms(row["stages_us"].get(s)) for s in stages),
                          f"{row['slowest_rank']} ({_ms(row['slowest_us'])})"))
        lines += ["", f"RL step {step}", _columns(table)]
    if any(row["step_us"] is None for step in summary.steps for row in summary.table(step)):
        lines += ["", "(STEP in parentheses: only selected stages were recorded; their sum)"]
    if summary.roots:
        lines += ["", "Per-rank breakdown and top operators of one role or stage:"]
        lines += [f"  mindspeed-prof summary {path}" for path in summary.roots]
    lines += [f"note: {n}" for n in summary.notes]
    return safe.lines("\n".join(lines))


def role_summary_json(summary):
    return jsontext.dumps(summary.as_dict())


def role_summary_csv(summary):
    """Long format: step,role,rank,part,us (part: step or a stage name)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("step", "role", "rank", "part", "us"))
    for step in sorted(summary.steps):
        for role, by_rank in sorted(summary.steps[step].items()):
            for rank, entry in sorted(by_rank.items()):
                if entry.step_us is not None:
                    writer.writerow((step, role, rank, "step", f"{entry.step_us:.3f}"))
                for stage, us in sorted(entry.stages.items()):
                    writer.writerow((step, role, rank, stage, f"{us:.3f}"))
    return safe.lines(out.getvalue())
