"""Ranks and groups in Megatron's terms: a rank's place (``tp1 pp3 dp9``) and a group's name
(``dp9``, ``tp0``), from the parallel layout the manifests record, never from a hash id.

Megatron orders ranks ``tp-cp-ep-dp-pp`` by default (tensor parallel fastest): rank =
tp + TP·(cp + CP·(dp + DP·pp)); with ``--use-tp-pp-dp-mapping`` ``tp-pp-dp`` (consecutive
TP groups are in different PP stages), which the manifest records as ``order``. A group of
one kind is the ranks that share every other coordinate; groups of a kind are numbered in the
order of their lowest rank. A set of ranks that is no such group is named by its ranks (``world`` when it is every rank).
"""

from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

KINDS = ("dp", "tp", "pp", "cp")  # a set that is several groups at once takes the first
DEFAULT_ORDER = ("tp", "cp", "dp", "pp")  # fastest first; ep is not a coordinate here
ORDERS: Dict[str, Tuple[str, ...]] = {"tp-cp-ep-dp-pp": DEFAULT_ORDER,
                                      "tp-pp-dp": ("tp", "pp", "dp", "cp"),
                                      "tp-cp-ep-pp-dp": ("tp", "cp", "pp", "dp")}
_SIZE_KEYS = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
              "dp": "data_parallel_size", "cp": "context_parallel_size"}


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    world: Optional[int] = None
    known: bool = False  # from a manifest's parallel layout
    order: Tuple[str, ...] = DEFAULT_ORDER  # the coordinates, fastest first

    @classmethod
    def from_manifests(cls, parallel: Dict[int, dict]) -> "Layout":
        """The layout the manifests agree on ({rank: manifest's ``parallel``}); unknown when
        none says it or they disagree, or its sizes do not multiply to its world size."""
        seen: Set[Tuple[int, int, int, int, Optional[int], Tuple[str, ...]]] = set()
        for data in parallel.values():
            if not isinstance(data, dict):
                continue
            sizes: List[int] = []
            for kind in ("tp", "cp", "dp", "pp"):
                value = data.get(_SIZE_KEYS[kind], 1)
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    return cls()
                sizes.append(value)
            world = data.get("world_size")
            order = ORDERS.get(str(data.get("order", "tp-cp-ep-dp-pp")))
            if order is None:  # an order we cannot place ranks by: no layout, never a guess
                return cls()
            seen.add((sizes[0], sizes[1], sizes[2], sizes[3],
                      world if isinstance(world, int) else None, order))
        if len(seen) != 1:
            return cls()
        tp, cp, dp, pp, world, order = seen.pop()
        if world is not None and tp * cp * dp * pp != world:
            return cls()
        return cls(tp, cp, dp, pp, tp * cp * dp * pp, True, order)

    def as_dict(self) -> Optional[Dict[str, object]]:
        """summary --json's ``waits.layout`` (None when unknown)."""
        if not self.known:
            return None
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "cp": self.cp,
                "world": self.world, "order": self.order_name}

    @property
    def order_name(self) -> str:
        return next(name for name, order in ORDERS.items() if order == self.order)

    def coords(self, rank: int) -> Dict[str, int]:
        found, rest = {}, rank
        for kind in self.order:
            size = getattr(self, kind)
            found[kind], rest = rest % size, rest // size
        return found

    def rank_of(self, coords: Dict[str, int]) -> int:
        rank = 0
        for kind in reversed(self.order):
            rank = rank * getattr(self, kind) + coords[kind]
        return rank

    def place(self, rank: int) -> Optional[str]:
        """``tp1 pp3 dp9`` (``cp`` too when the layout has it); None when unknown."""
        if not self.known or self.world is None or not 0 <= rank < self.world:
            return None
        c = self.coords(rank)
        return " ".join(f"{k}{c[k]}" for k in ("tp", "pp", "dp", "cp") if k != "cp" or self.cp > 1)

    def members(self, kind: str, rank: int) -> FrozenSet[int]:
        """The ranks of ``rank``'s group of ``kind``."""
        return self.group_of((kind,), rank)

    def group_of(self, kinds: Tuple[str, ...], rank: int) -> FrozenSet[int]:
        """The ranks that differ from ``rank`` only in ``kinds`` (``("dp", "cp")``: the
        data-parallel group with context parallelism, as Megatron reduces gradients over)."""
        c = self.coords(rank)
        found = [c]
        for kind in kinds:
            found = [{**x, kind: i} for x in found for i in range(getattr(self, kind))]
        return frozenset(self.rank_of(x) for x in found)

    def index(self, kind: str, rank: int) -> int:
        """The number of ``rank``'s group of ``kind`` among that kind's groups by lowest rank:
        its other coordinates as one number, in the layout's order."""
        c = self.coords(rank)
        number = 0
        for other in reversed(self.order):
            if other != kind:
                number = number * getattr(self, other) + c[other]
        return number

    def group_name(self, ranks: Iterable[int]) -> str:
        """``dp3`` / ``tp0`` ... for a group of the layout, else the ranks themselves."""
        members = frozenset(ranks)
        first = min(members)
        if self.known and self.world is not None and max(members) < self.world:
            for kind in KINDS:
                if getattr(self, kind) > 1 and self.members(kind, first) == members:
                    return f"{kind}{self.index(kind, first)}"
            if len(members) == self.world:
                return "world"
        return "ranks " + _span(sorted(members))


def _span(ranks) -> str:
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    shown = ",".join(str(r) for r in ranks[:8])
    return shown + (f",… ({len(ranks)} ranks)" if len(ranks) > 8 else "")
