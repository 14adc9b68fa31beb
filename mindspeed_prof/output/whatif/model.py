"""The schedule's dependency model, rebuilt from one step of DP replica 0 (the paper's §4).

Within a stage: computations run in their recorded order on one stream; each kind of p2p
transfer (forward/backward x send/recv) on a stream of its own; a send follows the computation
that produced its tensor, a computation follows the receive that brought its input, and a
receive is posted once the previous computation of its kind is done. Across stages: a send and
its peer's receive are one transfer (it ends when both sides have arrived, plus the transfer
itself). Data parallelism: the parameter all-gathers and gradient reduce-scatters share a
stream, the first forward of a model chunk waits for its all-gather, and every DP collective
waits for the slowest replica. After the last computation come, in order, the layernorm and
embedding gradient all-reduces (the embedding one joins the first and the last stage), the
gradient reduce-scatters (or the separate all-reduce when they overlap the backward), the
gradient clipping (one collective across all stages and replicas) and the optimizer.

An op the model names but the table lacks (a capture with no ``gc`` mark, say) is a virtual op
of zero duration, so the order it implies still holds.
"""

import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...errors import ConfigError
from . import schema as S
from .grid import Grid

_EPS = 5e-5  # seconds: clock jitter allowed when telling a transfer inside the schedule
_PEER_DELTA = {S.FORWARD_SEND: 1, S.FORWARD_RECV: -1, S.BACKWARD_SEND: -1, S.BACKWARD_RECV: 1}
_PEER_TYPE = {S.FORWARD_SEND: S.FORWARD_RECV, S.FORWARD_RECV: S.FORWARD_SEND,
              S.BACKWARD_SEND: S.BACKWARD_RECV, S.BACKWARD_RECV: S.BACKWARD_SEND}
_SYNCED = (S.PARAMS_ALL_GATHER, S.GRADS_REDUCE_SCATTER, S.SEPARATE_GRADS_ALL_REDUCE,
           S.OPTIMIZER_CLIP_MAIN_GRAD)

Key = Tuple[str, int, int]


@dataclasses.dataclass
class DepModel:
    """Ops 0..n_real-1 are the grid's, then the virtual ops, then ``start`` (the step's start).

    ``ready_on[v]``: the ops whose end ``v``'s end waits for (for a collective, those of every
    member); ``levels``: the ops grouped so each level depends only on earlier ones."""

    n_real: int
    keys: List[Key]
    ready_on: List[List[int]]
    collective: np.ndarray   # bool per op: ends at its group's last arrival + its transfer
    dp_synced: np.ndarray    # bool per op: the group also waits for the slowest DP replica
    modeled: np.ndarray      # bool per op: part of the schedule (else left out of step times)
    levels: List[np.ndarray]
    start: int
    groups: List[List[int]]  # the collectives' members
    group_of: np.ndarray     # per op: its group's index, -1 for none


class _Builder:
    def __init__(self, grid: Grid):
        self.grid = grid
        self.index: Dict[Key, int] = grid.index()
        self.keys: List[Key] = [(t, int(q), int(s)) for t, q, s in
                                zip(grid.optype, grid.seq_id, grid.stage)]
        self.deps: Dict[int, List[int]] = {}
        self.groups: List[List[int]] = []
        self.pairs: Dict[Tuple[Key, ...], List[int]] = {}
        self.start0 = grid.start[:, 0, 0]
        self.end0 = self.start0 + grid.duration[:, 0, 0]

    def node(self, optype: str, seq: int, stage: int) -> int:
        key = (optype, int(seq), int(stage))
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.keys)
            self.keys.append(key)
        return found

    def depend(self, op: int, *on: int) -> None:
        self.deps.setdefault(op, []).extend(on)

    def chain(self, ops: List[int], after: Optional[List[int]] = None) -> None:
        last = list(after or [])
        for op in ops:
            self.depend(op, *last)
            last = [op]

    def ordered(self, stage: int, optypes: Tuple[str, ...]) -> List[int]:
        ops = [i for i, (t, _, s) in enumerate(self.keys[:self.grid.start.shape[0]])
               if s == stage and t in optypes]
        return sorted(ops, key=lambda i: (self.start0[i], self.keys[i][1], self.keys[i][0]))


