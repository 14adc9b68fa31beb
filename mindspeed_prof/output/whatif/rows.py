"""The schedule marks of the kept ranks, turned into the paper's per-op rows.

- ``forward-compute`` / ``backward-compute``: one row each, with chunk (``mc``), its place in
  the model (``gmc = chunk x stages + stage``) and microbatch.
- A send or receive: one row. Megatron's combined exchanges (``forward-send-backward-recv``
  and the like: one call that sends and receives) become one row per direction, each spanning
  the call, as the artifact's traces record them separately.
- ``grads-reduce-scatter`` (``grads-all-reduce`` without the distributed optimizer: the same
  place in the step), ``params-all-gather`` when it runs before the step's first forward (an
  all-gather issued at the end of a step feeds the next one, outside this step's model), and
  ``optimizer``. Without data parallelism they are left out, as the analyzer's model has them
  only with DP.
- What the dependency model names but no mark records (``gc``, the layernorm and embedding
  gradient all-reduces, the gradient clipping, a reduce-scatter) gets a zero-length row where
  it would run, at the moment its last participant arrives, so that the published analyzer,
  which needs every op of its model, runs on the table unchanged, and its transfer is zero.
"""

import dataclasses
from typing import Dict, List, Optional, Tuple

from ...config import schedule_marks as sm
from . import schema as S

_SPLIT = {
    sm.FORWARD_SEND_BACKWARD_RECV: (S.FORWARD_SEND, S.BACKWARD_RECV),
    sm.BACKWARD_SEND_FORWARD_RECV: (S.BACKWARD_SEND, S.FORWARD_RECV),
    sm.FORWARD_SEND_FORWARD_RECV: (S.FORWARD_SEND, S.FORWARD_RECV),
    sm.BACKWARD_SEND_BACKWARD_RECV: (S.BACKWARD_SEND, S.BACKWARD_RECV),
    sm.FORWARD_BACKWARD_SEND_RECV: (S.FORWARD_SEND, S.BACKWARD_SEND, S.FORWARD_RECV,
                                    S.BACKWARD_RECV),
}
_SAME = {sm.FORWARD_COMPUTE: S.FORWARD_COMPUTE, sm.BACKWARD_COMPUTE: S.BACKWARD_COMPUTE,
         sm.FORWARD_SEND: S.FORWARD_SEND, sm.FORWARD_RECV: S.FORWARD_RECV,
         sm.BACKWARD_SEND: S.BACKWARD_SEND, sm.BACKWARD_RECV: S.BACKWARD_RECV,
         sm.GRADS_REDUCE_SCATTER: S.GRADS_REDUCE_SCATTER,
         sm.GRADS_ALL_REDUCE: S.GRADS_REDUCE_SCATTER,
         sm.PARAMS_ALL_GATHER: S.PARAMS_ALL_GATHER, sm.OPTIMIZER: S.OPTIMIZER}


@dataclasses.dataclass
class Mark:
    """One schedule mark of a kept rank: its timer, place and aligned times (seconds)."""

    step: int
    timer: str
    start: float
    end: float
    chunk: Optional[int] = None
    mb: Optional[int] = None


@dataclasses.dataclass
class Row:
    dp_rank: int
    stage: int
    rank: int
    step: int
    optype: str
    start: float
    end: float
    mc: int = -1
    gmc: int = -1
    mb_id: int = -1


Worker = Tuple[int, int, int]  # (dp_rank, stage, rank)


def rows_of(marks: Dict[Worker, List[Mark]], pp: int, use_dp: bool) -> Tuple[List[Row], List[str]]:
    rows: List[Row] = []
    notes: List[str] = []
    late_gathers = dropped_dp = 0
    for (dp, stage, rank), mine in marks.items():
        first_forward: Dict[int, float] = {}
        for m in mine:
            if m.timer == sm.FORWARD_COMPUTE:
                first_forward[m.step] = min(first_forward.get(m.step, m.start), m.start)
        for m in mine:
            kinds = _SPLIT.get(m.timer) or ((_SAME[m.timer],) if m.timer in _SAME else ())
            for kind in kinds:
                if kind in S.DP_COMM and not use_dp:
                    dropped_dp += 1
                    continue
                if kind == S.PARAMS_ALL_GATHER and m.start > first_forward.get(m.step, m.start):
                    late_gathers += 1
                    continue
                row = Row(dp, stage, rank, m.step, kind, m.start, m.end)
                if kind in S.COMPUTE:
                    row.mc = m.chunk or 0
                    row.gmc = row.mc * pp + stage
                    row.mb_id = m.mb if m.mb is not None else -1
                elif kind in S.DP_COMM:
                    row.mc = m.chunk or 0
                rows.append(row)
    if dropped_dp:
        notes.append(f"{dropped_dp} gradient/parameter synchronisation marks left out: without "
                     f"data parallelism the analyzer's model has none.")
    if late_gathers:
        notes.append(f"{late_gathers} params-all-gather marks after the step's first forward "
                     f"left out (they prepare the next step).")
    added = _placeholders(rows, pp, use_dp)
    if added:
        notes.append(f"not recorded, written as zero-length rows where they would run: "
                     f"{', '.join(sorted(added))}.")
    return rows, notes


