"""Slow ranks for the report, from summary's ``slow_ranks``: only the ranks that are slow.

Where the wait analysis judged them (``output/waits``: the ranks others wait for in
collectives), each comes with its place in the layout, its group, its share of that group's
wait and its reason (compute-bound, host-bound, slow link); step-time deviation is a secondary
column (in a synchronous job every rank's step time is the same). Ranks it did not cover (NPU
captures, merged node reports) are judged by mean step time against the median as before:
the breakdown part that grew most names the reason:

- Computing grew: **compute-bound** (its own kernels or operators take longer);
- Communication(Not Overlapped) grew: **waiting in collectives**;
- Free grew: **host-bound** (nothing ran on the device, or on the CPU basis, no operator).

No row is listed for a rank that is not slow: the table is never padded with ranks within the
spread of any run.
"""

from typing import Any, Dict, List

REASONS = {"Computing": "compute-bound",
           "Communication(Not Overlapped)": "waiting in collectives",
           "Free": "host-bound"}
SHOWN = 16  # slow ranks listed; the rest are in summary --json
SLOW_PCT = 5.0  # a rank this much slower than the median is slow (summary's SLOW_RANK_PCT)


def slow_ranks(entries: List[Dict[str, Any]]) -> Dict[str, Any]:
    """``entries``: summary --json's ``slow_ranks``. The first ``SHOWN`` slow ones with their
    reason, how many are slow, and whether rows of several backends are mixed."""
    if len(entries) < 2:  # one rank has nothing to be slower than
        return {"rows": [], "slow": 0, "of": len(entries), "shown": 0, "mixed": False,
                "by_waits": False}
    flagged = [e for e in entries if e.get("slow", e["deviation_pct"] >= SLOW_PCT)]
    rows = []
    for entry in flagged[:SHOWN]:
        waits = entry.get("judged_by") == "waits"
        cause = entry.get("explained_by")
        rows.append({**{k: entry.get(k) for k in (
            "rank", "backend", "step_time_us", "deviation_us", "deviation_pct", "explained_by",
            "component_deltas_us", "place", "group", "kind", "group_share_pct",
            "made_wait_us", "arrived_last", "grew", "line")},
            "slow": True, "by_waits": waits,
            "reason": entry.get("reason") if waits else (REASONS.get(cause) if cause else None)})
    return {"rows": rows, "slow": len(flagged), "of": len(entries), "shown": len(rows),
            "mixed": len({e.get("backend") for e in entries if e.get("backend")}) > 1,
            "by_waits": any(e.get("judged_by") == "waits" for e in entries)}
