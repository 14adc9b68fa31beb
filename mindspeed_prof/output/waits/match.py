"""One collective across the ranks of its group: matched by group, kind and order in the step.

Every rank of a group calls its collectives in the same order, so the k-th ``all_reduce`` of
group G in step N is one collective on each member. Where the trace names no group (gloo on
the CPU), the key is the step, the kind and the order alone, and the ends decide: members of
one collective leave it together, so the ranks of a key are one collective when none left
it before the last arrived; else they split where their ends lie more than the tolerance apart
(a group of one on each rank, two groups of one kind: TP pairs), and a rank left alone in its
part was in no shared collective (counted, never matched).

Where the layout is known, a key with no group is placed in one by what the capture knows.
The range it ran in (``scope:tp`` / ``scope:dp`` / ``scope:pp``, ``summary/collectives.py``)
names the kind: its ranks are split into the layout's groups of that kind. Else the ranks of
the key could be several groupings (in TP=2 x DP=2 the four ranks of one call are one world
collective, two TP pairs or two DP pairs): one that is the only grouping their layout allows
is taken; else the ends split them as above (ranks that left apart were in no collective
together), and each part is placed where the layout's groups make it up one way only (four
ranks leaving together may be one world collective or two pairs in lockstep: the ends cannot
tell; a TP pair that left 0.5 s after the rest is that TP group, the rest the other TP
groups). What stays ambiguous is not matched: no rank is named for it, and the calls are
counted (``unplaced``).
"""

from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from ..summary.collectives import SCOPE
from .layout import Layout

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


# the coordinates a scope's group spans (Megatron reduces gradients over DP x CP)
SCOPE_KINDS = {"tp": ("tp",), "dp": ("dp", "cp"), "pp": ("pp",)}
# the groups a collective named by no group and no range may be over: TP, DP (with CP), CP,
# PP, model parallel (TP x PP), every rank
CANDIDATES = (("tp",), ("dp",), ("dp", "cp"), ("cp",), ("pp",), ("tp", "pp"),
              ("tp", "cp", "dp", "pp"))
Partition = FrozenSet[FrozenSet[int]]


def instances(found: Dict[Key, Dict[int, tuple]], offsets: Dict[int, float],
              tolerance_us: float, layout: Optional[Layout] = None
              ) -> Tuple[List[Instance], int, int]:
    """The matched collectives (two members or more), how many calls matched none and how
    many calls could not be placed in a group (see the module docstring)."""
    matched: List[Instance] = []
    alone = unplaced = 0
    world = layout.world if layout is not None and layout.known and layout.world else 0
    for (step, group, name, _), members in found.items():
        placing = layout is not None and max(members) < world
        if layout is not None and placing and group.startswith(SCOPE) \
                and group[len(SCOPE):] in SCOPE_KINDS:
            kinds = SCOPE_KINDS[group[len(SCOPE):]]
            groups: Dict[FrozenSet[int], List[int]] = {}
            for rank in members:
                groups.setdefault(layout.group_of(kinds, rank), []).append(rank)
            parts = [p for part in groups.values() for p in _split(part, members, offsets,
                                                                    tolerance_us)]
        elif layout is not None and placing and (not group or group.startswith(SCOPE)):
            placed, left = _placed(members, offsets, tolerance_us, layout)
            unplaced += left
            parts = [p for part in placed for p in _split(sorted(part), members, offsets,
                                                          tolerance_us)]
        else:
            parts = _split(list(members), members, offsets, tolerance_us)
        for split in parts:
            part = _together(split, members, offsets)
            # the calls of this part in no collective with the others: dropped, or left alone
            alone += len(split) - len(part) if len(part) >= 2 else len(split)
            if len(part) < 2:
                continue
            sizes = {members[r][2] for r in part}
            matched.append(Instance(step, name, group, sizes.pop() if len(sizes) == 1 else None,
                                    part, [members[r][0] + offsets.get(r, 0.0) for r in part],
                                    [members[r][1] + offsets.get(r, 0.0) for r in part],
                                    [members[r][3] for r in part]))
    return matched, alone, unplaced


def _split(part, members, offsets, tolerance_us) -> List[List[int]]:
    """One group's ranks: one collective when all were in it together (however far apart a
    loaded host's threads let them finish), else split where their ends lie apart."""
    whole = _together(part, members, offsets)
    if len(whole) == len(part):
        return [whole]
    return list(_parts({r: members[r] for r in part}, offsets, tolerance_us))


def _placed(members, offsets, tolerance_us, layout) -> Tuple[List[FrozenSet[int]], int]:
    """The groups of a key named by no group (module docstring), and how many of its calls
    were left unplaced (ambiguous)."""
    whole = _options(set(members), layout)
    if len(whole) == 1:
        return sorted(whole.pop(), key=min), 0
    placed: List[FrozenSet[int]] = []
    left = 0
    for part in _split(list(members), members, offsets, tolerance_us):
        # ranks that left apart from the others were in no collective with them: each part
        # is placed when the layout's groups fit it one way only
        options = _options(set(part), layout)
        if len(options) == 1:
            placed.extend(sorted(options.pop(), key=min))
        else:
            left += len(part)
    return placed, left


def _options(ranks, layout) -> Set[Partition]:
    """The ways the layout's groups of one kind make up ``ranks`` exactly."""
    options: Set[Partition] = set()
    for kinds in CANDIDATES:
        if all(getattr(layout, kind) == 1 for kind in kinds):
            continue
        found = _partition(kinds, ranks, layout)
        if found is not None:
            options.add(found)
    return options


def _partition(kinds, ranks, layout) -> Optional[Partition]:
    """``ranks`` as whole groups of ``kinds``; None when they are not."""
    groups = set()
    left = set(ranks)
    while left:
        group = layout.group_of(kinds, min(left))
        if not group <= left:
            return None
        groups.add(group)
        left -= group
    return frozenset(groups)


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
