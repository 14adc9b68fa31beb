"""Streaming chrome traces: same events as json.load, in pieces, for both file shapes."""

import gzip
import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindspeed_prof.output.read import jsonstream, tracescan
from mindspeed_prof.output.read.errors import CorruptFile
from mindspeed_prof.output.read.scratch import BoolScratch
from output_fixtures import samples

SMALL = 256  # bytes per read: forces many cuts inside events, strings and numbers


@pytest.fixture
def timeline(tmp_path):
    path = tmp_path / "trace_view.json"
    with gzip.open(samples.TIMELINE_GZ, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def events_of(path, chunk=SMALL):
    return [e for batch in jsonstream.iter_event_batches(path, chunk) for e in batch]


def write(tmp_path, text, name="trace_view.json"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_real_trace_view_streams_to_the_same_events_as_json_load(timeline):
    expected = json.loads(timeline.read_text())
    assert events_of(timeline) == expected
    assert events_of(timeline, chunk=1 << 20) == expected


@pytest.mark.parametrize("sample", [samples.HEATMAP_TRACE, samples.TINY_TRACE])
def test_small_real_traces_stream_whole(sample):
    with open(sample) as handle:
        assert events_of(sample, chunk=64) == json.load(handle)


def test_torch_trace_object_streams_its_trace_events_and_reads_the_other_keys(tmp_path):
    data = {"schemaVersion": 1, "deviceProperties": [{"id": 0}, {"id": 1}],
            "traceEvents": [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1} for i in range(50)],
            "traceName": "x", "displayTimeUnit": "ms"}
    path = write(tmp_path, json.dumps(data, indent=2), "rank0.1.pt.trace.json")
    assert events_of(path) == data["traceEvents"]


def test_keys_after_trace_events_with_nested_objects_do_not_end_the_array_early(tmp_path):
    events = [{"ph": "X", "name": "a", "args": {"k": [{"x": 1}, {"y": 2}]}}] * 40
    text = json.dumps({"traceEvents": events, "deviceProperties": [{"a": 1}, {"b": 2}]})
    assert events_of(write(tmp_path, text, "t.pt.trace.json"), chunk=100) == events


def test_boundaries_inside_strings_and_nested_lists_are_not_mistaken_for_events(tmp_path):
    events = [{"name": "a}, {b", "args": {"list": [{"x": "}, {"}, {"y": 1}]}},
              {"name": "c", "args": {"s": "]}, {\"ph\": 1}"}}] * 30
    assert events_of(write(tmp_path, json.dumps(events)), chunk=64) == events


def test_gzipped_torch_trace_streams(tmp_path):
    data = {"traceEvents": [{"ph": "X", "name": "op", "ts": 1.5, "dur": 2}] * 10}
    path = tmp_path / "rank0.1.pt.trace.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump(data, handle)
    assert events_of(path) == data["traceEvents"]


def test_multibyte_characters_cut_by_a_chunk_are_kept(tmp_path):
    events = [{"name": "算子" * 7 + str(i), "ph": "X"} for i in range(60)]
    assert events_of(write(tmp_path, json.dumps(events, ensure_ascii=False)), chunk=37) == events


def test_nan_values_json_accepts_are_accepted(tmp_path):
    text = "[" + ", ".join('{"ph": "X", "dur": NaN, "n": %d}' % i for i in range(200)) + "]"
    assert len(events_of(write(tmp_path, text), chunk=1024)) == 200
    assert tracescan.scan_trace(write(tmp_path, text), chunk=1024).events == 200


@pytest.mark.parametrize("text, reason", [
    ("", "empty file"),
    ("   \n", "empty file"),
    ('[{"ph": "X"}, {"ph": "X"', "truncated"),
    ('[{"ph": "X"}, {"ph": "X"},', "truncated"),
    ('[{"ph": "X"} {"ph": "X"}]', "invalid JSON"),
    ('[{"ph": "X"}, {"ph": "X"}] trailing', "extra data"),
    ("hello", "not a chrome trace"),
    ('{"schemaVersion": 1}', "no 'traceEvents'"),
    ('{"traceEvents": [{"a": 1}', "truncated"),
    ('{"traceEvents": [{"a": 1}], "x": ', "truncated"),
])
def test_broken_traces_raise_corrupt_file_with_the_reason(tmp_path, text, reason):
    with pytest.raises(CorruptFile, match=reason):
        events_of(write(tmp_path, text))
    with pytest.raises(CorruptFile, match=reason):
        tracescan.scan_trace(write(tmp_path, text))


def test_a_truncated_real_trace_is_reported_as_truncated(timeline):
    data = timeline.read_bytes()
    timeline.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFile, match="truncated"):
        tracescan.scan_trace(timeline, chunk=4096)


