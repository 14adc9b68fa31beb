"""Leaving one ProfilerStep out of a torch chrome trace, as kineto writes it, keeps valid JSON."""

import json

from mindspeed_prof.backends.trace_steps import remove_step


def event(name, cat="user_annotation", last=False):
    return ('  {\n    "ph": "X", "cat": "%s", "name": "%s", "pid": 1, "tid": 1,\n'
            '    "ts": 1.0, "dur": 2.0\n    ,\n    "args": {\n      "Ev Idx": 0\n    }\n  }%s\n'
            % (cat, name, "" if last else ","))


def trace(*events):
    return '{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + "".join(events) + \
        '  ],"traceName": "t.json" }'


def names(path):
    return [e["name"] for e in json.loads(path.read_text())["traceEvents"]]


def test_the_step_is_removed_and_the_other_events_stay(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(trace(event("ProfilerStep#3"), event("ProfilerStep#4"), event("aten::mm"),
                          event("Record Window End", cat="", last=True)))
    assert remove_step(str(path), 4) is True
    assert names(path) == ["ProfilerStep#3", "aten::mm", "Record Window End"]


def test_the_last_event_can_go_without_leaving_a_trailing_comma(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(trace(event("ProfilerStep#3"), event("ProfilerStep#4", last=True)))
    assert remove_step(str(path), 4) is True
    assert names(path) == ["ProfilerStep#3"]


def test_an_operator_named_like_a_step_is_not_a_step(tmp_path):
    path = tmp_path / "t.json"
    original = trace(event("ProfilerStep#4", cat="cpu_op", last=True))
    path.write_text(original)
    assert remove_step(str(path), 4) is False and path.read_text() == original
