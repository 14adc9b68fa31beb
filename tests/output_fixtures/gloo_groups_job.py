"""A simulated synchronous TP x DP job on gloo, as torch's CPU traces of Megatron-LM show it:
no collective names its process group (torch writes no ``Process Group Ranks`` for gloo), each
runs on gloo's own thread (``gloo:all_reduce``), started by the caller's ``c10d::`` call from
inside the range that says which group it is.

Per step, on one true clock, every rank: host time (free: no operator; a rank in ``slow`` as
``"free"`` stalls ``STALL_US`` more), then in ``forward-compute`` the batch's broadcast over its
TP group (in no narrower range, as Megatron's ``get_batch`` does it), ``LAYERS`` times computing
then a TP all-reduce inside ``_ReduceFromModelParallelRegion``; in ``backward-compute``
``LAYERS`` times computing then a TP all-reduce inside the backward of
``LinearWithGradAccumulationAndAsyncCommunication``; the gradients' all-reduce over its DP
group inside the schedule mark ``grads-all-reduce``; one all-reduce over every rank in no
range (the loss: which group it is the files cannot tell). Each collective ends for its members
when the last has arrived plus ``TRANSFER_US``. So the stalled rank's TP peer waits for it at
the broadcast, then runs in lockstep with it and arrives as late at its own DP group's
all-reduce; every step's time is the same on every rank. TP coordinate 1 computes ``TP1_US``
longer per layer (so the peer, not the stalled rank, is the last to arrive there) and copies
its gradients for ``TP1_GRADS_US`` before their all-reduce, TP coordinate 0 as long after it
(so the DP groups end apart, as gloo's do: the ends alone split them; all arrive together
at the world all-reduce).

Ranks are ``tp + TP·dp``; the manifests name the layout and the host (``per_host`` ranks each).
"""

import json
import os

from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE

from .simulated_job import manifest

FREE_US, COMPUTE_US, TRANSFER_US, GAP_US = 200.0, 3000.0, 150.0, 20.0
STALL_US = 50_000.0
TP1_US = 5.0
TP1_GRADS_US = 12_000.0
LAYERS = 2
START_US = 2_000_000.0
MAIN, GLOO = 1, 2  # the threads: the caller's, gloo's


def _plan(tp, dp, slow):
    """Per rank, the events of one step from its start, and the step's length."""
    ranks = tp * dp
    now = {r: FREE_US + (STALL_US if slow.get(r) == "free" else 0.0) for r in range(ranks)}
    events = {r: [] for r in range(ranks)}

    def groups(kind):
        if kind == "tp":
            return [[d * tp + t for t in range(tp)] for d in range(dp)]
        if kind == "dp":
            return [[d * tp + t for d in range(dp)] for t in range(tp)]
        return [list(range(ranks))]

    def compute():
        for r in now:
            length = COMPUTE_US * (3.0 if slow.get(r) == "compute" else 1.0) + TP1_US * (r % tp)
            events[r].append(("cpu_op", "aten::mm", MAIN, now[r], length))
            now[r] += length + GAP_US

    def collective(kind, name, scope):
        for members in groups(kind):
            end = max(now[r] for r in members) + TRANSFER_US
            for r in members:
                if scope:
                    events[r].append(("cpu_op", scope, MAIN, now[r] - 2.0, end - now[r] + 4.0))
                events[r].append(("cpu_op", "c10d::" + name + "_", MAIN, now[r], 3.0))
                events[r].append(("user_annotation", "gloo:" + name, GLOO, now[r] + 1.0,
                                  end - now[r] - 1.0))
                now[r] = end + GAP_US

    def mark(name, body):
        starts = dict(now)
        body()
        for r in now:
            events[r].append(("user_annotation", name, MAIN, starts[r] - 1.0,
                              now[r] - starts[r]))

    def forward():
        collective("tp", "broadcast", None)
        for _ in range(LAYERS):
            compute()
            collective("tp", "all_reduce", "_ReduceFromModelParallelRegion")

    def backward():
        for _ in range(LAYERS):
            compute()
            collective("tp", "all_reduce",
                       "LinearWithGradAccumulationAndAsyncCommunicationBackward")

    mark("forward-compute stage=0 chunk=0 mb=0", forward)
    mark("backward-compute stage=0 chunk=0 mb=0", backward)
    def grads():
        def copy(ranks):
            for r in ranks:
                events[r].append(("cpu_op", "aten::copy_", MAIN, now[r], TP1_GRADS_US))
                now[r] += TP1_GRADS_US
        copy([r for r in now if r % tp])
        collective("dp", "all_reduce", None)
        copy([r for r in now if not r % tp])

    mark("grads-all-reduce stage=0", grads)
    collective("world", "all_reduce", None)
    return events, max(now.values()) + GAP_US


def gloo_groups_job(directory, tp=2, dp=2, steps=(3, 4, 5, 6, 7), slow=None, per_host=2):
    """Write the job's traces and manifests under ``directory``; returns ``directory``."""
    slow = slow or {}
    os.makedirs(str(directory), exist_ok=True)
    events, length = _plan(tp, dp, slow)
    ranks = tp * dp
    for rank in range(ranks):
        out = [{"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                "args": {"name": "python"}}]
        ts = START_US
        for step in steps:
            out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                        "pid": rank, "tid": MAIN, "ts": ts, "dur": length})
            out.extend({"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": tid,
                        "ts": ts + start, "dur": dur}
                       for cat, name, tid, start, dur in events[rank])
            ts += length + 30.0
        name = TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns=1_700_000_000_000_000_000 + rank)
        with open(os.path.join(str(directory), name), "w") as handle:
            json.dump({"schemaVersion": 1, "traceEvents": out}, handle)
        manifest(directory, rank, ranks, tp, f"node{rank // per_host}", name, steps)
    return str(directory)
