"""The table's rows placed on a grid: op (type, sequence number, stage) x step x DP rank.

Every step of every DP replica runs the same schedule, so one op name stands for the same piece
of work everywhere, and the simulation can treat all steps and replicas as one vectorised batch.
A step where some op is missing or recorded twice on some replica cannot be simulated: it is
left out and said so.
"""

import dataclasses
from typing import Callable, Dict, Iterable, List, Set, Tuple, Union

import numpy as np

from ...errors import ConfigError
from .schema import KNOWN
from .table import OpTable


@dataclasses.dataclass
class Grid:
    """``start``/``duration``: seconds, shape (ops, steps, dp); per op its type and place."""

    optype: List[str]        # per op
    seq_id: np.ndarray       # per op
    stage: np.ndarray        # per op
    mc: np.ndarray           # per op (as in the first step of DP replica 0)
    gmc: np.ndarray          # per op
    steps: np.ndarray        # the step ids kept, ascending
    start: np.ndarray
    duration: np.ndarray
    ranks: Dict[Tuple[int, int], int]   # (dp_rank, stage) -> global rank
    notes: List[str]
    rows: int = 0                        # rows read, all of them

    @property
    def dp_size(self) -> int:
        return int(self.start.shape[2])

    @property
    def pp_size(self) -> int:
        return int(self.stage.max()) + 1

    def index(self) -> Dict[Tuple[str, int, int], int]:
        return {(t, int(q), int(s)): i for i, (t, q, s) in
                enumerate(zip(self.optype, self.seq_id, self.stage))}


Batches = Callable[[], Iterable[OpTable]]  # the table in pieces, read again on each call
_SEQ_BITS, _STAGE_BITS = 24, 16  # an op's key: (type, seq_id, stage) packed in one int64


@dataclasses.dataclass
class _Rows:
    """One piece's rows of known types and readable values, with their op keys."""

    table: OpTable
    keep: np.ndarray
    key: np.ndarray
    unknown: Set[str]
    bad: int


def _rows(table: OpTable, source: str) -> _Rows:
    lookup = np.array([KNOWN.index(n) if n in KNOWN else -1 for n in table.optypes] + [-1])
    inside = (table.optype >= 0) & (table.optype < len(table.optypes))
    codes = lookup[np.where(inside, table.optype, len(table.optypes))]
    keep = codes >= 0
    unknown = {table.optypes[c] for c in np.unique(table.optype[inside & ~keep]).tolist()}
    bad = keep & ((table.dp_rank < 0) | (table.stage < 0) | (table.seq_id < 0)
                  | ~np.isfinite(table.start_ts) | ~np.isfinite(table.duration))
    keep &= ~bad
    seq, stage = table.seq_id[keep].astype(np.int64), table.stage[keep].astype(np.int64)
    if seq.size and (seq.max() >= 1 << _SEQ_BITS or stage.max() >= 1 << _STAGE_BITS):
        raise ConfigError(f"{source}: a seq_id of {int(seq.max())} or a stage of "
                          f"{int(stage.max())}: not a schedule the model knows (at most "
                          f"{1 << _SEQ_BITS} ops of a type per step, {1 << _STAGE_BITS} stages).")
    key = codes[keep].astype(np.int64) << (_SEQ_BITS + _STAGE_BITS)
    key |= seq << _STAGE_BITS
    key |= stage
    return _Rows(table, keep, key, unknown, int(bad.sum()))


