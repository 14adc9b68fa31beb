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
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        raise ConfigError(f"{source}: no row of a known op type ({', '.join(KNOWN[:4])}, ...); "
                          f"nothing to simulate.")
    codes, stage, seq = codes[rows], table.stage[rows], table.seq_id[rows]
    dp = table.dp_rank[rows]
    n_stage, n_seq = int(stage.max()) + 1, int(seq.max()) + 1
    key = (codes * n_seq + seq) * n_stage + stage
    node_keys, node = np.unique(key, return_inverse=True)
    steps, step = np.unique(table.step[rows], return_inverse=True)
    n_node, n_step, n_dp = len(node_keys), len(steps), int(dp.max()) + 1
    cell = (node * n_step + step) * n_dp + dp
    count = np.bincount(cell, minlength=n_node * n_step * n_dp).reshape(n_node, n_step, n_dp)
    complete = (count == 1).all(axis=(0, 2))
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
    start = np.full((n_node, n_step, n_dp), np.nan)
    duration = np.full((n_node, n_step, n_dp), np.nan)
    start.reshape(-1)[cell] = table.start_ts[rows]
    duration.reshape(-1)[cell] = table.duration[rows]
    start, duration = start[:, complete], duration[:, complete]
    kept_steps = steps[complete]

    first = np.flatnonzero(step == np.flatnonzero(complete)[0])
    first = first[dp[first] == 0]
    mc = np.full(n_node, -1, dtype=np.int64)
    gmc = np.full(n_node, -1, dtype=np.int64)
    mc[node[first]] = table.mc[rows[first]]
    gmc[node[first]] = table.gmc[rows[first]]
    code_of, rest = np.divmod(node_keys, n_seq * n_stage)
    seq_of, stage_of = np.divmod(rest, n_stage)
    ranks: Dict[Tuple[int, int], int] = {}
    place = np.unique(dp * n_stage + stage, return_index=True)[1]
    for d, s, r in zip(dp[place].tolist(), stage[place].tolist(), table.rank[rows][place].tolist()):
        ranks[(d, s)] = r
    return Grid(optype=[table.optypes[c] for c in code_of.tolist()], seq_id=seq_of,
                stage=stage_of, mc=mc, gmc=gmc, steps=kept_steps, start=start,
                duration=duration, ranks=ranks, notes=notes)
