"""One collective across the ranks of its group: matched by group, kind and order in the step.

Every rank of a group calls its collectives in the same order, so the k-th ``all_reduce`` of
group G in step N is one collective on each member. Where the trace names no group (gloo on
the CPU), the key is the step, the kind and the order alone, and the ends decide: members of
one collective leave it together, so the ranks of a key are one collective when none left
it before the last arrived; else they split where their ends lie more than the tolerance apart
(a group of one on each rank, two groups of one kind: TP pairs), and a rank left alone in its
part was in no shared collective (counted, never matched).
"""

from dataclasses import dataclass
from typing import Dict, Iterator, List, Tuple

# clocks aligned on ends agree to this; a later arrival came after a member had left
ARRIVAL_SLACK_US = 50.0
Key = Tuple[int, str, str, int]  # step, group, name, order within the step


@dataclass
class Instance:
    step: int
    name: str
    group: str  # what the trace said of the group ("" when nothing)
    size: object  # bytes, or None
    ranks: List[int]
    arrivals: List[float]  # aligned
    ends: List[float]
    leads: List[float]  # each member's own time since its previous collective (or step start)


def keyed(collectives: Dict[int, list], spans: Dict[int, dict]) -> Dict[Key, Dict[int, tuple]]:
    """{key: {rank: (start, end, bytes, lead)}} on each rank's own clock; ``lead``: the time
    since the rank's previous collective of the step ended (else since the step began)."""
    found: Dict[Key, Dict[int, tuple]] = {}
    for rank, items in collectives.items():
        order: Dict[Tuple[int, str, str], int] = {}
        previous: Dict[int, float] = {}
        steps = spans.get(rank, {})
        for step, name, group, size, start, end in items:
            head = (step, group, name)
            n = order.get(head, 0)
            order[head] = n + 1
            since = previous.get(step, steps[step][0] if step in steps else start)
            previous[step] = max(end, previous.get(step, end))
            found.setdefault((step, group, name, n), {})[rank] = (start, end, size,
                                                                  max(start - since, 0.0))
    return found


def instances(found: Dict[Key, Dict[int, tuple]],
              offsets: Dict[int, float], tolerance_us: float) -> Tuple[List[Instance], int]:
    """The matched collectives (two members or more) and how many calls matched none."""
    matched, alone = [], 0
    for (step, group, name, _), members in found.items():
        whole = _together(list(members), members, offsets)
        # all of them in it together (however far apart a loaded host's threads let them
        # finish): one collective; else split where their ends lie apart
        parts = [whole] if len(whole) == len(members) else _parts(members, offsets,
                                                                   tolerance_us)
        for part in parts:
            part = _together(part, members, offsets)
            alone += len(members) - len(part) if len(part) >= 2 else 0
            if len(part) < 2:
                alone += len(part)
                continue
            sizes = {members[r][2] for r in part}
            matched.append(Instance(step, name, group, sizes.pop() if len(sizes) == 1 else None,
                                    part, [members[r][0] + offsets.get(r, 0.0) for r in part],
                                    [members[r][1] + offsets.get(r, 0.0) for r in part],
                                    [members[r][3] for r in part]))
    return matched, alone


def _together(part, members, offsets):
    """The members that were in the collective together: none left it before the last one
    arrived (a rank arriving after another left was in a different one: a group of one on
    each rank). The latest arrivals are dropped until that holds."""
    part = sorted(part, key=lambda r: members[r][0] + offsets.get(r, 0.0))
    while len(part) >= 2:
        first_end = min(members[r][1] + offsets.get(r, 0.0) for r in part)
        if members[part[-1]][0] + offsets.get(part[-1], 0.0) <= first_end + ARRIVAL_SLACK_US:
            break
        part.pop()
    return part


def _parts(members, offsets, tolerance_us) -> Iterator[List[int]]:
    """The ranks of one key, split where their aligned ends are more than the tolerance apart."""
    ordered = sorted(members, key=lambda r: members[r][1] + offsets.get(r, 0.0))
    part: List[int] = []
    last = None
    for rank in ordered:
        end = members[rank][1] + offsets.get(rank, 0.0)
        if part and end - last > tolerance_us:
            yield part
            part = []
        part.append(rank)
        last = end
    if part:
        yield part
