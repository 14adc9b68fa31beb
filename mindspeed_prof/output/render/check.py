"""``check``'s report as a terminal table (default) or JSON (``--json``)."""

from ..check.report import VALID, label
from . import jsontext, many, safe

MAX_ERRORS_SHOWN = 5


def check_json(report):
    return jsontext.dumps(report.as_dict(), default=str)


def check_table(report, every=False):
    """The verdict table. Past ``many.ROWS_SHOWN`` ranks (unless ``every``, ``--all``): the
    ranks with a problem first, each with its rows, then the valid ranks grouped by what their
    row says (ranges like ``0-1023``), and each note shared by several ranks once."""
    lines = [f"mindspeed-prof check {report.directory}"]
    if report.expected_ranks:
        lines.append(f"expected ranks: {_ranks(report.expected_ranks)}")
    grouped = many.condensed(len(report.ranks), every)
    header = ("RANK", "VERDICT", "BACKEND", "CAPTURE", "DETAIL")
    rows = [header]
    ordered = report.ranks
    if grouped:  # problems first
        ordered = [r for r in report.ranks if r.verdict != VALID]
    for rank in ordered:
        rows.extend(_rank_rows(rank))
    for run in report.unranked:
        rows.append(("?", label(run.verdict), run.backend, run.path, _detail(run)))
    if grouped:
        rows.extend(_valid_groups([r for r in report.ranks if r.verdict == VALID]))
    if len(rows) > 1:  # a header over no row says nothing; the warning below says why
        lines.extend(_columns(rows))
    if grouped:
        lines.append(f"({len(report.ranks)} ranks: those with a problem first, the valid "
                     f"ones grouped; {many.ALL_HINT})")
    notes = []
    for rank in (ordered + [r for r in report.ranks if r.verdict == VALID] if grouped
                 else report.ranks):
        prefix = f"rank {rank.rank}: "
        notes.extend((rank.rank, prefix, p) for p in rank.problems[1 if not rank.runs else 0:])
        for run in rank.runs:
            notes.extend((rank.rank, prefix, n) for n in _run_notes("", run))
        notes.extend((rank.rank, prefix, "warning: " + w) for w in rank.warnings)
        notes.extend((rank.rank, prefix, "error: " + e) for e in rank.errors)
    texts = _grouped_notes(notes) if grouped else [prefix + text for _, prefix, text in notes]
    for run in report.unranked:
        texts.extend(_run_notes(f"{run.path}: ", run))
    texts.extend("warning: " + w for w in report.warnings)
    if texts:
        lines.append("")
        lines.extend(texts)
    lines.append("")
    lines.append(_verdict_line(report))
    return safe.lines("\n".join(lines))


def _rank_rows(rank):
    rows = []
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
    return rows


def _valid_groups(valid):
    """One row per set of valid ranks whose rows say the same (backend, captures, detail)."""
    groups = {}
    for rank in valid:
        key = (" ".join(sorted({run.backend for run in rank.runs})) or "-",
               _detail(rank.runs[0]) if len(rank.runs) == 1 else f"{len(rank.runs)} captures")
        groups.setdefault(key, []).append(rank.rank)
    if len(groups) > many.ROWS_SHOWN:  # each rank says something else: one row per backend
        by_backend = {}
        for (backend, _), found in groups.items():
            by_backend.setdefault((backend, f"details differ ({many.ALL_HINT})"), []).extend(found)
        groups = by_backend
    return [(many.rank_ranges(found), label(VALID), backend,
             f"{len(found)} rank{'s' if len(found) != 1 else ''}", detail)
            for (backend, detail), found in sorted(groups.items(), key=lambda kv: kv[1][0])]


def _grouped_notes(notes):
    """Each note text once, after the ranks that have it (problem ranks' notes first)."""
    by_text = {}
    for rank, _, text in notes:
        by_text.setdefault(text, []).append(rank)
    return [f"rank{'s' if len(found) > 1 else ''} {many.rank_ranges(found)}: {text}"
            for text, found in by_text.items()]


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
    if len(numbers) > many.ROWS_SHOWN:
        return many.rank_ranges(numbers)
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