def build(grid: Grid, dsp_size: int = 1) -> DepModel:
    b = _Builder(grid)
    pp, dp = grid.pp_size, grid.dp_size
    compute_mc = [int(m) for m, (t, _, _) in zip(grid.mc, b.keys) if t in S.COMPUTE]
    vpp = max(compute_mc, default=0) + 1
    for stage in range(pp):
        _pipeline(b, stage, pp, vpp)
    use_dp = dp * dsp_size > 1
    overlapped = S.SEPARATE_GRADS_ALL_REDUCE in grid.optype
    if use_dp:
        for stage in range(pp):
            b.chain(b.ordered(stage, (S.PARAMS_ALL_GATHER, S.GRADS_REDUCE_SCATTER)))
            _gathers_before_first_forward(b, stage)
            if overlapped:
                _reduce_after_last_backward(b, stage)
        for i, (t, _, _) in enumerate(b.keys[:grid.start.shape[0]]):
            if t in S.DP_COMM:
                b.groups.append([i])
    for stage in range(pp):
        _after_compute(b, stage, pp, use_dp, overlapped)
    b.groups.append([b.node(S.EMBEDDING_GRADS_ALL_REDUCE, 0, 0)] if pp == 1 else
                    [b.node(S.EMBEDDING_GRADS_ALL_REDUCE, 0, 0),
                     b.node(S.EMBEDDING_GRADS_ALL_REDUCE, 0, pp - 1)])
    b.groups.append([b.node(S.OPTIMIZER_CLIP_MAIN_GRAD, 0, s) for s in range(pp)])
    return _levelled(b)


def _pipeline(b: _Builder, stage: int, pp: int, vpp: int) -> None:
    compute = b.ordered(stage, S.COMPUTE)
    p2p = b.ordered(stage, S.P2P)
    b.chain(compute)
    for optype in S.P2P:
        b.chain([i for i in p2p if b.keys[i][0] == optype])
    no_op = {i: True for i in p2p}
    for kind, compute_type in (("forward", S.FORWARD_COMPUTE), ("backward", S.BACKWARD_COMPUTE)):
        mine = [i for i in compute if b.keys[i][0] == compute_type]
        last_start = max((b.start0[i] for i in mine), default=np.nan)
        first_end = min((b.end0[i] for i in mine), default=np.nan)
        for direction in ("send", "recv"):
            optype = f"{kind}-{direction}"
            ops = [i for i in p2p if b.keys[i][0] == optype]
            inside = [i for i in ops if (b.start0[i] <= last_start + _EPS if direction == "recv"
                                         else b.end0[i] >= first_end - _EPS)]
            compute_id = 0
            if len(inside) != len(mine):
                if stage not in (0, pp - 1) or (inside and len(inside) + 1 != len(mine)):
                    raise ConfigError(
                        f"stage {stage}: {len(inside)} {optype} within the schedule for "
                        f"{len(mine)} {compute_type} ops; only the first and last stage may "
                        f"lack a transfer (a capture cut inside a step?).")
                if direction == "recv" and len(inside) + 1 == len(mine):
                    compute_id = 1  # the first chunk's receive was never posted
            for op in inside:
                matched = b.index.get((compute_type, compute_id, stage))
                if matched is None:
                    raise ConfigError(f"stage {stage}: {optype} #{compute_id} has no "
                                      f"{compute_type} #{compute_id} to pair with.")
                peer_gmc = int(b.grid.gmc[matched]) + _PEER_DELTA[optype]
                no_op[op] = not 0 <= peer_gmc < vpp * pp
                if direction == "send":
                    b.depend(op, matched)
                else:
                    b.depend(matched, op)
                    if compute_id > 0:
                        b.depend(op, b.node(compute_type, compute_id - 1, stage))
                compute_id += 1
    _first_backward_transfers(b, stage, compute)
    for optype in S.P2P:
        peer_type, peer_stage = _PEER_TYPE[optype], (stage + _PEER_DELTA[optype] + pp) % pp
        real = [i for i in p2p if b.keys[i][0] == optype and not no_op[i]]
        for k, op in enumerate(real):
            b.pairs.setdefault(tuple(sorted([(optype, k, stage), (peer_type, k, peer_stage)])),
                               []).append(op)
    for op in p2p:
        if no_op[op]:
            b.groups.append([op])


def _first_backward_transfers(b: _Builder, stage: int, compute: List[int]) -> None:
    """The first backward transfers are posted once the forward two before the first backward
    is done (the warm-up's last forward overlaps them)."""
    first = next((n for n, i in enumerate(compute) if b.keys[i][0] == S.BACKWARD_COMPUTE), None)
    if first is None or first < 2:
        return
    if any(b.keys[compute[first - k]][0] != S.FORWARD_COMPUTE for k in (1, 2)):
        raise ConfigError(f"stage {stage}: the two computations before the first backward are "
                          f"not forwards; not a pipeline schedule the model knows.")
    for optype in (S.BACKWARD_RECV, S.BACKWARD_SEND):
        op = b.index.get((optype, 0, stage))
        if op is not None and op < b.grid.start.shape[0]:
            b.depend(op, compute[first - 2])


def _gathers_before_first_forward(b: _Builder, stage: int) -> None:
    gathers = sorted((i for i in b.ordered(stage, (S.PARAMS_ALL_GATHER,))),
                     key=lambda i: -b.keys[i][1])
    forwards = b.ordered(stage, (S.FORWARD_COMPUTE,))
    done = set()
    for op in gathers:  # the last all-gather of each chunk
        chunk = int(b.grid.mc[op])
        if chunk in done:
            continue
        first = [i for i in forwards if int(b.grid.mc[i]) == chunk]
        if first:
            b.depend(min(first, key=lambda i: b.start0[i]), op)
        done.add(chunk)


