"""The rank-pair communication matrix of NPU captures and the links slower than their peers
(issue 36 §3), from each capture's ``communication_matrix.json`` (``read/commmatrix.py``).

Basis: per communication group, each link ``src -> dst`` in the group's own rank numbering
(HCCL's, as the file writes it), summed over every step and operator of every capture: bytes,
transit time, bandwidth = bytes / transit time. A link both ends' captures report is counted
once (the larger). LOCAL entries (a rank to itself: a copy in its own memory) are shown but
never compared.

Slow: bandwidth depends on the transport and on the size of each transfer (small ones measure
latency), so a link is compared only with its peers of the same transport and size class (the
decade of one transfer's bytes): it is *slow* when its bandwidth in a class of at least
``MIN_CLASS_BYTES`` is below ``SLOW_FRACTION`` of the median of that class's links, with at
least ``MIN_PEERS`` links in the class. Groups are compared the same way, group against group.
"""

import statistics
from typing import Any, Dict, List, Optional, Tuple

SLOW_FRACTION = 0.5  # below half the peers' median bandwidth: the link is flagged
MIN_PEERS = 3  # fewer links of a transport and size class: no peer to compare with
MIN_CLASS_BYTES = 1e6  # smaller transfers measure latency, not the link
MAX_PAIRS = 4096  # links listed in summary --json, most bytes first
MAX_FLAGGED = 256
BASIS = ("per communication group, each link src -> dst in the group's own rank numbering "
         "(as communication_matrix.json writes it; the job's ranks in `ranks` where every "
         "member's capture was read), summed over steps and operators: bytes, "
         "transit_us, bandwidth_gbps = bytes / transit time; a link is slow when its bandwidth "
         f"is below {SLOW_FRACTION:g} x the median of the links of the same transport and "
         f"size class (decade of one transfer's bytes, {MIN_CLASS_BYTES / 1e6:g} MB and up), "
         f"with at least {MIN_PEERS} such links; LOCAL (a rank to itself) is never compared")


def _class_name(decade: int) -> str:
    units = ((9, "GB"), (6, "MB"), (3, "KB"), (0, "B"))
    power, unit = next(((p, u) for p, u in units if decade >= p), (0, "B"))
    low = 10 ** (decade - power)
    return f"{low:g}-{low * 10:g} {unit}"


def _gbps(nbytes: float, us: float) -> Optional[float]:
    return nbytes / (us * 1e3) if us > 0 else None


def matrix(results: List[Tuple[Optional[int], str, Dict[str, Any]]], layout=None) \
        -> Optional[Dict[str, Any]]:
    """``results``: (rank, capture's name, ``commmatrix.read``'s answer) per NPU capture; None
    when no capture has the file."""
    read = [(rank, rel, r) for rank, rel, r in results if r.get("source")]
    if not read:
        return None
    notes = [f"{rel}: {r['error']}" for _, rel, r in read if r.get("error")]
    unreadable = sum(r["unreadable"] for _, _, r in read)
    if unreadable:
        notes.append(f"{unreadable} link entr(ies) of communication_matrix.json with a size, "
                     "time or transport that is no finite number: left out")
    cells: Dict[tuple, list] = {}
    members: Dict[str, set] = {}
    for rank, _, r in read:
        for group, src, dst, transport, decade, nbytes, us, count in r["rows"]:
            key = (group, src, dst, transport, decade)
            if key not in cells or cells[key][0] < nbytes:
                cells[key] = [nbytes, us, count]
            if rank is not None:
                members.setdefault(group, set()).add(rank)
    slow = _slow_links(cells)
    groups = _groups(cells, members, layout, slow)
    flagged = [{"group": groups[1][g], "raw_group": g, "src": s, "dst": d,
                "src_rank": _global(groups[2][g], s), "dst_rank": _global(groups[2][g], d),
                "transport": t,
                "size_class": _class_name(c), "bandwidth_gbps": bw, "peers_median_gbps": med,
                "peers": n, "ratio": bw / med}
               for (g, s, d, t, c), (bw, med, n) in sorted(slow.items(),
                                                          key=lambda kv: kv[1][0] / kv[1][1])]
    slow_groups = _slow_groups(cells, groups[1])
    listed = sum(len(g["pairs"]) for g in groups[0])
    if listed > MAX_PAIRS:
        notes.append(f"{listed} links: the {MAX_PAIRS} that moved the most are listed")
        _trim(groups[0])
    return {"basis": BASIS, "source": "communication_matrix.json", "captures": len(read),
            "slow_fraction": SLOW_FRACTION, "min_peers": MIN_PEERS,
            "min_class_bytes": MIN_CLASS_BYTES, "groups": groups[0],
            "slow_links": flagged[:MAX_FLAGGED], "slow_links_total": len(flagged),
            "slow_groups": slow_groups, "unreadable": unreadable, "notes": notes}


