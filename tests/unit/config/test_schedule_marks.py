"""The schedule marks' names: what the patches write, the readers parse back."""

import pytest

from mindspeed_prof.config import schedule_marks as sm


def test_a_compute_mark_names_its_stage_chunk_and_microbatch():
    text = sm.name(sm.FORWARD_COMPUTE, 1, chunk=0, mb=3)
    assert text == "forward-compute stage=1 chunk=0 mb=3"
    assert sm.parse(text) == sm.ScheduleMark(sm.FORWARD_COMPUTE, stage=1, chunk=0, mb=3)


def test_a_send_mark_carries_its_peer_rank():
    mark = sm.parse(sm.name(sm.BACKWARD_SEND, 1, chunk=1, mb=2, peer=0))
    assert (mark.timer, mark.peer, mark.is_p2p, mark.is_compute) == (sm.BACKWARD_SEND, 0, True, False)


def test_the_schedule_mark_carries_the_shape_of_the_pipeline():
    text = sm.name(sm.FORWARD_BACKWARD, 0, schedule=sm.INTERLEAVED, stages=4, chunks=2,
                   microbatches=8)
    mark = sm.parse(text)
    assert (mark.schedule, mark.stages, mark.chunks, mark.microbatches) == (sm.INTERLEAVED, 4, 2, 8)


@pytest.mark.parametrize("text", [
    "ProfilerStep#3", "forward-compute", "forward-compute chunk=0", "forward-compute stage=x",
    "forward-compute stage=1 stage=2", "forward-compute stage=1 colour=red",
    "forward-backward stage=0 schedule=zigzag", "aten::mm stage=1", "forward-compute stage=-1",
    None, "forward-compute stage=" + "9" * 300,
])
def test_names_that_are_not_our_marks_parse_to_none(text):
    assert sm.parse(text) is None
