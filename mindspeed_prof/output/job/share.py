"""Which ranks one node of a checking job takes: ``--node I/N`` or ``--node auto``.

The ranks are those the manifests expect plus those found (or ``--ranks``), sorted; node ``I``
of ``N`` takes the ``I``-th of ``N`` contiguous runs of them, as a launcher numbers ranks node
by node (8 per node: node 0 takes 0-7). Every node lists the same save path, so every node
computes the same split; captures whose rank is unknown go to node 0 only. ``auto`` reads the
launcher's numbering of the checking job itself (one task per node): srun's ``SLURM_PROCID`` /
``SLURM_NTASKS``, else torchrun's ``RANK`` / ``WORLD_SIZE``.
"""

import os
from dataclasses import dataclass
from typing import Iterable, List, Mapping, Optional

from ...errors import ConfigError

LAUNCHERS = (("SLURM_PROCID", "SLURM_NTASKS"), ("RANK", "WORLD_SIZE"))


@dataclass(frozen=True)
class Share:
    index: int
    count: int

    @property
    def takes_unranked(self) -> bool:
        return self.index == 0

    def pick(self, ranks: Iterable[int], found: Iterable[int] = ()) -> List[int]:
        ordered = sorted(set(ranks))
        lo, hi = (len(ordered) * self.index) // self.count, \
            (len(ordered) * (self.index + 1)) // self.count
        return ordered[lo:hi]

    def as_dict(self):
        return {"index": self.index, "count": self.count}


@dataclass(frozen=True)
class Local:
    """A node whose save path holds only its own ranks (a node-local disk): it covers the
    ranks it found; the ranks the manifests expect and nobody found are the merge's to call
    missing."""

    index: int = 0
    count: int = 1
    takes_unranked: bool = True

    def pick(self, ranks: Iterable[int], found: Iterable[int] = ()) -> List[int]:
        return sorted(set(found))

    def as_dict(self):
        return None


def parse_share(text: Optional[str], environ: Mapping[str, str] = os.environ) -> Optional[Share]:
    """``--node`` -> Share (None when not given); ConfigError naming the fix."""
    if text is None:
        return None
    if text == "auto":
        for index_name, count_name in LAUNCHERS:
            if index_name in environ and count_name in environ:
                return _share(environ[index_name], environ[count_name],
                              f"--node auto ({index_name}={environ[index_name]}, "
                              f"{count_name}={environ[count_name]})")
        raise ConfigError("--node auto: no SLURM_PROCID/SLURM_NTASKS (srun) or RANK/WORLD_SIZE "
                          "(torchrun) in the environment; run one task per node under the "
                          "launcher, or give --node I/N (e.g. --node 0/64).")
    index, sep, count = text.partition("/")
    if not sep:
        raise ConfigError(f"--node {text}: give I/N, this node's index and the number of "
                          f"nodes (e.g. --node 3/64), or auto.")
    return _share(index, count, f"--node {text}")


def _share(index, count, where):
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise ConfigError(f"{where}: I and N must be integers (e.g. --node 3/64).") from None
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"{where}: need 0 <= I < N (node indices count from 0), e.g. "
                          f"--node 0/{max(n, 1)}.")
    return Share(i, n)
