"""Many ranks on a terminal: a rank list told as ranges, and the number of rows a per-rank table
prints before it shows its problems first and the rest grouped (``--all``: every row).

At 1,024 ranks a row per rank buries the two ranks that matter in the middle of a thousand
lines; the tables keep a row per rank up to ``ROWS_SHOWN`` ranks, as a small job reads best."""

from typing import Iterable

ROWS_SHOWN = 32
ALL_HINT = "--all: a row per rank"


def rank_ranges(numbers: Iterable[int]) -> str:
    """``0-299,301-1023``: sorted, each run of consecutive ranks as ``first-last``."""
    ordered = sorted(set(numbers))
    if not ordered:
        return "none"
    parts = []
    start = previous = ordered[0]
    for number in ordered[1:] + [None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(str(start) if start == previous else
                     f"{start},{previous}" if previous == start + 1 else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return ",".join(parts)


def few_ranges(numbers: Iterable[int], most: int = 16) -> str:
    """``rank_ranges``, cut after ``most`` runs when a selection has no long run of
    consecutive ranks (every 8th of 131,072): ``0,8,16,...,131064 (16384 ranks)``."""
    ordered = sorted(set(numbers))
    parts = rank_ranges(ordered).split(",")
    if len(parts) <= most:
        return ",".join(parts)
    return ",".join(parts[:most - 1]) + f",...,{parts[-1]} ({len(ordered)} ranks)"


def condensed(rows: int, every: bool) -> bool:
    """Whether a table of ``rows`` per-rank rows is shown grouped (not asked for ``--all``)."""
    return not every and rows > ROWS_SHOWN
