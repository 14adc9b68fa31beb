"""Why a slow rank is slow, in the words a performance engineer uses, from summary's slow ranks.

``summary`` already puts each slow rank's extra time down to the breakdown part that grew most
against the median rank (``explained_by``); the report names it:

- Computing grew: **compute-bound** (its own kernels or operators take longer);
- Communication(Not Overlapped) grew: **waiting in collectives** (it waits for the others, or
  its links are slower);
- Free grew: **host-bound** (nothing ran on the device, or on the CPU basis, no operator: the
  host was late to feed it: data loading, Python, synchronisation).

A rank less than ``SLOW_PCT`` % over the median, or whose parts did not grow, gets no reason: its
difference is within the spread of any run, and the report claims nothing more.
"""

from typing import Any, Dict, List

REASONS = {"Computing": "compute-bound",
           "Communication(Not Overlapped)": "waiting in collectives",
           "Free": "host-bound"}
SHOWN = 16  # the slowest ranks listed; the rest are in summary --json
SLOW_PCT = 5.0  # a rank this much slower than the median is slow (summary's SLOW_RANK_PCT)


def slow_ranks(entries: List[Dict[str, Any]]) -> Dict[str, Any]:
    """``entries``: summary --json's ``slow_ranks`` (slowest first). The first ``SHOWN`` with
    their reason, and how many are ``SLOW_PCT`` % or more over the median."""
    if len(entries) < 2:  # one rank has nothing to be slower than
        return {"rows": [], "slow": 0, "of": len(entries), "shown": 0}
    rows = []
    for entry in entries[:SHOWN]:
        # summary's own word where it gives one (its SLOW_RANK_PCT), the same rule otherwise
        slow = entry["slow"] if "slow" in entry else entry["deviation_pct"] >= SLOW_PCT
        cause = entry.get("explained_by") if slow else None  # a rank within the spread: none
        rows.append({**{k: entry.get(k) for k in ("rank", "backend", "step_time_us",
                                                  "deviation_us", "deviation_pct",
                                                  "explained_by", "component_deltas_us")},
                     "slow": slow,
                     "reason": REASONS.get(cause) if cause else None})
    return {"rows": rows, "slow": sum(1 for e in entries
                                      if e.get("slow", e["deviation_pct"] >= SLOW_PCT)),
            "of": len(entries), "shown": len(rows)}
