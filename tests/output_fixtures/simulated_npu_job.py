"""The synchronous job of ``simulated_job.py`` as NPU captures: one parsed ``*_ascend_pt`` folder
per rank as torch_npu leaves it (profiler_info_{R}.json from a real sample, and in
ASCEND_PROFILER_OUTPUT the step_trace_time.csv and communication.json of each step), and the
manifests naming the host and the layout.

Each step the ranks' HCCL all-reduces are named as torch_npu names them,
``hcom_allReduce__<group>_<n>_<k>@<group hash>``, the same on every member of the group. A slow
rank's step time equals everyone's: its DP group waits in its all-reduce, every rank in the
world's.
"""

import json
import os

from output_fixtures.samples import OUTPUT, run_name, sample_info
from output_fixtures.simulated_job import (COMPUTE_US, GAP_US, dp_group, manifest, schedule,
                                           step_parts)

HEADER = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
          "Bubble,Communication(Not Overlapped and Exclude Receive)")
WORLD_HASH = "9350434047717501483"


def _hash(first):
    return str(13337953553061386000 + first)


def npu_job(directory, ranks=1024, steps=(5, 6, 7), slow=None, tp=1, hosts=8, skew_us=None):
    """Write the job under ``directory``; returns ``directory``."""
    slow = slow or {}
    skew_us = skew_us or {}
    arrival, dp_end, loss_arrival, loss_end, length = schedule(ranks, slow, tp)
    with open(sample_info(0)) as handle:
        info = json.load(handle)
    os.makedirs(directory, exist_ok=True)
    for rank in range(ranks):
        host = rank // hosts
        path = os.path.join(str(directory), run_name(rank))
        out = os.path.join(path, OUTPUT)
        os.makedirs(out)
        with open(os.path.join(path, f"profiler_info_{rank}.json"), "w") as handle:
            json.dump({**info, "rank_id": rank}, handle)
        free, compute, _ = step_parts(rank, slow)
        group = _hash(rank % tp)
        rows, comm = [HEADER], {}
        for index, step in enumerate(steps):
            origin = 1_700_000_000_000_000.0 + index * (length + 50.0) + skew_us.get(host, 0.0)
            waited = (dp_end[rank] - arrival[rank]) + (loss_end - loss_arrival[rank])
            rows.append(f"{step},{compute},{waited},0,{waited},{length - compute - waited},0,0,"
                        f"{waited}")
            ops = {}
            for name, start, end in (
                    (f"hcom_allReduce__{group[-3:]}_{index}_0@{group}", arrival[rank],
                     dp_end[rank]),
                    (f"hcom_allReduce__{WORLD_HASH[-3:]}_{index}_1@{WORLD_HASH}",
                     loss_arrival[rank], loss_end)):
                ops[name] = {"Communication Time Info": {
                    "Start Timestamp(us)": origin + start, "Elapse Time(ms)": (end - start) / 1e3,
                    "Transit Time(ms)": 0.0, "Wait Time(ms)": 0.0,
                    "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0}}
            comm[f"step{step}"] = {"collective": ops}
        with open(os.path.join(out, "step_trace_time.csv"), "w") as handle:
            handle.write("\n".join(rows) + "\n")
        with open(os.path.join(out, "communication.json"), "w") as handle:
            json.dump(comm, handle)
        manifest(directory, rank, ranks, tp, f"node{host}", run_name(rank), steps,
                 backend="npu", run_id="npu-job", pid=1408366)
    return str(directory)


__all__ = ["npu_job", "COMPUTE_US", "GAP_US", "dp_group"]
