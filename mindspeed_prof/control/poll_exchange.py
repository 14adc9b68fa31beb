"""The poll's one exchange, made of parts: every source of run-time windows adds its entries.

Every ``--profile-trigger-poll`` units every rank makes one collective (``exchange.py``): each
part (a row of ``config/polled.py``'s table that the config turns on, plus the built-in one for
the trigger file and the capture rules, ``captures.CapturePoll``) writes the entries it owns
into this rank's JSON object; one broadcast from rank 0 carries them, or one all-gather where a
part needs every rank's; then each part reads what every rank agreed and says which window, if
any, it asks for. A new source is its part (this interface) and its row: it never needs a place
in another part's entries.
"""

from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from . import exchange

Shared = List[Optional[Dict[str, Any]]]  # every rank's entries, in rank order (rank 0's only,
#                                          after a broadcast)


class PollPart(Protocol):
    """One source's share of the poll (the same on every rank, from config and agreed state)."""

    name: str  # how messages name it

    @property
    def done(self) -> bool:
        """Nothing left to poll for: it adds nothing and is asked nothing (every rank agrees)."""

    @property
    def gathers(self) -> bool:
        """It needs every rank's entries (one all-gather), not rank 0's alone (one broadcast)."""

    def contribute(self, n: int, mine: Dict[str, Any]) -> None:
        """Add this rank's entries (JSON values, under keys this part owns) at unit ``n``."""

    def agreed(self, n: int, shared: Shared) -> Any:
        """What every rank agreed at unit ``n``: the window it asks for of this rank, if any."""


class PollExchange:
    """The one collective per poll over ``parts``, in table order."""

    def __init__(self, parts: Sequence[PollPart], rank: int, world_size: int,
                 say_once: Callable[[str, str], None]) -> None:
        self.parts, self.rank, self.world_size = list(parts), rank, world_size
        self._say_once = say_once

    def share(self, n: int) -> Optional[Tuple[List[PollPart], Shared]]:
        """Every rank, at the same unit ``n``: the parts that took part and what every rank
        sent (None: every part is done, and no collective is made)."""
        taking = [part for part in self.parts if not part.done]
        if not taking:
            return None
        mine: Dict[str, Any] = {}
        for part in taking:
            part.contribute(n, mine)
        return taking, self._share(mine, any(part.gathers for part in taking))

    def _share(self, mine: Dict[str, Any], gathers: bool) -> Shared:
        if self.world_size <= 1:
            return [mine]
        import torch.distributed as dist

        from .trigger import _collective_device

        if not (dist.is_available() and dist.is_initialized()):
            self._say_once("no-dist", "torch.distributed is not initialised: the ranks cannot "
                                      "share the capture decision, so only rank 0 acts on it")
            return [mine if self.rank == 0 else {}]
        device = _collective_device(dist)
        if gathers:
            return exchange.all_gather(mine, world_size=self.world_size, device=device)
        return [exchange.broadcast(mine, rank=self.rank, device=device)]