def _slow_links(cells):
    """(group, src, dst, transport, class) -> (bandwidth, peers' median, peers) of slow ones."""
    classes: Dict[tuple, Dict[tuple, float]] = {}
    for (g, s, d, t, c), (nbytes, us, _) in cells.items():
        bw = _gbps(nbytes, us)
        if t != "LOCAL" and s != d and bw is not None and 10 ** c >= MIN_CLASS_BYTES:
            classes.setdefault((t, c), {})[(g, s, d)] = bw
    slow = {}
    for (t, c), links in classes.items():
        if len(links) < MIN_PEERS:
            continue
        median = statistics.median(links.values())
        for (g, s, d), bw in links.items():
            if bw < SLOW_FRACTION * median:
                slow[(g, s, d, t, c)] = (bw, median, len(links))
    return slow


def _slow_groups(cells, names):
    """Groups whose links of one transport and size class are together below half their peer
    groups' median (the same rule, group against group)."""
    sums: Dict[tuple, Dict[str, list]] = {}
    for (g, s, d, t, c), (nbytes, us, _) in cells.items():
        if t != "LOCAL" and s != d and us > 0 and 10 ** c >= MIN_CLASS_BYTES:
            row = sums.setdefault((t, c), {}).setdefault(g, [0.0, 0.0])
            row[0] += nbytes
            row[1] += us
    found = []
    for (t, c), by_group in sums.items():
        if len(by_group) < MIN_PEERS:
            continue
        bws = {g: _gbps(b, us) for g, (b, us) in by_group.items()}
        median = statistics.median(bws.values())
        found += [{"group": names[g], "raw_group": g, "transport": t,
                   "size_class": _class_name(c), "bandwidth_gbps": bw,
                   "peers_median_gbps": median, "peers": len(bws)}
                  for g, bw in bws.items() if bw < SLOW_FRACTION * median]
    return found[:MAX_FLAGGED]


def _groups(cells, members, layout, slow):
    """Per group its links (every class summed) with their transports; and group names."""
    by_group: Dict[str, Dict[tuple, dict]] = {}
    for (g, s, d, t, c), (nbytes, us, count) in cells.items():
        link = by_group.setdefault(g, {}).setdefault((s, d), {
            "src": s, "dst": d, "transports": [], "bytes": 0.0, "transit_us": 0.0,
            "transfers": 0, "slow": False})
        if t not in link["transports"]:
            link["transports"].append(t)
        link["bytes"] += nbytes
        link["transit_us"] += us
        link["transfers"] += count
        link["slow"] = link["slow"] or (g, s, d, t, c) in slow
    names: Dict[str, str] = {}
    ranks: Dict[str, Optional[List[int]]] = {}
    rows = []
    for g, links in by_group.items():
        size = 1 + max(max(s, d) for s, d in links)
        found = members.get(g, set())
        complete = len(found) == size  # every member's capture holds it: ranks are known
        names[g] = layout.group_name(found) if layout is not None and layout.known \
            and complete else (f"hccl:{g}" if g else "(no group in the name)")
        ranks[g] = sorted(found) if complete else None
        pairs = sorted(links.values(), key=lambda p: (p["src"], p["dst"]))
        for p in pairs:
            p["transports"].sort()
            p["bandwidth_gbps"] = _gbps(p["bytes"], p["transit_us"])
        moved = [p for p in pairs if p["src"] != p["dst"]]
        total_bytes = sum(p["bytes"] for p in moved)
        rows.append({"group": names[g], "raw_group": g, "size": size, "ranks": ranks[g],
                     "captures": len(found), "bytes": total_bytes,
                     "bandwidth_gbps": _gbps(total_bytes, sum(p["transit_us"] for p in moved)),
                     "slow_links": sum(p["slow"] for p in pairs), "pairs": pairs})
    rows.sort(key=lambda r: -r["bytes"])
    return rows, names, ranks


def _global(ranks: Optional[List[int]], index: int) -> Optional[int]:
    """The job's rank of the group's rank ``index``: HCCL numbers a group's ranks in the order
    of its rank list, ascending in Megatron's groups; None unless every member was read."""
    return ranks[index] if ranks is not None and index < len(ranks) else None


def _trim(groups):
    """Keep the ``MAX_PAIRS`` links that moved the most (slow ones always kept)."""
    every = sorted(((p["slow"], p["bytes"], i, j) for i, g in enumerate(groups)
                    for j, p in enumerate(g["pairs"])), reverse=True)
    keep = {(i, j) for _, _, i, j in every[:MAX_PAIRS]}
    for i, g in enumerate(groups):
        g["pairs_total"] = len(g["pairs"])
        g["pairs"] = [p for j, p in enumerate(g["pairs"]) if (i, j) in keep]