def _reduce_after_last_backward(b: _Builder, stage: int) -> None:
    reduces = sorted(b.ordered(stage, (S.GRADS_REDUCE_SCATTER,)), key=lambda i: b.keys[i][1])
    backwards = b.ordered(stage, (S.BACKWARD_COMPUTE,))
    done = set()
    for op in reduces:  # the first reduce-scatter of each chunk
        chunk = int(b.grid.mc[op])
        if chunk in done:
            continue
        last = [i for i in backwards if int(b.grid.mc[i]) == chunk]
        if last:
            b.depend(op, max(last, key=lambda i: b.end0[i]))
        done.add(chunk)


def _after_compute(b: _Builder, stage: int, pp: int, use_dp: bool, overlapped: bool) -> None:
    compute = b.ordered(stage, S.COMPUTE)
    gc = b.node(S.GC, 0, stage)
    if compute:
        b.depend(gc, max(compute, key=lambda i: b.end0[i]))
    reduces = [i for i in b.ordered(stage, (S.GRADS_REDUCE_SCATTER,))]
    n_reduce = max((b.keys[i][1] for i in reduces), default=-1) + 1
    embedding = ([b.node(S.EMBEDDING_GRADS_ALL_REDUCE, 0, stage)]
                 if stage in (0, pp - 1) else [])
    head = [b.node(S.LAYERNORM_GRADS_ALL_REDUCE, 0, stage), *embedding]
    tail = [b.node(S.OPTIMIZER_CLIP_MAIN_GRAD, 0, stage), b.node(S.OPTIMIZER, 0, stage)]
    if not use_dp:
        b.chain(head + tail, after=[gc])
    elif overlapped:
        after = [gc] + ([b.node(S.GRADS_REDUCE_SCATTER, n_reduce - 1, stage)] if n_reduce else [])
        b.chain(head + [b.node(S.SEPARATE_GRADS_ALL_REDUCE, 0, stage)] + tail, after=after)
    else:
        b.chain(head + [b.node(S.GRADS_REDUCE_SCATTER, i, stage) for i in range(n_reduce)] + tail,
                after=[gc])


def _levelled(b: _Builder) -> DepModel:
    for key, members in b.pairs.items():
        if len(members) != 2:
            (t0, k0, s0), (t1, k1, s1) = key
            raise ConfigError(f"transfer #{k0} {t0} of stage {s0} / {t1} of stage {s1}: "
                              f"{len(members)} sides recorded, expected 2 (a send without its "
                              f"receive: the stages' captures do not cover the same steps?).")
        b.groups.append(members)
    n = len(b.keys)
    start = n
    group_of = np.full(n, -1)
    for gid, members in enumerate(b.groups):
        group_of[members] = gid
    collective = group_of >= 0
    dp_synced = np.array([collective[i] and b.keys[i][0] in _SYNCED for i in range(n)])
    modeled = np.zeros(n, dtype=bool)
    for op, on in b.deps.items():
        modeled[op] = True
        modeled[on] = True
    for members in b.groups:
        modeled[members] = True
    own = [sorted(set(b.deps.get(i, []))) for i in range(n)]
    ready_on: List[List[int]] = []
    for i in range(n):
        on = own[i] if group_of[i] < 0 else sorted(
            {u for m in b.groups[group_of[i]] for u in own[m]})
        ready_on.append(on or [start])
    level = np.full(n + 1, -1)
    level[start] = 0
    waiting = [len(on) for on in ready_on]
    users: List[List[int]] = [[] for _ in range(n + 1)]
    for i, on in enumerate(ready_on):
        for u in on:
            users[u].append(i)
    frontier = [start]
    while frontier:
        nxt = []
        for u in frontier:
            for v in users[u]:
                waiting[v] -= 1
                if waiting[v] == 0:
                    level[v] = max(level[w] for w in ready_on[v]) + 1
                    nxt.append(v)
        frontier = nxt
    if (level[:n] < 0).any():
        stuck = [b.keys[i] for i in np.flatnonzero(level[:n] < 0)[:3]]
        raise ConfigError(f"the schedule's dependencies form a cycle around {stuck}; the op "
                          f"order recorded is not one the model knows.")
    order = np.argsort(level[:n], kind="stable")
    bounds = np.searchsorted(level[:n][order], np.arange(1, level.max() + 2))
    levels = [order[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    return DepModel(n_real=b.grid.start.shape[0], keys=b.keys, ready_on=ready_on,
                    collective=collective, dp_synced=dp_synced, modeled=modeled, levels=levels,
                    start=start, groups=b.groups, group_of=group_of)
