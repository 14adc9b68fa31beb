"""The what-if dependency model on Megatron's interleaved schedule (virtual stages), on the
hand-timed table of ``output_fixtures/interleaved_job.py`` (2 stages x 2 virtual chunks, 2
microbatches, transfers instantaneous, stage 1 twice as slow): each step time below is worked
out on paper, in that module's order, and the model must find it."""

import pytest

from mindspeed_prof.output.pipeline.bubble import theory
from mindspeed_prof.output.whatif import analysis
from output_fixtures.interleaved_job import META, M, P, V, ops
from output_fixtures.whatif_job import as_table


def test_the_interleaved_schedule_is_replayed_to_the_step_time_worked_out_by_hand():
    result = analysis.analyse(as_table(ops()), META, "interleaved")
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
    result = analysis.analyse(as_table(ops()), META, "interleaved")
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
