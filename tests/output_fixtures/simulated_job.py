"""A simulated many-rank synchronous torch job: one small chrome trace per rank, written
directly (no torch), as a real data-parallel job behaves.

Every step starts on every rank together. A rank first spends host time (free: no operator),
then computes (``aten::mm``), then joins its DP group's gradient all-reduce
(``c10d::allreduce_``, with the message size and group in its arguments as kineto writes them
for NCCL), which ends for every member when the last one has arrived plus the transfer; then
every rank joins one small world-wide all-reduce (the loss), and the step ends together. So a
slow rank's step time EQUALS everyone's: the others wait in its collectives. Ranks in ``slow``
are slow in one part: ``"compute"`` (``SLOW_BY`` x), ``"free"`` (host-bound: a stall as long as
the slow computing's extra) or ``"comm"`` (the links of its DP group: that group's transfers
are ``SLOW_BY`` x slower).

``tp`` > 1 makes tensor-parallel neighbours (rank = tp + TP·dp): the DP groups are the ranks of
one tp coordinate; ``hosts``: ranks per host, each host's clock ``skew_us[host]`` off
(manifests then name the host and the layout, as the recording side writes them).

``device=True`` adds what a CUDA trace holds: the step's work as GPU kernels on one stream
(``kernels`` compute kernels splitting the computing time, then the NCCL kernels of the two
all-reduces at the same times), each launched by a ``cudaLaunchKernel`` of the same
correlation id, and ``distributedInfo`` naming the rank: the shape HTA's temporal breakdown
reads (benchmarks/report.py).
"""

import json
import os

from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE

COMPUTE_US, COMM_US, FREE_US = 800.0, 300.0, 100.0
LOSS_US, GAP_US = 20.0, 10.0  # the world-wide loss all-reduce; the host between collectives
SLOW_BY = 3.0
NELEMS = 1 << 18  # float32: 1 MiB per all-reduce
GROUP = "default_pg"
START_US = 1_000_000.0


def step_parts(rank, slow, stall=0.0):
    """(free, computing, transfer) µs of every step of ``rank`` by itself: a host-bound rank
    stalls as long as a compute-bound one computes longer; ``stall``: this step's extra host
    time, in that stall's units."""
    part = slow.get(rank)
    return (FREE_US + ((SLOW_BY - 1.0) * COMPUTE_US * (stall + (part == "free"))),
            COMPUTE_US * (SLOW_BY if part == "compute" else 1.0),
            COMM_US * (SLOW_BY if part == "comm" else 1.0))


def dp_group(rank, ranks, tp):
    return [r for r in range(rank % tp, ranks, tp)]


def schedule(ranks, slow, tp=1, stalls=None):
    """Per rank, on one true clock from the step's start: (arrival at its DP all-reduce, that
    all-reduce's end, arrival at the loss all-reduce), the loss all-reduce's end, and the step.
    ``stalls``: {rank: extra host time} of this step."""
    stalls = stalls or {}
    arrival = {r: sum(step_parts(r, slow, stalls.get(r, 0.0))[:2]) for r in range(ranks)}
    dp_end = {}
    for first in range(min(tp, ranks)):
        members = dp_group(first, ranks, tp)
        end = max(arrival[r] for r in members) + max(step_parts(r, slow)[2] for r in members)
        dp_end.update({r: end for r in members})
    loss_arrival = {r: dp_end[r] + GAP_US for r in range(ranks)}
    loss_end = max(loss_arrival.values()) + LOSS_US
    return arrival, dp_end, loss_arrival, loss_end, loss_end + GAP_US


def _kernel(events, rank, correlation, name, start, dur, args):
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": rank,
                   "tid": rank, "ts": start - 1.0, "dur": 0.5,
                   "args": {"correlation": correlation}})
    events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": start,
                   "dur": dur, "args": {"device": 0, "stream": 7, "correlation": correlation,
                                        **args}})


def _args(members, ranks):
    if len(members) == ranks:
        return {"In msg nelems": NELEMS, "dtype": "Float", "Process Group Name": "0",
                "Process Group Description": GROUP}
    return {"In msg nelems": NELEMS, "dtype": "Float",
            "Process Group Ranks": "[" + ", ".join(map(str, members)) + "]"}


