"""A simulated many-rank torch job: one small chrome trace per rank, written directly (no torch).

Each rank's trace holds the steps ``steps`` as ``ProfilerStep#N`` annotations, and inside each
step one ``aten::mm`` (computing), one ``c10d::allreduce_`` (communication, with the message
size and group in its arguments, as kineto writes them for NCCL) and a gap (free). Ranks in
``slow`` take longer in one part: ``"compute"``, ``"comm"`` or ``"free"`` (``SLOW_BY`` x), so a
report has a compute-bound, a waiting and a host-bound rank to find. The traces are named as the
torch backend names them, so ``check`` and ``summary`` read them as a real job's.

``device=True`` adds what a CUDA trace holds: the step's work as GPU kernels on one stream
(``kernels`` compute kernels splitting the computing time, then one NCCL all-reduce kernel),
each launched by a ``cudaLaunchKernel`` of the same correlation id, and ``distributedInfo``
naming the rank: the shape HTA's temporal breakdown reads (benchmarks/report.py).
"""

import json
import os

from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE

COMPUTE_US, COMM_US, FREE_US = 800.0, 300.0, 100.0
SLOW_BY = 3.0
NELEMS = 1 << 18  # float32: 1 MiB per all-reduce
GROUP = "default_pg"


def step_parts(rank, slow):
    """(computing, communication, free) µs of every step of ``rank``."""
    part = slow.get(rank)
    return (COMPUTE_US * (SLOW_BY if part == "compute" else 1.0),
            COMM_US * (SLOW_BY if part == "comm" else 1.0),
            FREE_US * (SLOW_BY if part == "free" else 1.0))


def _kernels(events, rank, ts, compute, comm, kernels, correlation):
    """The step's device work from ``ts``: compute kernels, then the all-reduce kernel."""
    width = compute / kernels
    for index in range(kernels + 1):
        last = index == kernels
        name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL" if last else "ampere_sgemm_128x64_nn"
        start, dur = (ts + compute, comm) if last else (ts + index * width, width * 0.98)
        correlation += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "pid": rank, "tid": rank, "ts": start - 1.0, "dur": 0.5,
                       "args": {"correlation": correlation}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                       "ts": start, "dur": dur,
                       "args": {"device": 0, "stream": 7, "correlation": correlation,
                                **({"In msg nelems": NELEMS, "dtype": "Float",
                                    "Process Group Description": GROUP} if last else {})}})
    return correlation


def rank_trace(rank, steps, slow, device=False, kernels=1):
    compute, comm, free = step_parts(rank, slow)
    events = [{"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
               "args": {"name": "python"}}]
    ts = 1_000_000.0
    correlation = 0
    for step in steps:
        length = compute + comm + free
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": rank, "tid": rank, "ts": ts, "dur": length})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": rank,
                       "tid": rank, "ts": ts, "dur": compute})
        events.append({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": rank,
                       "tid": rank, "ts": ts + compute, "dur": comm,
                       "args": {"In msg nelems": NELEMS, "dtype": "Float",
                                "Process Group Description": GROUP}})
        if device:
            correlation = _kernels(events, rank, ts, compute, comm, kernels, correlation)
        ts += length + 50.0
    trace = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms"}
    if device:
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": None}
    return trace


def simulated_job(directory, ranks=1024, steps=(5, 6, 7), slow=None, device=False, kernels=1):
    """Write the job's traces under ``directory``; returns ``directory``."""
    slow = slow or {}
    os.makedirs(directory, exist_ok=True)
    for rank in range(ranks):
        name = TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns=1_700_000_000_000_000_000 + rank)
        with open(os.path.join(str(directory), name), "w") as handle:
            # kineto's spacing where HTA reads the rank (its regex wants `"rank": N`)
            json.dump(rank_trace(rank, steps, slow, device, kernels), handle,
                      separators=(", ", ": ") if device else (",", ":"))
    return str(directory)
