"""A simulated pipeline-parallel job (1F1B, PP x DP ranks), played out op by op.

Each DP replica runs Megatron's 1F1B schedule: warm-up forwards, one forward one backward, then
the cool-down backwards; a forward waits for its input from the previous stage, a backward for
its gradient from the next (a transfer ends when both sides are there, plus the wire time); at
the end of the step every stage reduce-scatters its gradients with its DP peers (ending when the
last replica arrives) and the optimizer starts when every rank is done (the gradient norm's
all-reduce), so a slow worker's step time EQUALS everyone's, as in a real synchronous job.

``slow_stage`` / ``slow_worker`` multiply compute durations; ``jitter`` adds a seeded random
spread to every compute. The ops come out as records (seconds) that ``as_table`` turns into the
paper's per-op table and ``write_capture`` into torch traces with the schedule marks.
"""

import dataclasses
import json
import os
import random
from typing import Dict, List, Optional, Tuple

FORWARD_S, BACKWARD_S = 0.010, 0.020
TRANSFER_S, REDUCE_S, OPTIMIZER_S = 0.0005, 0.004, 0.003
STEP_GAP_S = 0.002


@dataclasses.dataclass
class Op:
    rank: int
    dp: int
    stage: int
    step: int
    timer: str
    start: float
    dur: float
    chunk: int = 0
    mb: int = -1
    peer: Optional[int] = None


def rank_of(dp: int, stage: int, dp_size: int) -> int:
    """Megatron's default order with TP = CP = 1: DP fastest, then PP."""
    return stage * dp_size + dp


def _order(stage: int, pp: int, m: int) -> List[Tuple[str, int]]:
    warm = min(pp - stage - 1, m)
    order = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", i) for i in range(m - warm, m)]
    return order


def play(pp: int = 2, dp: int = 2, microbatches: int = 4, steps=(3, 4, 5, 6),
         slow_stage: Optional[Tuple[int, float]] = None,
         slow_worker: Optional[Tuple[int, int, float]] = None,
         jitter: float = 0.0, seed: int = 0) -> List[Op]:
    rnd = random.Random(seed)
    ops: List[Op] = []
    clock = 1.0
    for step in steps:
        ends_of_step: Dict[Tuple[int, int], float] = {}
        reduce_arrivals: Dict[int, List[Tuple[int, float]]] = {}
        for d in range(dp):
            free = {s: clock for s in range(pp)}   # when the stage's compute stream is free
            done: Dict[Tuple[str, int, int], float] = {}
            orders = {s: _order(s, pp, microbatches) for s in range(pp)}
            nxt = {s: 0 for s in range(pp)}
            while any(nxt[s] < len(orders[s]) for s in range(pp)):
                progressed = False
                for s in range(pp):
                    if nxt[s] >= len(orders[s]):
                        continue
                    kind, i = orders[s][nxt[s]]
                    source = (kind, s - 1, i) if kind == "F" else (kind, s + 1, i)
                    has_peer = 0 <= source[1] < pp
                    if has_peer and source not in done:
                        continue
                    start = free[s]
                    rank, peer_rank = rank_of(d, s, dp), rank_of(d, source[1], dp)
                    if has_peer:  # the transfer: send at the source's end, recv posted now
                        sent = done[source]
                        arrived = max(sent, start) + TRANSFER_S
                        send_timer, recv_timer = (("forward-send", "forward-recv") if kind == "F"
                                                  else ("backward-send", "backward-recv"))
                        ops.append(Op(peer_rank, d, source[1], step, send_timer, sent,
                                      arrived - sent, mb=i, peer=rank))
                        ops.append(Op(rank, d, s, step, recv_timer, start, arrived - start,
                                      mb=i, peer=peer_rank))
                        start = arrived
                    base = FORWARD_S if kind == "F" else BACKWARD_S
                    factor = 1.0
                    if slow_stage and slow_stage[0] == s:
                        factor *= slow_stage[1]
                    if slow_worker and slow_worker[:2] == (d, s):
                        factor *= slow_worker[2]
                    if jitter:
                        factor *= 1.0 + rnd.uniform(-jitter, jitter)
                    dur = base * factor
                    ops.append(Op(rank, d, s, step, "forward-compute" if kind == "F"
                                  else "backward-compute", start, dur, mb=i))
                    done[(kind, s, i)] = free[s] = start + dur
                    nxt[s] += 1
                    progressed = True
                assert progressed, "the schedule deadlocked"
            for s in range(pp):
                reduce_arrivals.setdefault(s, []).append((d, free[s]))
        for s, arrivals in reduce_arrivals.items():
            last = max(t for _, t in arrivals)
            for d, t in arrivals:
                if dp > 1:
                    ops.append(Op(rank_of(d, s, dp), d, s, step, "grads-reduce-scatter", t,
                                  last + REDUCE_S - t))
                ends_of_step[(d, s)] = last + REDUCE_S if dp > 1 else t
        opt_start = max(ends_of_step.values())
        for (d, s) in ends_of_step:
            ops.append(Op(rank_of(d, s, dp), d, s, step, "optimizer", opt_start, OPTIMIZER_S))
        clock = opt_start + OPTIMIZER_S + STEP_GAP_S
    return ops