def build(pieces: Union[OpTable, Batches], source: str) -> Grid:
    """The grid of ``pieces`` (one table, or a callable giving it in pieces: read twice, once
    for the ops and steps there are, once to place the rows), in memory for the grid alone."""
    batches: Batches = (lambda: [pieces]) if isinstance(pieces, OpTable) else pieces
    node_keys = steps = np.zeros(0, dtype=np.int64)
    n_dp, rows, unknown, bad = 0, 0, set(), 0
    for table in batches():
        found = _rows(table, source)
        rows += len(table)
        unknown |= found.unknown
        bad += found.bad
        if found.key.size:
            node_keys = np.union1d(node_keys, np.unique(found.key))
            steps = np.union1d(steps, np.unique(table.step[found.keep]))
            n_dp = max(n_dp, int(table.dp_rank[found.keep].max()) + 1)
    notes: List[str] = []
    if unknown:
        notes.append(f"rows of op types the dependency model does not know were left out "
                     f"({', '.join(sorted(unknown)[:5])}).")
    if bad:
        notes.append(f"{bad} rows with a negative rank/stage/seq_id or a non-finite time were "
                     f"left out (unreadable).")
    if not node_keys.size:
        raise ConfigError(f"{source}: no row of a known op type ({', '.join(KNOWN[:4])}, ...); "
                          f"nothing to simulate.")
    n_node, n_step = len(node_keys), len(steps)
    # float32, as the artifact's tables: ~0.1 us at a second into the step, half the memory
    start = np.full((n_node, n_step, n_dp), np.nan, dtype=np.float32)
    duration = np.full((n_node, n_step, n_dp), np.nan, dtype=np.float32)
    twice = np.zeros((n_node, n_step, n_dp), dtype=bool)
    mc = np.full((n_node, n_step), -1, dtype=np.int64)
    gmc = np.full((n_node, n_step), -1, dtype=np.int64)
    ranks: Dict[Tuple[int, int], int] = {}
    flat_start, flat_duration, flat_twice = start.reshape(-1), duration.reshape(-1), \
        twice.reshape(-1)
    for table in batches():
        found = _rows(table, source)
        keep = found.keep
        node = np.searchsorted(node_keys, found.key)
        step = np.searchsorted(steps, table.step[keep])
        dp = table.dp_rank[keep].astype(np.int64)
        cell = (node * n_step + step) * n_dp + dp
        flat_twice[cell[~np.isnan(flat_start[cell])]] = True  # already placed by a piece before
        placed, count = np.unique(cell, return_counts=True)
        flat_twice[placed[count > 1]] = True
        flat_start[cell] = table.start_ts[keep]
        flat_duration[cell] = table.duration[keep]
        first = dp == 0
        mc[node[first], step[first]] = table.mc[keep][first]
        gmc[node[first], step[first]] = table.gmc[keep][first]
        stage = table.stage[keep].astype(np.int64)
        pairs, where = np.unique(dp << _STAGE_BITS | stage, return_index=True)
        for pair, rank in zip(pairs.tolist(), table.rank[keep][where].tolist()):
            ranks.setdefault((pair >> _STAGE_BITS, pair & ((1 << _STAGE_BITS) - 1)), rank)
        del found, node, step, dp, cell, placed, count
    complete = ~(np.isnan(start).any(axis=(0, 2)) | twice.any(axis=(0, 2)))
    del twice
    if not complete.all():
        dropped = steps[~complete]
        notes.append(f"{len(dropped)} of {n_step} steps left out: some op is missing or "
                     f"recorded twice on some DP rank (steps "
                     f"{', '.join(str(int(s)) for s in dropped[:8])}"
                     f"{', ...' if len(dropped) > 8 else ''}).")
    if not complete.any():
        raise ConfigError(f"{source}: no step has every op of the schedule once on every DP rank "
                          f"0..{n_dp - 1}; the table is incomplete (record whole steps on every "
                          f"rank of each pipeline).")
    if not complete.all():
        start, duration = start[:, complete], duration[:, complete]
    reference = int(np.flatnonzero(complete)[0])
    code_of = node_keys >> (_SEQ_BITS + _STAGE_BITS)
    return Grid(optype=[KNOWN[c] for c in code_of.tolist()],
                seq_id=(node_keys >> _STAGE_BITS) & ((1 << _SEQ_BITS) - 1),
                stage=node_keys & ((1 << _STAGE_BITS) - 1), mc=mc[:, reference],
                gmc=gmc[:, reference], steps=steps[complete], start=start, duration=duration,
                ranks=ranks, notes=notes, rows=rows)