def rank_trace(rank, steps, slow, device=False, kernels=1, ranks=None, tp=1, skew_us=0.0,
               plan=None, stalls=None):
    """``stalls``: {rank: [extra host time per step]} (each step then has its own plan)."""
    ranks = ranks or rank + 1
    plans = [schedule(ranks, slow, tp, {r: f[i] for r, f in stalls.items()})
             for i in range(len(steps))] if stalls else \
        [plan or schedule(ranks, slow, tp)] * len(steps)
    group_args = _args(dp_group(rank, ranks, tp), ranks)
    loss_args = {**_args(list(range(ranks)), ranks), "In msg nelems": 2}
    events = [{"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
               "args": {"name": "python"}}]
    ts = START_US + skew_us
    correlation = 0
    for index, step in enumerate(steps):
        arrival, dp_end, loss_arrival, loss_end, length = plans[index]
        free, compute, _ = step_parts(rank, slow, stalls.get(rank, [0.0] * len(steps))[index]
                                      if stalls else 0.0)
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": rank, "tid": rank, "ts": ts, "dur": length})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": rank,
                       "tid": rank, "ts": ts + free, "dur": compute})
        for start, end, args in ((arrival[rank], dp_end[rank], group_args),
                                 (loss_arrival[rank], loss_end, loss_args)):
            events.append({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": rank,
                           "tid": rank, "ts": ts + start, "dur": end - start, "args": args})
        if device:
            width = compute / kernels
            for part in range(kernels):
                correlation += 1
                _kernel(events, rank, correlation, "ampere_sgemm_128x64_nn",
                        ts + free + part * width, width * 0.98, {})
            for start, end, args in ((arrival[rank], dp_end[rank], group_args),
                                     (loss_arrival[rank], loss_end, loss_args)):
                correlation += 1
                _kernel(events, rank, correlation, "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                        ts + start, end - start, args)
        ts += length + 50.0
    trace = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms"}
    if device:
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": None}
    return trace


def simulated_job(directory, ranks=1024, steps=(5, 6, 7), slow=None, device=False, kernels=1,
                  tp=1, hosts=None, skew_us=None, stalls=None):
    """Write the job's traces (and, with ``hosts``, its manifests) under ``directory``;
    returns ``directory``. ``stalls``: {rank: [extra host time per step]}, in units of the
    host-bound rank's stall: a rank stalled by another amount each step (the others still
    wait for it: the step is everyone's)."""
    slow = slow or {}
    skew_us = skew_us or {}
    os.makedirs(directory, exist_ok=True)
    plan = schedule(ranks, slow, tp)
    for rank in range(ranks):
        host = rank // hosts if hosts else None
        name = TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns=1_700_000_000_000_000_000 + rank)
        with open(os.path.join(str(directory), name), "w") as handle:
            # kineto's spacing where HTA reads the rank (its regex wants `"rank": N`)
            json.dump(rank_trace(rank, steps, slow, device, kernels, ranks, tp,
                                 skew_us.get(host, 0.0), plan, stalls),
                      handle, separators=(", ", ": ") if device else (",", ":"))
        if hosts:
            manifest(directory, rank, ranks, tp, f"node{host}", name, steps)
    return str(directory)


def manifest(directory, rank, ranks, tp, host, trace, steps, *, backend="torch", run_id="job-1",
             pid=1000):
    """The manifest the recording side writes: the host and the parallel layout (``trace``: the
    rank's trace file or, on NPU, its capture folder)."""
    data = {"schema": 1, "tool": "mindspeed_prof", "rank": rank, "world_size": ranks,
            "local_rank": rank, "hostname": host, "pid": pid + rank, "run_id": run_id,
            "run_id_source": "job-store", "selected_ranks": list(range(ranks)),
            "backend": backend, "config": {}, "status": "complete", "files": [trace],
            "windows": [{"start": steps[0], "end": steps[-1] + 1, "dir": ".",
                         "status": "complete", "iterations_recorded": list(steps),
                         "files": [trace]}],
            "parallel": {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": 1,
                         "data_parallel_size": ranks // tp, "context_parallel_size": 1,
                         "expert_model_parallel_size": 1, "rank": rank, "world_size": ranks},
            "started_ns": 1_700_000_000_000_000_000}
    with open(os.path.join(str(directory), f"profile_manifest_rank{rank}.json"), "w") as handle:
        json.dump(data, handle)