def as_table(ops: List[Op]):
    """The paper's per-op table of ``ops`` (``mindspeed_prof.output.whatif.table.OpTable``)."""
    import numpy as np

    from mindspeed_prof.output.whatif.table import OpTable

    ordered = sorted(ops, key=lambda o: (o.step, o.rank, o.timer, o.start))
    seq: Dict[Tuple[int, int, str], int] = {}
    step_start: Dict[int, float] = {}
    for op in ordered:
        step_start[op.step] = min(step_start.get(op.step, op.start), op.start)
    types = sorted({op.timer for op in ops})
    pp = max(op.stage for op in ops) + 1
    columns: Dict[str, list] = {k: [] for k in ("dp_rank", "stage", "rank", "step", "optype",
                                                "start_ts", "duration", "seq_id", "mc",
                                                "mb_id", "gmc")}
    for op in ordered:
        key = (op.step, op.rank, op.timer)
        seq[key] = seq.get(key, -1) + 1
        compute = op.timer.endswith("-compute")
        for name, value in (("dp_rank", op.dp), ("stage", op.stage), ("rank", op.rank),
                            ("step", op.step), ("optype", types.index(op.timer)),
                            ("start_ts", op.start - step_start[op.step]),
                            ("duration", op.dur), ("seq_id", seq[key]),
                            ("mc", op.chunk if compute else -1),
                            ("mb_id", op.mb if compute else -1),
                            ("gmc", op.chunk * pp + op.stage if compute else -1)):
            columns[name].append(value)
    return OpTable.from_columns({k: np.array(v) for k, v in columns.items()}, types)


def write_capture(directory, ops: List[Op], marks: bool = True, dp: int = 2, pp: int = 2) -> str:
    """Torch traces (one per rank, ProfilerStep#N and, with ``marks``, the schedule marks named
    by ``mindspeed_prof.config.schedule_marks``) and manifests naming the parallel layout."""
    from mindspeed_prof.config import schedule_marks
    from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE

    os.makedirs(directory, exist_ok=True)
    world = dp * pp
    by_rank: Dict[int, List[Op]] = {}
    for op in ops:
        by_rank.setdefault(op.rank, []).append(op)
    for rank in range(world):
        mine = sorted(by_rank.get(rank, []), key=lambda o: o.start)
        events = [{"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                   "args": {"name": "python"}}]
        spans: Dict[int, List[float]] = {}
        for op in mine:
            span = spans.setdefault(op.step, [op.start, op.start + op.dur])
            span[0], span[1] = min(span[0], op.start), max(span[1], op.start + op.dur)
        for step, (lo, hi) in sorted(spans.items()):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                           "pid": rank, "tid": rank, "ts": lo * 1e6 - 5.0,
                           "dur": (hi - lo) * 1e6 + 10.0})
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": rank,
                           "tid": rank, "ts": lo * 1e6, "dur": 3.0})
        if marks:
            for op in mine:
                compute = op.timer.endswith("-compute")
                name = schedule_marks.name(op.timer, op.stage,
                                           chunk=op.chunk if compute or op.peer is not None
                                           else None,
                                           mb=op.mb if op.mb >= 0 else None, peer=op.peer)
                events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": rank,
                               "tid": rank, "ts": op.start * 1e6, "dur": op.dur * 1e6})
        path = os.path.join(str(directory),
                            TORCH_TRACE_TEMPLATE.format(rank=rank,
                                                        time_ns=1_700_000_000_000_000_000 + rank))
        with open(path, "w") as handle:
            json.dump({"schemaVersion": 1, "traceEvents": events}, handle)
        manifest = {"schema": 1, "tool": "mindspeed_prof", "tool_version": "test", "rank": rank,
                    "world_size": world, "local_rank": rank, "hostname": "node0", "pid": 1,
                    "selected_ranks": list(range(world)), "backend": "torch", "config": {},
                    "windows": [], "versions": {}, "status": "complete", "exit": None,
                    "errors": [], "warnings": [], "files": [os.path.basename(path)],
                    "parallel": {"tensor_model_parallel_size": 1,
                                 "pipeline_model_parallel_size": pp, "data_parallel_size": dp,
                                 "context_parallel_size": 1, "rank": rank, "world_size": world}}
        with open(os.path.join(str(directory), f"profile_manifest_rank{rank}.json"), "w") as f:
            json.dump(manifest, f)
    return str(directory)