def _placeholders(rows: List[Row], pp: int, use_dp: bool) -> List[str]:
    """The zero-length rows of the module doc; returns the op types added."""
    have = {(r.dp_rank, r.stage, r.step, r.optype) for r in rows}
    workers: Dict[Tuple[int, int, int], int] = {}
    last_compute: Dict[Tuple[int, int, int], float] = {}
    optimizer_start: Dict[Tuple[int, int, int], float] = {}
    for r in rows:
        key = (r.dp_rank, r.stage, r.step)
        workers[key] = r.rank
        if r.optype in S.COMPUTE:
            last_compute[key] = max(last_compute.get(key, r.end), r.end)
        elif r.optype == S.OPTIMIZER:
            optimizer_start[key] = min(optimizer_start.get(key, r.start), r.start)
    added = set()

    def add(key: Tuple[int, int, int], optype: str, at: float) -> None:
        if (*key, optype) in have:
            return
        dp, stage, step = key
        rows.append(Row(dp, stage, workers[key], step, optype, at, at,
                        mc=0 if optype in S.DP_COMM else -1))
        added.add(optype)

    for key, end in last_compute.items():
        dp, stage, step = key
        add(key, S.GC, end)
        add(key, S.LAYERNORM_GRADS_ALL_REDUCE, end)
        if stage in (0, pp - 1):
            peers = [last_compute.get((dp, s, step), end) for s in {0, pp - 1}]
            add(key, S.EMBEDDING_GRADS_ALL_REDUCE, max(peers))
        if use_dp:
            same_stage = [t for (d, s, n), t in last_compute.items() if s == stage and n == step]
            add(key, S.GRADS_REDUCE_SCATTER, max(same_stage))
    everyone: Dict[int, float] = {}
    for (dp, stage, step), end in last_compute.items():
        at = optimizer_start.get((dp, stage, step), end)
        everyone[step] = max(everyone.get(step, at), at)
    for key in last_compute:
        add(key, S.OPTIMIZER_CLIP_MAIN_GRAD, everyone[key[2]])
        add(key, S.OPTIMIZER, everyone[key[2]])
    return sorted(added)


def table_of(rows: List[Row]):
    """The rows as an ``OpTable``: ``seq_id`` by start per worker, step and type; times relative
    to the step's first op on any worker."""
    import numpy as np

    from .table import OpTable

    rows = sorted(rows, key=lambda r: (r.step, r.rank, r.optype, r.start, r.end))
    step_start: Dict[int, float] = {}
    for r in rows:
        step_start[r.step] = min(step_start.get(r.step, r.start), r.start)
    types = sorted({r.optype for r in rows})
    code = {t: i for i, t in enumerate(types)}
    seq: Dict[Tuple[int, int, str], int] = {}
    columns: Dict[str, list] = {name: [] for name in S.COLUMN_NAMES}
    for r in rows:
        key = (r.step, r.rank, r.optype)
        seq[key] = seq.get(key, -1) + 1
        for name, value in (("dp_rank", r.dp_rank), ("stage", r.stage), ("rank", r.rank),
                            ("step", r.step), ("optype", code[r.optype]),
                            ("start_ts", r.start - step_start[r.step]),
                            ("duration", r.end - r.start), ("seq_id", seq[key]), ("mc", r.mc),
                            ("mb_id", r.mb_id), ("gmc", r.gmc)):
            columns[name].append(value)
    return OpTable.from_columns({k: np.array(v) for k, v in columns.items()}, types)
