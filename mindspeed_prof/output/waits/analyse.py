"""Who makes everyone wait, and why: the collectives matched across ranks (``match.py``), on
clocks aligned on their ends (``timeline/clock.py``).

Per collective: each member's arrival, the last to arrive, each member's wait (last arrival −
own arrival) and the transfer (end − last arrival). Per rank: how often it arrived last, the
rank-µs it made the others wait, its own wait. A rank late only because it waited for another
earlier in the step (its TP peer waits for a stalled rank at the step's first broadcast, then
runs in lockstep with it and arrives late at its own DP group's all-reduce) passes the others'
wait on to the one it waited for, followed back to where the lateness started (``_blamed``);
one kept late by its previous collective's slow transfer passes it to that group's links (no
rank). Per step, each rank's lateness at arrival: its arrival − the first member's, less what
it had waited so far in the step (lateness passed on is not its own), summed over the step's
collectives. Collectives whose group the files leave ambiguous are not matched
(``match.py``): no rank is named for them, and ``unplaced_calls`` counts their calls.

A rank is slow when the others wait for it, steadily: in the median step each member of its
collectives waited ``SLOW_WAIT_PCT`` % of the median step time or more for it, and that median
is at least ``STEADY`` times the spread of the wait over the steps (the median absolute
deviation), or the wait passed that mark in ``LATE_SHARE`` of the steps (of 4 or more). A
descheduled process or a GC pause delays one step by a random amount, and on a busy host the
rank it delays changes from step to step: that is noise, not a slow rank (the report's slow
steps name those steps); a slow rank delays every step alike, or every step by another amount
(a data loader, a collector that stalls it unevenly): it is late in nearly every step. Its
reason is read from what ran before its late arrival, against the median of the ranks that
waited for it in the same steps (summary's step breakdown): **compute-bound** (Computing
grew: the operator that grew most is named), **host-bound** (Free grew: the device idle, or
on the CPU the host's own time outside operators: Python, data loading, a stall), **slow
link** (its collectives' transfers take longer than other groups' of the same kind and size).
None of these growing by a quarter of its lateness: no reason is claimed.
"""

import statistics
from collections import defaultdict
from typing import Any, Dict, List, Optional

from ..timeline import clock
from . import match
from .layout import Layout

SLOW_WAIT_PCT = 10.0
STEADY = 5.0  # ... and steadily: its median delay this many times its spread over the steps
LATE_SHARE = 0.75  # ... or late past the mark in this share of the steps (4 steps or more)
EXPLAINS = 0.25  # a part of the breakdown explains lateness when it grew by this share of it
# a group's transfers this much slower than other groups' of its kind and size: a slow link
SLOW_LINK_RATIO = 1.5
SLOW_LINK_MIN_US = 100.0
PEERS_FOR_OPS = 16  # peers whose operators the slow rank's are compared with
KINDS = ("reducescatter", "allreduce", "allgather", "alltoall", "broadcast", "barrier",
         "send", "recv", "reduce", "gather", "scatter")
SHOWN_KIND = {"reducescatter": "reduce-scatter", "allreduce": "all-reduce",
              "allgather": "all-gather", "alltoall": "all-to-all"}


def kind_of(name: str) -> str:
    """``gloo:all_reduce``, ``c10d::allreduce_``, ``ncclDevKernel_AllReduce_…``: all-reduce."""
    flat = name.lower().replace("_", "").replace("-", "")
    for kind in KINDS:
        if kind in flat:
            return SHOWN_KIND.get(kind, kind)
    return name


