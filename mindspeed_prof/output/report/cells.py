"""The report's HTML cells and bounds, shared by its sections and the baseline's (a leaf: it
imports nothing of the report, so no section module imports another). Text from the files is
escaped here."""

import html
from typing import Any, List, Optional

MAX_ROWS = 1024  # rows of one table (ranks): every rank of a 1,024-rank job, no more
MAX_LISTED = 64  # verdict rows of valid ranks, notes, captures, memory entries
MAX_TEXT = 300  # characters of one cell of text read from the files
def e(text: Any, limit: int = MAX_TEXT) -> str:
    text = str(text)
    return html.escape(text if len(text) <= limit else text[:limit - 1] + "…", quote=True)


def us_cell(value: Optional[float]) -> str:
    """A time: shown in ms, the exact µs of summary --json in ``data-us``."""
    if value is None:
        return "<td class=n>-</td>"
    return f"<td class=n data-us='{value!r}'>{value / 1000.0:.3f}</td>"


def num_cell(value: Any, form: str = "") -> str:
    if value is None:
        return "<td class=n>-</td>"
    return f"<td class=n>{format(value, form)}</td>"


def table(header: List[str], rows: List[str], cls: str = "") -> str:
    head = "".join(f"<th>{h}</th>" for h in header)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}" \
           f"</tbody></table>"


def rank_ranges(numbers: List[int]) -> str:
    """0-3, 5, 7-9"""
    spans: List[List[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
