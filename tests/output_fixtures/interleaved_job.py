"""A hand-timed interleaved job (Megatron's interleaved 1F1B, virtual stages) as the paper's
per-op table: 2 stages x 2 virtual chunks, 2 microbatches, one DP replica, every transfer
instantaneous, so each step time is worked out on paper (tests/unit/output/whatif/test_model.py
works them out; the published analyzer agrees, test_whatif_artifact.py).

Megatron's interleaved order for p=2, v=2, m=2 (``microbatch_group_size_per_vp_stage`` = p;
stage 0 warms up with all 4 forwards, stage 1 with 2; a backward takes the chunks in reverse),
``(mb, chunk)``; the model's chunk order (``gmc = chunk x p + stage``) is s0c0, s1c0, s0c1, s1c1:

    stage 0: F(0,0) F(1,0) F(0,1) F(1,1) B(0,1) B(1,1) B(0,0) B(1,0)
    stage 1: F(0,0) F(1,0) F(0,1) B(0,1) F(1,1) B(1,1) B(0,0) B(1,0)

A forward of chunk c on stage 1 needs the same one on stage 0; a forward of chunk 1 on stage 0
needs chunk 0's on stage 1; a backward needs the next chunk's backward (stage 1's chunk 1 its
own forward, before it in its order).
"""

from mindspeed_prof.output.whatif import schema

from .whatif_job import Op

P, V, M = 2, 2, 2
META = schema.JobMeta(trial_name="interleaved", dp_size=1, pp_size=P, vpp_size=V, world_size=P)
META_YAML = ("trial_name: interleaved\nrun_id: 0\ndp_size: 1\ndsp_size: 1\npp_size: 2\n"
             "tp_size: 1\nvpp_size: 2\nworld_size: 2\n")

# As recorded: stage 0 computes a forward in 1 s and a backward in 2 s, stage 1 twice as slow
# (2 s, 4 s). (stage, kind, mb, chunk, start, end), each start the later of the stage being
# free and its input being there:
#   s0 F(0,0) 0-1    F(1,0) 1-2
#   s1 F(0,0) 1-3    F(1,0) 3-5            (inputs at 1 and 2; stage busy until 3)
#   s0 F(0,1) 3-4    F(1,1) 5-6            (inputs: s1's chunk-0 forwards, at 3 and 5)
#   s1 F(0,1) 5-7    B(0,1) 7-11   F(1,1) 11-13   B(1,1) 13-17
#   s0 B(0,1) 11-13  B(1,1) 17-19          (inputs: s1's chunk-1 backwards, at 11 and 17)
#   s1 B(0,0) 17-21  B(1,0) 21-25          (inputs at 13 and 19; stage busy until 17, 21)
#   s0 B(0,0) 21-23  B(1,0) 25-27
# The step as recorded: 27 s.
RECORDED = [
    (0, "F", 0, 0, 0, 1), (0, "F", 1, 0, 1, 2), (0, "F", 0, 1, 3, 4), (0, "F", 1, 1, 5, 6),
    (0, "B", 0, 1, 11, 13), (0, "B", 1, 1, 17, 19), (0, "B", 0, 0, 21, 23),
    (0, "B", 1, 0, 25, 27),
    (1, "F", 0, 0, 1, 3), (1, "F", 1, 0, 3, 5), (1, "F", 0, 1, 5, 7), (1, "B", 0, 1, 7, 11),
    (1, "F", 1, 1, 11, 13), (1, "B", 1, 1, 13, 17), (1, "B", 0, 0, 17, 21),
    (1, "B", 1, 0, 21, 25),
]


def ops(compute=None, whole_step=False):
    """The compute ops and, around each, its transfers as the paper's table has them: a receive
    posted when the stage is free and ending when the computation starts, a send from the
    computation's end to the moment its peer's computation starts (zero-length where the chunk
    has no peer: the model's first chunk receives no forward, its last sends none).
    ``whole_step``: with the zero-length rows of what the dependency model names after the
    computations (gc, the gradient all-reduces, the clipping, the optimizer), which the
    published analyzer needs in its table (as ``export`` writes them)."""
    compute = compute or RECORDED
    place = {(kind, mb, chunk * P + stage): (start, end)
             for stage, kind, mb, chunk, start, end in compute}
    out, free = [], {0: 0.0, 1: 0.0}
    for stage, kind, mb, chunk, start, end in sorted(compute, key=lambda c: c[4]):
        gmc = chunk * P + stage
        step = 1 if kind == "F" else -1  # the next chunk's way
        timer = "forward" if kind == "F" else "backward"
        receive = place.get((kind, mb, gmc - step))
        send_to = place.get((kind, mb, gmc + step))
        out.append(Op(stage, 0, stage, 1, f"{timer}-recv", free[stage] if receive else start,
                      start - free[stage] if receive else 0.0))
        out.append(Op(stage, 0, stage, 1, f"{timer}-compute", start, end - start, chunk=chunk,
                      mb=mb))
        out.append(Op(stage, 0, stage, 1, f"{timer}-send", end,
                      send_to[0] - end if send_to else 0.0))
        free[stage] = end
    if whole_step:
        done = max(c[5] for c in compute)
        for stage in range(P):
            last = max(c[5] for c in compute if c[0] == stage)
            for timer, at in (("gc", last), ("layernorm-grads-all-reduce", last),
                              ("embedding-grads-all-reduce", done),
                              ("optimizer-clip-main-grad", done), ("optimizer", done)):
                out.append(Op(stage, 0, stage, 1, timer, at, 0.0))
    return out
