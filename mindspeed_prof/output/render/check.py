"""``check``'s report as a terminal table (default) or JSON (``--json``)."""

from ..check.report import VALID, label
from . import jsontext, safe

MAX_ERRORS_SHOWN = 5


def check_json(report):
    return jsontext.dumps(report.as_dict(), default=str)


def check_table(report):
    lines = [f"mindspeed-prof check {report.directory}"]
    if report.expected_ranks:
        lines.append(f"expected ranks: {_ranks(report.expected_ranks)}")
    rows = [("RANK", "VERDICT", "BACKEND", "CAPTURE", "DETAIL")]
    for rank in report.ranks:
        if not rank.runs:
            rows.append((str(rank.rank), label(rank.verdict), "-", "-",
                         _first(rank.problems) or _first(rank.notes)))
        for index, run in enumerate(rank.runs):
            verdict = label(run.verdict) if len(rank.runs) > 1 else label(rank.verdict)
            rows.append((str(rank.rank) if index == 0 else "", verdict, run.backend, run.path,
                         _detail(run)))
        if len(rank.runs) > 1 or (rank.runs and rank.verdict != rank.runs[0].verdict):
            rows.append(("", f"= {label(rank.verdict)}", "", "",
                         _first(rank.problems) or f"{len(rank.runs)} captures"))
    for run in report.unranked:
        rows.append(("?", label(run.verdict), run.backend, run.path, _detail(run)))
    if len(rows) > 1:  # a header over no row says nothing; the warning below says why
        lines.extend(_columns(rows))
    notes = []
    for rank in report.ranks:
        prefix = f"rank {rank.rank}: "
        notes.extend(prefix + p for p in rank.problems[1 if not rank.runs else 0:])
        for run in rank.runs:
            notes.extend(_run_notes(prefix, run))
        notes.extend(prefix + "warning: " + w for w in rank.warnings)
        notes.extend(prefix + "error: " + e for e in rank.errors)
    for run in report.unranked:
        notes.extend(_run_notes(f"{run.path}: ", run))
    notes.extend("warning: " + w for w in report.warnings)
    if notes:
        lines.append("")
        lines.extend(notes)
    lines.append("")
    lines.append(_verdict_line(report))
    return safe.lines("\n".join(lines))


def _run_notes(prefix, run):
    notes = [prefix + p for p in run.problems[1:]]
    notes.extend(prefix + "warning: " + w for w in run.warnings)
    for line in run.errors[:MAX_ERRORS_SHOWN]:
        notes.append(prefix + "log: " + line)
    if run.error_count > MAX_ERRORS_SHOWN:
        notes.append(prefix + f"log: ... {run.error_count - MAX_ERRORS_SHOWN} more error lines "
                              f"(--json lists {len(run.errors)})")
    return notes


def _detail(run):
    if run.problems:
        return run.problems[0]
    parts = [run.trigger] if run.trigger else []
    if run.settings:
        parts.append(run.settings)
    ok = sum(1 for f in run.files if f.status == "ok")
    if run.files:
        parts.append(f"{ok} file{'s' if ok != 1 else ''} ok")
    if run.steps:
        parts.append(f"steps {_ranks(run.steps)}")
    return ", ".join(parts)


def _first(items):
    return items[0] if items else ""


def _ranks(numbers):
    numbers = sorted(numbers)
    # a run of consecutive ranks, told without building the range (a rank may be any number)
    if len(numbers) > 2 and len(set(numbers)) == len(numbers) \
            and numbers[-1] - numbers[0] == len(numbers) - 1:
        return f"{numbers[0]}-{numbers[-1]}"
    return " ".join(str(n) for n in numbers)


def _columns(rows):
    rows = [[safe.cell(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + row[-1]
            for row in rows]


def _verdict_line(report):
    counts = report.counts()
    total = sum(counts.values())
    if not total:
        return "nothing checked: exit 1"
    summary = ", ".join(f"{n} {label(v)}" for v, n in sorted(counts.items(),
                                                             key=lambda kv: kv[0] != VALID))
    return f"{summary} ({total} checked): exit {report.exit_code}"