def analyse(rank_summaries: List[Any], layout: Layout,
            hosts: Dict[int, Optional[str]]) -> Optional[Dict[str, Any]]:
    """The wait analysis of the ranks whose captures list collectives; None with fewer than
    two such ranks."""
    ranks = {r.rank: r for r in rank_summaries if r.collectives}
    if len(ranks) < 2:
        return None
    clocks = _clocks(ranks, hosts)
    found = match.keyed({rank: r.collectives for rank, r in ranks.items()},
                        {rank: r.spans for rank, r in ranks.items()})
    matched, alone, unplaced = match.instances(found, clocks.offsets_us,
                                               clock.END_TOLERANCE_US, layout)
    steps = sorted({i.step for i in matched})
    per_rank: Dict[int, Dict[str, float]] = {r: {"arrived_last": 0, "made_wait_us": 0.0,
                                                 "delay_us": 0.0, "own_wait_us": 0.0,
                                                 "collectives": 0} for r in ranks}
    lateness: Dict[int, Dict[int, float]] = defaultdict(lambda: defaultdict(float))
    made_in_step: Dict[int, Dict[int, float]] = defaultdict(lambda: defaultdict(float))
    delay_in_step: Dict[int, Dict[int, float]] = defaultdict(lambda: defaultdict(float))
    groups: Dict[tuple, Dict[str, Any]] = {}
    made_in_group: Dict[tuple, Dict[int, float]] = defaultdict(lambda: defaultdict(float))
    members: Dict[tuple, set] = defaultdict(set)  # the ranks of each (group, kind)
    own_delay: Dict[int, float] = defaultdict(float)  # rank -> delay where it arrived last
    waited_for: Dict[int, set] = defaultdict(set)  # slow rank -> (step, rank) that waited
    carried: Dict[int, _Carried] = {}  # rank -> what it waited for so far in its step
    for inst in sorted(matched, key=lambda i: max(i.arrivals)):
        first, last_at = min(inst.arrivals), max(inst.arrivals)
        late = inst.ranks[inst.arrivals.index(last_at)]
        for rank in inst.ranks:
            if rank not in carried or carried[rank].step != inst.step:
                carried[rank] = _Carried(inst.step)
        last = _blamed(inst, late, carried)
        waits = [last_at - a for a in inst.arrivals]
        transfer = max(statistics.median(inst.ends) - last_at, 0.0)
        passed_on = {rank: carried[rank].wait for rank in inst.ranks}
        for rank, wait in zip(inst.ranks, waits):
            carried[rank].add(wait, last, transfer)
        others = sum(waits)
        for rank, arrival, wait in zip(inst.ranks, inst.arrivals, waits):
            stats = per_rank[rank]
            stats["own_wait_us"] += wait
            stats["collectives"] += 1
            # lateness passed on (it had just waited for another) is not its own
            lateness[rank][inst.step] += max(arrival - first - passed_on.get(rank, 0.0), 0.0)
            if rank not in (late, last):
                waited_for[last].add((inst.step, rank))
        per_rank[late]["arrived_last"] += 1
        if last is not None:  # None: late from a slow transfer before (the link's, no rank's)
            per_rank[last]["made_wait_us"] += others
            per_rank[last]["delay_us"] += others / (len(inst.ranks) - 1)
            made_in_step[inst.step][last] += others
            delay_in_step[last][inst.step] += others / (len(inst.ranks) - 1)
            if last == late:  # its own lateness, not passed on: what its reason must explain
                own_delay[last] += others / (len(inst.ranks) - 1)
        key = (layout.group_name(inst.ranks), kind_of(inst.name))
        group = groups.setdefault(key, {"group": key[0], "kind": key[1], "count": 0,
                                        "members": len(inst.ranks), "bytes": 0.0,
                                        "sized": 0, "transfer_us": 0.0, "wait_us": 0.0,
                                        "_transfers": defaultdict(list)})
        group["count"] += 1
        group["wait_us"] += others
        group["transfer_us"] += transfer
        if isinstance(inst.size, (int, float)):
            group["bytes"] += inst.size
            group["sized"] += 1
        group["_transfers"][inst.size].append(transfer)
        members[key].update(inst.ranks)
        if last is not None:
            made_in_group[key][last] += others
    step_times = [s["step_time"] for r in ranks.values() for s in r.steps
                  if s.get("step_time") is not None]
    median_step = statistics.median(step_times) if step_times else None
    group_rows = _group_rows(groups)
    table: List[Dict[str, Any]] = []
    for rank, stats in per_rank.items():
        row: Dict[str, Any] = {"rank": rank, "place": layout.place(rank),
                               **{k: v for k, v in stats.items() if k != "delay_us"}}
        row["delay_per_step_us"] = stats["delay_us"] / len(steps) if steps else 0.0
        row["median_delay_us"] = statistics.median(delay_in_step[rank].get(s, 0.0)
                                                   for s in steps) if steps else 0.0
        table.append(row)
    table.sort(key=lambda t: (-t["made_wait_us"], t["rank"]))
    slow = []
    for row in table:
        delays = [delay_in_step[row["rank"]].get(s, 0.0) for s in steps]
        spread = statistics.median(abs(d - row["median_delay_us"]) for d in delays) \
            if delays else 0.0
        row["delay_spread_us"] = spread
        mark = SLOW_WAIT_PCT / 100 * median_step if median_step else None
        row["late_steps"] = sum(d >= mark for d in delays) if mark else 0
        if not mark or row["median_delay_us"] < mark:
            continue
        if row["median_delay_us"] < STEADY * spread and not (
                len(steps) >= 4 and row["late_steps"] >= LATE_SHARE * len(steps)):
            continue
        slow.append(_slow_rank(row, ranks, layout, made_in_group, groups, group_rows,
                               waited_for, steps, median_step, members,
                               own_delay[row["rank"]] / len(steps)))
    total = sum(i["wait_us"] for i in group_rows)
    return {
        "basis": "collectives matched across ranks by group, kind and order in the step; "
                 "wait = last arrival − own arrival, transfer = end − last arrival; clocks "
                 "aligned on collective ends",
        "clocks": {**clocks.as_dict(), "tolerance_us": clock.END_TOLERANCE_US},
        "layout": _layout_dict(layout), "steps": steps, "collectives": len(matched),
        "unmatched_calls": alone, "unplaced_calls": unplaced, "total_wait_us": total,
        "median_step_time_us": median_step,
        "slow_wait_pct": SLOW_WAIT_PCT, "slow_ranks": slow, "ranks": table,
        "groups": group_rows,
        "groups_basis": "per group (named by the layout) and kind, the matched collectives: "
                        "count; bytes where the files give sizes; transfer_us = the sum of "
                        "(end − last arrival); wait_us = the sum of every member's wait; "
                        "bandwidth_gbps = bytes / transfer time",
        "per_step": [{"step": s, "rank": max(made_in_step[s], key=lambda r: (
            made_in_step[s][r], -r)) if made_in_step[s] else None,
                      "made_wait_us": max(made_in_step[s].values()) if made_in_step[s] else 0.0}
                     for s in steps],
        "lateness": {"steps": steps, "ranks": sorted(ranks),
                     "us": [[round(lateness[r].get(s, 0.0), 3) for s in steps]
                            for r in sorted(ranks)]},
    }


