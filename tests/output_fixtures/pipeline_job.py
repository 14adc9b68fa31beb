"""A pipeline-parallel job's torch traces with schedule marks, timed by a 1F1B simulation.

Each stage runs its 1F1B order (p-s-1 warm-up forwards, then one forward one backward, then the
cool-down backwards); a forward waits for the previous stage's forward of the same microbatch,
a backward for the next stage's backward. Every stage's schedule call (``forward-backward``)
starts at the step's start and ends when the whole pipeline has drained, as Megatron's ends in
the gradient synchronisation every stage joins (the tied embedding's all-reduce between the first
and the last stage, the DP all-reduce). Times in µs; names as the patches write them.
"""

import json
import os

from mindspeed_prof.config import schedule_marks as sm
from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE

from .samples import write_manifest


def one_f_one_b(stages, microbatches, forward_us, backward_us):
    """stage -> [(timer, mb, start, end)] of one step: ``forward_us[s]``/``backward_us[s]``
    each stage's time per microbatch."""
    order = {}
    for s in range(stages):
        warm = min(stages - s - 1, microbatches)
        ops = [(sm.FORWARD_COMPUTE, mb) for mb in range(warm)]
        for mb in range(microbatches - warm):
            ops += [(sm.FORWARD_COMPUTE, warm + mb), (sm.BACKWARD_COMPUTE, mb)]
        ops += [(sm.BACKWARD_COMPUTE, mb) for mb in range(microbatches - warm, microbatches)]
        order[s] = ops
    done, position, free = {}, {s: 0 for s in range(stages)}, {s: 0.0 for s in range(stages)}
    timeline = {s: [] for s in range(stages)}
    while any(position[s] < len(order[s]) for s in range(stages)):
        for s in range(stages):
            if position[s] == len(order[s]):
                continue
            timer, mb = order[s][position[s]]
            if timer == sm.FORWARD_COMPUTE:
                needs = (sm.FORWARD_COMPUTE, s - 1, mb) if s > 0 else None
                length = forward_us[s]
            else:
                needs = (sm.BACKWARD_COMPUTE, s + 1, mb) if s < stages - 1 else \
                    (sm.FORWARD_COMPUTE, s, mb)
                length = backward_us[s]
            if needs is not None and needs not in done:
                continue
            start = max(free[s], done[needs] if needs else 0.0)
            done[(timer, s, mb)] = free[s] = start + length
            timeline[s].append((timer, mb, start, start + length))
            position[s] += 1
    return timeline


def pipeline_job(directory, stages=2, microbatches=4, steps=(3, 4), forward_us=None,
                 backward_us=None, schedule=None, microbatch_marks=True, timeline=None,
                 chunks=1):
    """Torch traces and manifests of a PP=``stages`` job (one DP replica), one per rank
    (``schedule``: the name the step's range carries, 1F1B's by default, interleaved's with
    ``chunks`` > 1; ``microbatch_marks=False``: a replaced schedule's steps, whose microbatches
    are unmarked; ``timeline``: stage -> [(timer, mb, start, end, chunk)] of one step instead
    of the 1F1B simulation, an interleaved schedule's with ``chunks`` virtual chunks)."""
    forward_us = forward_us or [1000.0] * stages
    backward_us = backward_us or [2000.0] * stages
    os.makedirs(directory, exist_ok=True)
    timeline = timeline or one_f_one_b(stages, microbatches, forward_us, backward_us)
    schedule = schedule or (sm.INTERLEAVED if chunks > 1 else sm.ONE_F_ONE_B)
    end = max(op[3] for ops in timeline.values() for op in ops)
    for stage in range(stages):
        events, origin = [], 1_000_000.0
        for step in steps:
            events.append({"ph": "X", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                           "ts": origin, "dur": end + 200.0})
            outer = sm.name(sm.FORWARD_BACKWARD, stage, schedule=schedule,
                            stages=stages, chunks=chunks, microbatches=microbatches)
            events.append({"ph": "X", "name": outer, "pid": 1, "tid": 1, "ts": origin + 100.0,
                           "dur": end})
            for timer, mb, start, stop, *chunk in timeline[stage] if microbatch_marks else ():
                events.append({"ph": "X", "name": sm.name(timer, stage, chunk=(chunk or [0])[0],
                                                          mb=mb),
                               "pid": 1, "tid": 1, "ts": origin + 100.0 + start,
                               "dur": stop - start})
            origin += end + 1000.0
        path = os.path.join(str(directory), TORCH_TRACE_TEMPLATE.format(rank=stage,
                                                                       time_ns=1000 + stage))
        with open(path, "w") as handle:
            json.dump({"traceEvents": events}, handle)
        write_manifest(directory, stage, world_size=stages, selected_ranks=list(range(stages)),
                       backend="torch", files=[os.path.basename(path)],
                       parallel={"tensor_model_parallel_size": 1,
                                 "pipeline_model_parallel_size": stages,
                                 "data_parallel_size": 1, "context_parallel_size": 1,
                                 "rank": stage, "world_size": stages})
    return end