def test_invalid_utf8_is_corrupt(tmp_path):
    path = tmp_path / "trace_view.json"
    path.write_bytes(b'[{"name": "\xff\xfe"}]')
    with pytest.raises(CorruptFile, match="UTF-8"):
        tracescan.scan_trace(path)


def test_scan_counts_every_event_and_finds_steps_and_processes(timeline):
    scan = tracescan.scan_trace(timeline, chunk=8192)
    events = json.loads(timeline.read_text())
    assert scan.events == len(events)
    assert sorted(scan.steps) == [1]
    assert "Ascend Hardware" in scan.npu_processes()
    assert set(scan.processes.values()) >= {"Python", "CANN", "Overlap Analysis"}


_events = st.lists(st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "M", "s", "f"]),
    "name": st.text(max_size=12),
    "ts": st.one_of(st.floats(0, 1e16, allow_nan=False), st.text("0123456789.", max_size=20)),
    "args": st.dictionaries(st.text(max_size=5), st.one_of(
        st.integers(), st.text(max_size=10), st.lists(st.dictionaries(st.text(max_size=3),
                                                                      st.integers()),
                                                      max_size=3)), max_size=3),
}), max_size=40)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_events, chunk=st.integers(16, 300), indent=st.sampled_from([None, 1]),
       wrapped=st.booleans())
def test_any_event_list_streams_back_unchanged(tmp_path, events, chunk, indent, wrapped):
    data = {"traceEvents": events, "traceName": "t"} if wrapped else events
    path = write(tmp_path, json.dumps(data, indent=indent, ensure_ascii=False))
    assert events_of(path, chunk) == events
    assert tracescan.scan_trace(path, chunk).events == len(events)


def test_steps_are_found_among_other_hashes_and_at_the_very_start(tmp_path):
    events = [{"ph": "X", "name": "ProfilerStep#4", "ts": 1, "dur": 9},
              {"ph": "X", "name": "#define #x", "ts": 2, "dur": 1},
              {"ph": "X", "name": "aten::add#ProfilerStep", "ts": 3, "dur": 1},
              {"ph": "X", "name": "ProfilerStep#5", "ts": 10, "dur": 9}]
    text = json.dumps(events, separators=(",", ":"))
    assert list(tracescan._step_hits('"ProfilerStep#1"'[1:])) == [0]
    scan = tracescan.scan_trace(write(tmp_path, text))
    assert scan.steps == {4: (1.0, 9.0), 5: (10.0, 9.0)} and scan.events == 4


@settings(max_examples=80, deadline=None)
@given(text=st.binary(max_size=400), places=st.lists(st.integers(0, 400), max_size=6),
       lo=st.integers(0, 30), tail=st.integers(0, 30))
def test_the_metadata_marker_is_found_wherever_bytes_find_finds_it(text, places, lo, tail):
    # numpy lines up its first and last bytes: every place find() reports, and no other
    needle = tracescan._METADATA_MARKER
    data = bytearray(text)
    for place in sorted(places, reverse=True):
        data[place:place] = needle
    hi = max(lo, len(data) - tail)
    expected, i = [], data.find(needle, lo, hi)
    while i >= 0:
        expected.append(i)
        i = data.find(needle, i + 1, hi)
    assert tracescan._marker_hits(data, needle, lo, hi, BoolScratch(2)) == expected


def test_process_metadata_is_found_in_every_piece_and_across_piece_sizes(tmp_path):
    events = [{"ph": "X", "name": f"op{i}", "pid": 1, "ts": i, "dur": 1} for i in range(3000)]
    for at, pid in ((0, 7), (1500, 8), (2999, 9)):  # first, middle, last event of the file
        events.insert(at, {"ph": "M", "name": "process_name", "pid": pid,
                           "args": {"name": f"lane {pid}"}})
    path = write(tmp_path, json.dumps(events))
    for chunk in (64, 1000, 1 << 20):
        assert tracescan.scan_trace(path, chunk).processes == {7: "lane 7", 8: "lane 8",
                                                                9: "lane 9"}


# tracescan.quick_steps: timeline's steps from the markers alone (the file not validated)


def _quick(path, block):
    with open(path, "rb") as handle:
        return tracescan._quick(handle, block)


@pytest.mark.parametrize("block", [16, 64, tracescan.QUICK_BLOCK])
def test_quick_steps_are_the_validated_scans_on_the_real_sample(timeline, block):
    full = tracescan.scan_trace(timeline)
    quick = _quick(timeline, block) if block != tracescan.QUICK_BLOCK else \
        tracescan.quick_steps(str(timeline))
    assert quick is not None and full.steps and quick.steps == full.steps
    assert quick.unreadable == full.unreadable


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 9), st.one_of(
    st.floats(0, 1e16, allow_nan=False), st.sampled_from(["1704161511420289.011", "nan"]))),
    max_size=8), filler=st.integers(0, 30), block=st.integers(16, 700),
    indent=st.sampled_from([None, 1]), wrapped=st.booleans())