class _Carried:
    """What a rank waited for so far in one step: in total, and per rank it waited for."""

    __slots__ = ("step", "wait", "by", "transfer")

    def __init__(self, step):
        self.step, self.wait, self.by, self.transfer = step, 0.0, {}, 0.0

    def add(self, wait, blamed, transfer):
        self.wait += wait
        if blamed is not None and wait > 0:
            self.by[blamed] = self.by.get(blamed, 0.0) + wait
        self.transfer = transfer  # the slow transfer it came from last (the link's)


def _blamed(inst, late, carried):
    """Who the others waited for: the last to arrive, unless its lateness is not its own.

    The rule, across the step: a rank that waited for another earlier in the step runs late
    by that wait from then on (in lockstep with the one it waited for), and arrives late at
    its next collectives with other groups. So the last to arrive is blamed only when its own
    time since its previous collective (compute, host) is longer than the others' by half its
    lateness or more; else when what it waited for so far in the step, beyond what the others
    waited, is half its lateness or more, the blame goes to the rank it waited for most (itself
    already followed back to where the lateness started, when that wait was matched); else
    when its previous collective's transfer was that long, to that group's links (None)."""
    i = inst.ranks.index(late)
    lateness = inst.arrivals[i] - statistics.median(inst.arrivals)
    excess = inst.leads[i] - statistics.median(inst.leads)
    if lateness <= 0 or excess >= 0.5 * lateness:
        return late
    mine = carried[late]
    others = statistics.median(carried[r].wait for r in inst.ranks if r != late)
    if mine.wait - others >= 0.5 * lateness and mine.by:
        return max(mine.by, key=lambda r: (mine.by[r], -r))
    if mine.transfer >= 0.5 * lateness:
        return None  # its previous collective's transfer kept it: that group's links
    return late


def _clocks(ranks, hosts):
    """Offsets from collective ends, seeded by step boundaries (``clock.align``)."""
    spans = {rank: dict(r.spans) for rank, r in ranks.items() if r.spans}
    prior = clock.align(spans, hosts).offsets_us if len(spans) == len(ranks) else {}
    lengths = [b - a for s in spans.values() for a, b in s.values()]
    window = 0.5 * statistics.median(lengths) if lengths else float("inf")
    ends = {key: {rank: v[1] for rank, v in members.items()}
            for key, members in match.keyed({rank: r.collectives for rank, r in ranks.items()},
                                            {}).items()}
    return clock.align_on_collectives(ends, hosts, prior, window)


def _group_rows(groups):
    rows = []
    by_kind: Dict[tuple, Dict[str, float]] = defaultdict(dict)
    for group in groups.values():
        for size, transfers in group["_transfers"].items():
            by_kind[(group["kind"], size)][group["group"]] = statistics.median(transfers)
    for group in sorted(groups.values(), key=lambda g: (-g["wait_us"], g["group"], g["kind"])):
        slower = []
        for size, transfers in group.pop("_transfers").items():
            peers = [v for k, v in by_kind[(group["kind"], size)].items() if k != group["group"]]
            if not peers:
                continue
            mine, usual = statistics.median(transfers), statistics.median(peers)
            if mine > SLOW_LINK_RATIO * usual and mine - usual > SLOW_LINK_MIN_US:
                slower.append({"bytes": size, "transfer_us": mine, "peers_us": usual})
        sized = group.pop("sized")
        group["bandwidth_gbps"] = (group["bytes"] / group["transfer_us"] / 1e3
                                   if sized == group["count"] and group["transfer_us"] > 0
                                   else None)
        group["bytes"] = group["bytes"] if sized else None
        group["slow_link"] = slower
        rows.append(group)
    return rows


