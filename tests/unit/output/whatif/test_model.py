"""The what-if dependency model on Megatron's interleaved schedule (virtual stages), on a table
built by hand: 2 stages x 2 virtual chunks, 2 microbatches, one DP replica, every transfer
instantaneous, so each step time below is worked out on paper and the model must find it.

Megatron's interleaved order for p=2, v=2, m=2 (``microbatch_group_size_per_vp_stage`` = p;
stage 0 warms up with all 4 forwards, stage 1 with 2; a backward takes the chunks in reverse),
``(mb, chunk)``; the model's chunk order (``gmc = chunk x p + stage``) is s0c0, s1c0, s0c1, s1c1:

    stage 0: F(0,0) F(1,0) F(0,1) F(1,1) B(0,1) B(1,1) B(0,0) B(1,0)
    stage 1: F(0,0) F(1,0) F(0,1) B(0,1) F(1,1) B(1,1) B(0,0) B(1,0)

A forward of chunk c on stage 1 needs the same one on stage 0; a forward of chunk 1 on stage 0
needs chunk 0's on stage 1; a backward needs the next chunk's backward (stage 1's chunk 1 its
own forward, before it in its order).
"""

import pytest

from mindspeed_prof.output.pipeline.bubble import theory
from mindspeed_prof.output.whatif import analysis, schema
from output_fixtures.whatif_job import Op, as_table

P, V, M = 2, 2, 2
META = schema.JobMeta(trial_name="interleaved", dp_size=1, pp_size=P, vpp_size=V, world_size=P)

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


def _ops(compute):
    """The compute ops and, around each, its transfers as the paper's table has them: a receive
    posted when the stage is free and ending when the computation starts, a send from the
    computation's end to the moment its peer's computation starts (zero-length where the chunk
    has no peer: the model's first chunk receives no forward, its last sends none)."""
    place = {(kind, mb, chunk * P + stage): (start, end)
             for stage, kind, mb, chunk, start, end in compute}
    ops, free = [], {0: 0.0, 1: 0.0}
    for stage, kind, mb, chunk, start, end in sorted(compute, key=lambda c: c[4]):
        gmc = chunk * P + stage
        step = 1 if kind == "F" else -1  # the next chunk's way
        timer = "forward" if kind == "F" else "backward"
        receive = place.get((kind, mb, gmc - step))
        send_to = place.get((kind, mb, gmc + step))
        ops.append(Op(stage, 0, stage, 1, f"{timer}-recv", free[stage] if receive else start,
                      start - free[stage] if receive else 0.0))
        ops.append(Op(stage, 0, stage, 1, f"{timer}-compute", start, end - start, chunk=chunk,
                      mb=mb))
        ops.append(Op(stage, 0, stage, 1, f"{timer}-send", end,
                      send_to[0] - end if send_to else 0.0))
        free[stage] = end
    return ops


def test_the_interleaved_schedule_is_replayed_to_the_step_time_worked_out_by_hand():
    result = analysis.analyse(as_table(_ops(RECORDED)), META, "interleaved")
    assert result.recorded_s == pytest.approx([27.0])
    assert result.simulated_s == pytest.approx([27.0])  # no launch delay to remove
    # Every op typical: a forward 1.5 s (the mean of 1 and 2), a backward 3 s, on both stages:
    #   s0 F(0,0) 0-1.5  F(1,0) 1.5-3  F(0,1) 3-4.5  F(1,1) 4.5-6
    #   s1 F(0,0) 1.5-3  F(1,0) 3-4.5  F(0,1) 4.5-6  B(0,1) 6-9  F(1,1) 9-10.5  B(1,1) 10.5-13.5
    #   s0 B(0,1) 9-12   B(1,1) 13.5-16.5
    #   s1 B(0,0) 13.5-16.5  B(1,0) 16.5-19.5
    #   s0 B(0,0) 16.5-19.5  B(1,0) 19.5-22.5
    assert result.ideal_s == pytest.approx([22.5])
    assert result.slowdown == pytest.approx(27 / 22.5)
    # Balanced, a stage computes m x v x (1.5 + 3) = 18 s of the 22.5: the bubble is 4.5 s,
    # (p-1) x v x (1.5 + 3) / v, Megatron's interleaved bubble, the fraction pipeline's theory
    # gives: (p-1)/(v x m + p-1) = 1/5
    assert (22.5 - M * V * 4.5) / 22.5 == pytest.approx(theory("interleaved", P, V, M))


def test_fixing_the_slow_stage_of_an_interleaved_schedule_saves_what_the_hand_replay_says():
    result = analysis.analyse(as_table(_ops(RECORDED)), META, "interleaved")
    by_stage = {e.name: e for e in result.by_stage}
    assert [e.name for e in result.by_stage] == ["1", "0"]
    # Stage 1 typical (1.5 s, 3 s), stage 0 as recorded (1 s, 2 s):
    #   s0 F(0,0) 0-1  F(1,0) 1-2         s1 F(0,0) 1-2.5  F(1,0) 2.5-4
    #   s0 F(0,1) 2.5-3.5  F(1,1) 4-5     s1 F(0,1) 4-5.5  B(0,1) 5.5-8.5  F(1,1) 8.5-10
    #   s1 B(1,1) 10-13                   s0 B(0,1) 8.5-10.5  B(1,1) 13-15
    #   s1 B(0,0) 13-16  B(1,0) 16-19     s0 B(0,0) 16-18  B(1,0) 19-21
    assert by_stage["1"].fixed_step_s == pytest.approx(21.0)
    assert by_stage["1"].saving == pytest.approx(1 - 21 / 27)
    # Stage 0 typical (1.5 s, 3 s), stage 1 as recorded (2 s, 4 s): stage 0 was the faster one,
    # so "fixing" it costs time:
    #   s0 F(0,0) 0-1.5  F(1,0) 1.5-3     s1 F(0,0) 1.5-3.5  F(1,0) 3.5-5.5
    #   s0 F(0,1) 3.5-5  F(1,1) 5.5-7     s1 F(0,1) 5.5-7.5  B(0,1) 7.5-11.5  F(1,1) 11.5-13.5
    #   s1 B(1,1) 13.5-17.5               s0 B(0,1) 11.5-14.5  B(1,1) 17.5-20.5
    #   s1 B(0,0) 17.5-21.5  B(1,0) 21.5-25.5   s0 B(0,0) 21.5-24.5  B(1,0) 25.5-28.5
    assert by_stage["0"].fixed_step_s == pytest.approx(28.5)
    # a group's S keeps only it as recorded: stage 1's is the replay just above
    assert by_stage["1"].slowdown == pytest.approx(28.5 / 22.5)
    assert by_stage["0"].slowdown == pytest.approx(21 / 22.5)
