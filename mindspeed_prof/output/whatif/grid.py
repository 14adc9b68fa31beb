"""The table's rows placed on a grid: op (type, sequence number, stage) x step x DP rank.

Every step of every DP replica runs the same schedule, so one op name stands for the same piece
of work everywhere, and the simulation can treat all steps and replicas as one vectorised batch.
A step where some op is missing or recorded twice on some replica cannot be simulated: it is
left out and said so.
"""

import dataclasses
from typing import Dict, List, Tuple

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

    @property
    def dp_size(self) -> int:
        return int(self.start.shape[2])

    @property
    def pp_size(self) -> int:
        return int(self.stage.max()) + 1

    def index(self) -> Dict[Tuple[str, int, int], int]:
        return {(t, int(q), int(s)): i for i, (t, q, s) in
                enumerate(zip(self.optype, self.seq_id, self.stage))}


def _dense(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` without sorting a copy of ``values`` when
    they span a range not much larger than their count (op keys, step numbers)."""
    lo, hi = int(values.min()), int(values.max())
    if hi - lo > 4 * values.size + 4096:
        uniques, inverse = np.unique(values, return_inverse=True)
        return uniques, inverse.astype(np.int32)
    present = np.zeros(hi - lo + 1, dtype=bool)
    present[values - lo] = True
    lookup = np.cumsum(present, dtype=np.int32) - 1
    return np.flatnonzero(present) + lo, lookup[values - lo]


def build(table: OpTable, source: str) -> Grid:
    notes: List[str] = []
    known = np.array([name in KNOWN for name in table.optypes] + [False], dtype=bool)
    codes = np.where((table.optype >= 0) & (table.optype < len(table.optypes)), table.optype,
                     len(table.optypes))
    keep = known[codes]
    if not keep.all():
        unknown = sorted({table.optypes[c] for c in np.unique(codes[~keep])
                          if c < len(table.optypes)})
        notes.append(f"{int((~keep).sum())} rows of op types the dependency model does not know "
                     f"were left out ({', '.join(unknown[:5]) or 'bad codes'}).")
    bad = keep & ((table.dp_rank < 0) | (table.stage < 0) | (table.seq_id < 0)
                  | ~np.isfinite(table.start_ts) | ~np.isfinite(table.duration))
    if bad.any():
        notes.append(f"{int(bad.sum())} rows with a negative rank/stage/seq_id or a non-finite "
                     f"time were left out (unreadable).")
        keep &= ~bad
    everything = bool(keep.all())
    rows = None if everything else np.flatnonzero(keep)
    if rows is not None and rows.size == 0:
        raise ConfigError(f"{source}: no row of a known op type ({', '.join(KNOWN[:4])}, ...); "
                          f"nothing to simulate.")

    def kept(values: np.ndarray) -> np.ndarray:  # a view when every row is kept
        return values if rows is None else values[rows]

    stage, seq, dp = kept(table.stage), kept(table.seq_id), kept(table.dp_rank)
    n_stage, n_seq = int(stage.max()) + 1, int(seq.max()) + 1
    key = kept(codes).astype(np.int64)  # (type, seq_id, stage): in place, one array per row
    key *= n_seq
    key += seq
    key *= n_stage
    key += stage
    node_keys, node = _dense(key)
    del key
    steps, step = _dense(kept(table.step))
    n_node, n_step, n_dp = len(node_keys), len(steps), int(dp.max()) + 1
    cell = node.astype(np.int64)
    cell *= n_step
    cell += step
    cell *= n_dp
    cell += dp
    count = np.bincount(cell, minlength=n_node * n_step * n_dp).reshape(n_node, n_step, n_dp)
    complete = (count == 1).all(axis=(0, 2))
    del count
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
    # float32, as the artifact's tables: ~0.1 us at a second into the step, half the memory
    start = np.full((n_node, n_step, n_dp), np.nan, dtype=np.float32)
    start.reshape(-1)[cell] = kept(table.start_ts)
    start = start[:, complete] if not complete.all() else start
    duration = np.full((n_node, n_step, n_dp), np.nan, dtype=np.float32)
    duration.reshape(-1)[cell] = kept(table.duration)
    duration = duration[:, complete] if not complete.all() else duration
    del cell
    kept_steps = steps[complete]

    first = np.flatnonzero(step == np.flatnonzero(complete)[0])  # the reference step's rows
    first_rows = first if rows is None else rows[first]
    mc = np.full(n_node, -1, dtype=np.int64)
    gmc = np.full(n_node, -1, dtype=np.int64)
    zero = dp[first] == 0
    mc[node[first[zero]]] = table.mc[first_rows[zero]]
    gmc[node[first[zero]]] = table.gmc[first_rows[zero]]
    code_of, rest = np.divmod(node_keys, n_seq * n_stage)
    seq_of, stage_of = np.divmod(rest, n_stage)
    ranks: Dict[Tuple[int, int], int] = {}
    for d, s, r in zip(dp[first].tolist(), stage[first].tolist(),
                       table.rank[first_rows].tolist()):
        ranks.setdefault((d, s), r)
    return Grid(optype=[table.optypes[c] for c in code_of.tolist()], seq_id=seq_of,
                stage=stage_of, mc=mc, gmc=gmc, steps=kept_steps, start=start,
                duration=duration, ranks=ranks, notes=notes)