def _slow_rank(row, ranks, layout, made_in_group, groups, group_rows, waited_for, steps,
               median_step, members, own_late):
    rank = row["rank"]
    mine_groups = {k: v[rank] for k, v in made_in_group.items() if v.get(rank)}
    # its own groups first: the wait it passed on (to a peer's other groups) is named there too
    top = max(mine_groups, key=lambda k: (rank in members[k], mine_groups[k]))
    share = 100.0 * mine_groups[top] / groups[top]["wait_us"] if groups[top]["wait_us"] else 0.0
    waiters = waited_for[rank]
    deltas = _deltas(ranks[rank], [(s, ranks[r]) for s, r in waiters if r in ranks])
    # what its breakdown must explain: the delay it caused arriving last itself (the wait
    # passed on through its lockstep peers to their other groups is the same lateness again)
    late = own_late or row["delay_per_step_us"]
    reason, grew = None, None
    compute, free = deltas.get("Computing", 0.0), deltas.get("Free", 0.0)
    if max(compute, free) >= EXPLAINS * late:
        if compute >= free:
            reason, grew = "compute-bound", _grew_op(ranks[rank], {r for _, r in waiters},
                                                     ranks)
        else:
            reason = "host-bound"
            grew = {"what": "host time outside operators" if ranks[rank].basis and
                    ranks[rank].basis.startswith("CPU") else "device idle",
                    "us_per_step": free}
    if reason is None and any(g["slow_link"] for g in group_rows
                              if (g["group"], g["kind"]) in mine_groups):
        reason = "slow link"
    return {**row, "group": top[0], "kind": top[1], "group_share_pct": share,
            "reason": reason, "grew": grew, "component_deltas_us": deltas,
            "line": _line(rank, row["place"], top, share, reason, grew)}


def _deltas(mine, waiters):
    """Per breakdown part: the slow rank's mean over the steps where it was waited for, minus
    the median of the ranks that waited for it in those steps."""
    by_step: Dict[int, Dict[str, float]] = {s["step"]: s for s in mine.steps}
    theirs: Dict[int, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
    for step, peer in waiters:
        for s in peer.steps:
            if s["step"] == step:
                for part in ("Computing", "Free", "Communication(Not Overlapped)"):
                    if s.get(part) is not None:
                        theirs[step][part].append(s[part])
    deltas: Dict[str, List[float]] = defaultdict(list)
    for step, parts in theirs.items():
        for part, values in parts.items():
            if step in by_step and by_step[step].get(part) is not None:
                deltas[part].append(by_step[step][part] - statistics.median(values))
    return {part: statistics.fmean(values) for part, values in deltas.items()}


def _grew_op(mine, waiters, ranks):
    """The operator whose self time per step grew most against the ranks that waited."""
    peers = [ranks[r] for r in sorted(waiters)[:PEERS_FOR_OPS] if r in ranks]
    if not mine.ops or not peers or not mine.steps:
        return None
    best = None
    for name, item in sorted(mine.ops.items(), key=lambda kv: -kv[1].total_us)[:20]:
        own = item.total_us / len(mine.steps)
        others = statistics.median((p.ops[name].total_us if name in p.ops else 0.0)
                                   / max(len(p.steps), 1) for p in peers)
        if best is None or own - others > best["us_per_step"]:
            best = {"what": name, "us_per_step": own - others,
                    "pct": 100.0 * (own - others) / others if others else None}
    return best if best and best["us_per_step"] > 0 else None


def _line(rank, place, top, share, reason, grew):
    """``rank 77 · tp1 pp3 dp9 — 41 % of dp9's all-reduce wait, compute-bound (aten::mm
    +38 %)``."""
    head = f"rank {rank}" + (f" · {place}" if place else "")
    why = reason or "cause not in the breakdown"
    if grew:
        amount = f"{grew['pct']:+.0f} %" if grew.get("pct") is not None else \
            f"{grew['us_per_step'] / 1000:+.1f} ms/step"
        why += f" ({grew['what']} {amount})"
    return f"{head} — {share:.0f} % of {top[0]}'s {top[1]} wait, {why}"


def _layout_dict(layout):
    return layout.as_dict()
