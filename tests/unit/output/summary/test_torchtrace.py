"""Self time from nested trace events, whatever order the file lists them in."""

import json
import random

import pytest

from mindspeed_prof.output.summary.torchtrace import summarize_trace

# a step holding forward (holding two matmuls) and backward; a second thread; a GPU kernel
EVENTS = [
    {"ph": "X", "name": "ProfilerStep#7", "cat": "user_annotation", "pid": 1, "tid": 1,
     "ts": 0.0, "dur": 100.0},
    {"ph": "X", "name": "forward", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 50.0},
    {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 2.0, "dur": 10.0},
    {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 20.0, "dur": 20.0},
    {"ph": "X", "name": "backward", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 60.0, "dur": 30.0},
    {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": 5.0, "dur": 7.0},
    {"ph": "X", "name": "gemm_kernel", "cat": "kernel", "pid": 0, "tid": 7, "ts": "3.5",
     "dur": 4.0},
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    {"ph": "X", "name": "ProfilerStep#7", "cat": "gpu_user_annotation", "pid": 0, "tid": 9,
     "ts": 0.0, "dur": 120.0},
]


def write(tmp_path, events):
    path = tmp_path / "rank0.1.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events, "traceName": "t"}))
    return path


@pytest.mark.parametrize("order", ["as_written", "reversed", "shuffled"])
def test_self_time_is_duration_minus_direct_children(tmp_path, order):
    events = list(EVENTS)
    if order == "reversed":
        events.reverse()
    elif order == "shuffled":
        random.Random(3).shuffle(events)
    result = summarize_trace(write(tmp_path, events))
    assert result.steps == {7: 100.0}  # the host step, not the GPU annotation
    assert result.ops["forward"][:2] == [20.0, 1]
    assert result.ops["aten::mm"][:2] == [37.0, 3]
    assert result.ops["backward"][:2] == [30.0, 1]
    assert result.ops["gemm_kernel"] == [4.0, 1, "kernel"]
    assert "ProfilerStep#7" not in result.ops


def test_equal_start_makes_the_longer_event_the_parent(tmp_path):
    events = [{"ph": "X", "name": "child", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
              {"ph": "X", "name": "parent", "pid": 1, "tid": 1, "ts": 10.0, "dur": 9.0}]
    result = summarize_trace(write(tmp_path, events))
    assert result.ops["parent"][0] == 4.0 and result.ops["child"][0] == 5.0


def test_events_without_numbers_are_skipped(tmp_path):
    events = [{"ph": "X", "name": "a", "ts": "x", "dur": 1}, {"ph": "X", "name": "b", "ts": 1},
              {"ph": "X", "ts": 1, "dur": 1}, "junk", {"ph": "X", "name": "c", "ts": 1, "dur": 2}]
    result = summarize_trace(write(tmp_path, events))
    assert list(result.ops) == ["c"] and result.events == 5