def test_quick_steps_agree_with_the_validated_scan_or_step_aside(
        tmp_path, steps, filler, block, indent, wrapped):
    """Wherever the markers fall against the reads (blocks down to 16 bytes), repeated steps,
    a step's name inside another event's args, unreadable times: the same steps as the
    validated scan, or None (the caller then scans whole), never other steps."""
    events = [{"ph": "X", "name": "first", "ts": 0, "dur": 1},
              {"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2,
               "args": {"note": "ProfilerStep#9", "list": [{"name": "ProfilerStep#8"}]}}]
    for number, ts in steps:
        events += [{"ph": "X", "name": f"ProfilerStep#{number}", "ts": ts, "dur": 3}] + \
            [{"ph": "X", "name": f"op{i}", "ts": 5, "dur": 1, "args": {"#": "#"}}
             for i in range(filler)]
    events.append({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x#"}})
    data = {"traceEvents": events, "traceName": "ProfilerStep#7"} if wrapped else events
    path = write(tmp_path, json.dumps(data, indent=indent))
    full = tracescan.scan_trace(path)
    quick = _quick(path, block)
    assert quick is None or (quick.steps == full.steps and quick.unreadable == full.unreadable)
    if not wrapped and indent is None and steps:  # plain arrays: nothing stands in the way
        assert quick is not None


@pytest.mark.parametrize("text", [
    '[{"ph":"X","name":"ProfilerStep#1","ts":1,"dur":2},{"ph":"X","name":"a","ts":1,"dur":1}]',
    '[{"ph":"X","name":"a","ts":1,"dur":1},{"ph":"X","name":"ProfilerStep#1","ts":1,"dur":2}]',
    '[{"ph":"X","name":"a","ts":1,"dur":1},{"ph":"X","name":"b","ts":1,"dur":1,"args":{"l":['
    '{"name":"ProfilerStep#3","ph":"X","ts":5,"dur":1},{"y":2}]}},{"ph":"X","name":"c"}]',
])
def test_quick_steps_step_aside_where_a_marker_cannot_be_decoded_alone(tmp_path, text):
    # the first and the last event (no boundary on one side), a step opening a nested list
    path = write(tmp_path, text)
    assert tracescan.quick_steps(str(path)) is None
    assert tracescan.scan_trace(path).events in (2, 3)


def test_a_step_nested_between_objects_of_a_list_reads_as_the_validated_scan_reads_it(
        tmp_path):
    """Known limit of both scans (decoding only around markers): an X event named
    ProfilerStep#N nested between two objects of a list in another event's args decodes
    alone, and both count it as a step; what the quick read must not do is differ."""
    path = write(tmp_path, '[{"ph":"X","name":"a","ts":1,"dur":1},{"ph":"X","name":"b",'
                           '"args":{"l":[{"x":1},{"name":"ProfilerStep#3","ph":"X","ts":5,'
                           '"dur":1},{"y":2}]}},{"ph":"X","name":"c","ts":1,"dur":1}]')
    assert tracescan.quick_steps(str(path)).steps == tracescan.scan_trace(path).steps


def test_quick_steps_step_aside_for_gzip_and_what_is_no_regular_file(tmp_path):
    import os

    gz = tmp_path / "t.json.gz"
    with gzip.open(gz, "wt") as handle:
        handle.write('[{"ph":"X","name":"a"},{"ph":"X","name":"ProfilerStep#1","ts":1,'
                     '"dur":2},{"ph":"X","name":"b"}]')
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert tracescan.quick_steps(str(gz)) is None
    assert tracescan.quick_steps(str(fifo)) is None  # refused at once: never waits for a writer
    assert tracescan.quick_steps(str(tmp_path / "gone.json")) is None


@pytest.mark.parametrize("inside", ["ProfilerStep#1 ", 'ProfilerStep#1},{"ph":"X",'])
def test_markers_by_the_thousand_inside_one_string_step_aside_at_the_first(tmp_path, inside):
    """A hostile string full of markers (and of event boundaries): the first marker's event
    does not decode alone, and the quick read gives up there, never trying the next 40 000."""
    text = json.dumps(inside * 40_000)
    path = write(tmp_path, '[{"ph":"X","name":"a","ts":1,"dur":1},{"ph":"X","name":"b",'
                           '"args":{"s":' + text + '}},{"ph":"X","name":"c","ts":2,"dur":1}]')
    assert tracescan.quick_steps(str(path)) is None
    assert tracescan.scan_trace(path).steps == {}
