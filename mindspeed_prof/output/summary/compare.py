"""Across ranks: the top items of merged totals, and the slow ranks against the median.

What ``summary`` says of the whole job, computed from the ranks' own numbers: the same on one
machine's summary and on the merge of per-node reports (``job/``).
"""

import statistics

from ..read import columns
from . import aggregate

EXPLAINING = columns.STEP_PARTS  # what a slow rank's extra time is put down to
# A rank is called slow from this far above the median step time: ranks of an ordinary job
# differ by a percent or two (timer jitter, the rank that logs); below this is no finding.
SLOW_RANK_PCT = 5.0


def top_items(items, n):
    """(the n largest by total, the total over all items)."""
    values = list(items.values()) if isinstance(items, dict) else list(items)
    whole = sum(i.total_us for i in values)
    return sorted(values, key=lambda i: (-i.total_us, i.name))[:n], whole


def merge(rank_summaries, attribute):
    merged = {}
    for rank_summary in rank_summaries:
        aggregate.merge_into(merged, getattr(rank_summary, attribute))
    return merged


def backends(rank_summaries):
    """The backends of the rows that have one (a row per (rank, backend))."""
    return sorted({r.backend for r in rank_summaries if r.backend})


def slow_ranks(rank_summaries, waits=None):
    """Slow ranks: where the wait analysis (``output/waits``) covers a rank, the ranks others
    wait for in collectives, most waited-for first, each with its reason and place; step-time
    deviation stays beside it (in a synchronous job every rank's step time is the same, so it
    cannot tell). Ranks it does not cover (NPU captures, merged node reports): by mean step
    time against the median, as before. Against each backend's own median when there are
    several (each entry then names it)."""
    groups = backends(rank_summaries)
    if len(groups) < 2:
        entries = _slow_ranks(rank_summaries)
    else:
        entries = [{**entry, "backend": backend} for backend in groups
                   for entry in _slow_ranks([r for r in rank_summaries if r.backend == backend])]
    return _by_waits(entries, waits) if waits else entries


def _by_waits(entries, waits):
    """Step-time entries of the ranks the wait analysis covers, judged by it instead."""
    covered = {row["rank"]: row for row in waits["ranks"]}
    slow = {row["rank"]: row for row in waits["slow_ranks"]}
    order = {row["rank"]: i for i, row in enumerate(waits["ranks"])}
    judged, rest = [], []
    for entry in entries:
        if entry["rank"] not in covered or entry.get("backend", waits.get("backend")) \
                != waits.get("backend"):
            rest.append(entry)
            continue
        mine = slow.get(entry["rank"], covered[entry["rank"]])
        judged.append({**entry, "judged_by": "waits", "slow": entry["rank"] in slow,
                       "step_time_slow": entry["slow"],
                       **{k: mine.get(k) for k in WAIT_KEYS}})
    judged.sort(key=lambda e: order[e["rank"]])
    return judged + rest


WAIT_KEYS = ("place", "arrived_last", "made_wait_us", "own_wait_us", "delay_per_step_us",
             "group", "kind", "group_share_pct", "reason", "grew", "line")


def _slow_ranks(rank_summaries):
    timed = [(r, r.breakdown()) for r in rank_summaries if r.step_time is not None]
    if not timed:
        return []
    median = statistics.median(b["step_time"] for _, b in timed)
    medians = {k: statistics.median(b[k] for _, b in timed if k in b)
               for k in EXPLAINING if any(k in b for _, b in timed)}
    result = []
    for rank_summary, breakdown in sorted(timed, key=lambda t: (-t[1]["step_time"], t[0].rank)):
        deviation = breakdown["step_time"] - median
        deltas = {k: breakdown[k] - medians[k] for k in medians if k in breakdown}
        cause = max(deltas, key=deltas.get) if deltas and deviation > 0 else None
        pct = 100.0 * deviation / median if median else 0.0
        result.append({
            "rank": rank_summary.rank, "step_time_us": breakdown["step_time"],
            "deviation_us": deviation, "deviation_pct": pct, "slow": pct >= SLOW_RANK_PCT,
            "explained_by": cause if cause and deltas[cause] > 0 else None,
            "component_deltas_us": deltas,
        })
    return result
