"""The timeline's event rewrite in C (``output/timeline/_eventpatch.c``) writes the events the
Python path (``_RankWriter._rewrite``) writes, counted the same: each rank's part decoded and
compared event by event (keys in any order) on real torch CPU traces, the real torch_npu
samples, the simulated jobs, hostile events and generated ones.

The C source is compiled here, once per session, from the checkout (the module a ``pip
install`` built is the same source, but a test run from a checkout does not import it); where
no C compiler is found these tests skip, saying so: ``timeline`` then runs its Python path."""

import gzip
import importlib.util
import json
import os
import shutil
import sys
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindspeed_prof.output.timeline import write
from helpers.ccompiler import c_compiler
from output_fixtures import samples
from output_fixtures.simulated_job import simulated_job
from output_fixtures.torch_traces import torch_trace

SOURCE = os.path.join(os.path.dirname(write.__file__), "_eventpatch.c")
ORIGIN = 1704161511420000  # µs: the Ascend samples' first step, as merge.origin_us makes it
TORCH_NPU_FLOW_ID = 1704161511422904204  # 19 digits, as torch_npu writes its flow ids


@pytest.fixture(scope="session")
def patch(tmp_path_factory):
    """The extension built from the checkout's C source."""
    from setuptools import Distribution, Extension

    compiler = c_compiler()
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler here ({compiler}): timeline runs its Python path alone")
    assert os.path.exists(SOURCE), SOURCE  # where a compiler is, the build must succeed
    out = tmp_path_factory.mktemp("eventpatch")
    dist = Distribution({"ext_modules": [Extension(
        "_eventpatch", [SOURCE], extra_compile_args=["-O2", "-ffp-contract=off"])]})
    build = dist.get_command_obj("build_ext")
    build.build_lib, build.build_temp = str(out), str(out / "tmp")
    build.ensure_finalized()
    build.run()
    built = build.get_ext_fullpath("_eventpatch")
    spec = importlib.util.spec_from_file_location("_eventpatch", built)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Counted:
    """The extension, counting the pieces it rewrote itself (not left to the Python path)."""

    def __init__(self, module):
        self.module, self.pieces = module, 0
        self.IdMap = module.IdMap

    def rewrite(self, *args):
        done = self.module.rewrite(*args)
        self.pieces += done is not None
        return done


def part_of(tmp_path, monkeypatch, module, files, shift, keep_steps, min_us, origin):
    """One rank's part as write_rank writes it with ``module`` (None: the Python path):
    its events decoded, and its counts."""
    monkeypatch.setattr(write, "native", lambda: module)
    part = str(tmp_path / ("native" if module else "pure"))
    counts = write.write_rank(part, 2, "rank 2", files, shift, keep_steps, min_us, origin)
    with open(part, "rb") as handle:
        text = zlib.decompressobj(-zlib.MAX_WBITS).decompress(handle.read())
    os.unlink(part)
    os.unlink(part + write.COUNTS_SUFFIX)
    return json.loads(b"[" + text + b"]"), counts


def assert_same(tmp_path, monkeypatch, patch, files, shift=12.5, keep_steps=None, min_us=0.0,
                origin=ORIGIN):
    files = [(str(path), base_ns, span) for path, base_ns, span in files]
    pure, pure_counts = part_of(tmp_path, monkeypatch, None, files, shift, keep_steps, min_us,
                                origin)
    counted = Counted(patch)
    native, native_counts = part_of(tmp_path, monkeypatch, counted, files, shift, keep_steps,
                                    min_us, origin)
    assert native_counts == pure_counts
    assert len(native) == len(pure) == native_counts.events
    for index, (ours, theirs) in enumerate(zip(native, pure)):
        assert json.dumps(ours, sort_keys=True) == json.dumps(theirs, sort_keys=True), index
    pure_counts.native_pieces = counted.pieces
    return pure_counts


def trace_file(tmp_path, events, name="trace.json", torch=False, separators=(",", ":")):
    path = tmp_path / name
    body = {"schemaVersion": 1, "traceEvents": events} if torch else events
    path.write_text(json.dumps(body, separators=separators, ensure_ascii=False),
                    encoding="utf-8")
    return path


def raw_file(tmp_path, texts, name="raw.json"):
    """A bare array of events given as their JSON text (what json.dumps cannot write)."""
    path = tmp_path / name
    path.write_bytes(b"[" + b",\n".join(t.encode("utf-8") if isinstance(t, str) else t
                                        for t in texts) + b"]")
    return path


def test_the_native_rewrite_writes_the_python_paths_events_on_real_torch_cpu_traces(
        tmp_path, monkeypatch, patch):
    trace = torch_trace(tmp_path / "t", start=5, end=9)
    counts = assert_same(tmp_path, monkeypatch, patch, [(trace, 0, None)], origin=0)
    assert counts.events > 100 and counts.native_pieces
    with open(trace) as handle:
        steps = {e["name"]: e["ts"] for e in json.load(handle)["traceEvents"]
                 if e.get("name", "").startswith("ProfilerStep#")}
    span = (steps["ProfilerStep#6"], steps["ProfilerStep#8"])
    counts = assert_same(tmp_path, monkeypatch, patch, [(trace, 0, span)], keep_steps=(6, 7),
                         min_us=2.0, origin=int(span[0]))
    assert counts.dropped_outside and counts.dropped_short


@pytest.mark.parametrize("sample", [samples.TIMELINE_GZ, samples.HEATMAP_TRACE,
                                    samples.TINY_TRACE])
def test_the_native_rewrite_writes_the_python_paths_events_on_the_torch_npu_samples(
        tmp_path, monkeypatch, patch, sample):
    path = tmp_path / "trace_view.json"
    opener = gzip.open if sample.endswith(".gz") else open
    with opener(sample, "rb") as source, open(path, "wb") as target:
        shutil.copyfileobj(source, target)
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)])
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], min_us=5.0, shift=-3.25)
    counts = assert_same(tmp_path, monkeypatch, patch,
                         [(path, 1500, (1704161511420400.5, 1704161511520400))],
                         keep_steps=(1, 2))
    assert counts.native_pieces
    if sample == samples.TIMELINE_GZ:  # torch_npu's string timestamps, its flows
        assert counts.dropped_outside > 0 and counts.events > 3000


def test_the_native_rewrite_writes_the_python_paths_events_on_a_simulated_job_with_kernels(
        tmp_path, monkeypatch, patch):
    folder = simulated_job(tmp_path / "job", ranks=2, steps=(5, 6, 7), device=True, kernels=3)
    traces = sorted(os.path.join(folder, name) for name in os.listdir(folder))
    # two captures of one rank: ids and threads kept apart per capture, as the Python path does
    counts = assert_same(tmp_path, monkeypatch, patch,
                         [(traces[0], 0, None), (traces[1], 10_000, None)], origin=0)
    assert counts.events > 40 and counts.native_pieces


def test_pieces_cut_inside_strings_and_events_in_several_pieces_are_written_the_same(
        tmp_path, monkeypatch, patch):
    """3 MB of events: several pieces, some cut at a "}, {" inside a name (that piece is
    decoded one event at a time), process names in the middle, flows across pieces."""
    events = []
    for n in range(16_000):
        name = "op}, {x" if n % 997 == 0 else f"aten::op_{n % 50}"
        events.append({"ph": "X", "name": name, "pid": 7, "tid": n % 3,
                       "ts": f"{ORIGIN + n * 10}.{n % 1000:03d}", "dur": (n % 13) * 0.7,
                       "cat": "cpu_op", "args": {"Sequence number": n, "note": "é☃ " * 20}})
        if n % 40 == 0:
            events.append({"ph": "s" if n % 80 else "f", "id": TORCH_NPU_FLOW_ID + n // 80,
                           "pid": 7, "tid": 1, "ts": ORIGIN + n * 10, "cat": "async_npu",
                           "name": "torch_to_npu", "bp": "e"})
        if n == 8000:
            events.append({"ph": "M", "name": "thread_name", "pid": 7, "tid": 2,
                           "args": {"name": "late"}})
    path = trace_file(tmp_path, events, torch=True, separators=(", ", ": "))
    assert os.path.getsize(path) > 3 * (1 << 20)
    counts = assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], min_us=1.0)
    assert counts.dropped_short > 1000 and counts.native_pieces


# Events written as text: what the files hold at their worst (read/numbers.py's unreadable
# values, text where numbers are, escapes, nested args, unicode, duplicate keys, odd types).
HOSTILE = [
    '{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"host \\u00e9"}}',
    '{"ph":"M","name":"thread_name","pid":1,"tid":3,"args":{"name":"main"}}',
    '{"ph":"M","name":"process_sort_index","pid":1,"args":{"sort_index":4}}',
    '{"ph":"X","name":"ok","pid":1,"tid":3,"ts":"1704161511420289.011","dur":3.5}',
    '{"ph":"X","name":"nan text","pid":1,"tid":3,"ts":"nan","dur":1}',
    '{"ph":"X","name":"inf text","pid":1,"tid":3,"ts":"inf","dur":1}',
    '{"ph":"X","name":"-inf","pid":1,"tid":3,"ts":"-Infinity","dur":1}',
    '{"ph":"X","name":"1e400 text","pid":1,"tid":3,"ts":"1e400","dur":1}',
    '{"ph":"X","name":"past the bound","pid":1,"tid":3,"ts":1e19,"dur":1}',
    '{"ph":"X","name":"huge int","pid":1,"tid":3,"ts":123456789012345678901234567890,"dur":1}',
    '{"ph":"X","name":"big finite","pid":1,"tid":3,"ts":1e308,"dur":1}',
    '{"ph":"X","name":"spaces","pid":1,"tid":3,"ts":" 1704161511420290.5 ","dur":"2"}',
    '{"ph":"X","name":"underscores","pid":1,"tid":3,"ts":"1_704_161_511_420_291","dur":2}',
    '{"ph":"X","name":"escaped ts","pid":1,"tid":3,"ts":"\\u0031704161511420292.25","dur":2}',
    '{"ph":"X","name":"short text ts","pid":1,"tid":3,"ts":"12.5","dur":2}',
    '{"ph":"X","name":"exp text ts","pid":1,"tid":3,"ts":"1.7e15","dur":2}',
    '{"ph":"X","name":"text dur","pid":1,"tid":3,"ts":1704161511420293,"dur":"7.25"}',
    '{"ph":"X","name":"bad dur","pid":1,"tid":3,"ts":1704161511420293,"dur":"abc"}',
    '{"ph":"X","name":"nan dur","pid":1,"tid":3,"ts":1704161511420293,"dur":"nan"}',
    '{"ph":"X","name":"null dur","pid":1,"tid":3,"ts":1704161511420293,"dur":null}',
    '{"ph":"X","name":"bool dur","pid":1,"tid":3,"ts":1704161511420293,"dur":true}',
    '{"ph":"X","name":"list dur","pid":1,"tid":3,"ts":1704161511420293,"dur":[1]}',
    '{"ph":"X","name":"no dur","pid":1,"tid":3,"ts":1704161511420293}',
    '{"ph":"X","name":"bool ts","pid":1,"tid":3,"ts":false,"dur":1}',
    '{"ph":"X","name":"null ts","pid":1,"tid":3,"ts":null,"dur":1}',
    '{"ph":"X","name":"list ts","pid":1,"tid":3,"ts":[1],"dur":1}',
    '{"ph":"X","name":"no ts","pid":1,"tid":3,"dur":1}',
    '{"ph":"X","name":"ProfilerStep#3","pid":1,"tid":3,"ts":1704161511420294,"dur":0.1}',
    '{"ph":"X","name":"ProfilerStep#3x","pid":1,"tid":3,"ts":1704161511420294,"dur":0.1}',
    '{"ph":"X","name":"ProfilerStep#","pid":1,"tid":3,"ts":1704161511420294,"dur":0.1}',
    '{"ph":"X","name":"ProfilerStep#99999999999999999999999","pid":1,"tid":3,'
    '"ts":1704161511420294,"dur":0.1}',
    '{"ph":"X","name":"Profiler\\u0053tep#4","pid":1,"tid":3,"ts":1704161511420294,"dur":9}',
    '{"ph":"X","name":"ProfilerStep#\\u0039","pid":1,"tid":3,"ts":1704161511420294,"dur":9}',
    '{"ph":"X","name":17,"pid":1,"tid":3,"ts":1704161511420294,"dur":0.5}',
    '{"ph":"X","name":"nested","pid":1,"tid":3,"ts":1704161511420295.123456,"dur":4,'
    '"args":{"a":[1,{"b":"}, {"}],"c":"\\"quoted\\" \\\\ \\n","d":{"e":{"f":[[[]]]}}},'
    '"unknown":{"x":[1,2,3]},"tts":5,"cname":"good","s":"g"}',
    '{"ph":"X","name":"unicode ☃ é 𝄞","pid":"Ascend Hardware","tid":"Stream 2",'
    '"ts":1704161511420296,"dur":4,"args":{"text":"δ 日本 \\ud83d\\ude00"}}',
    '{"ph":"X","name":"dup keys","pid":1,"tid":3,"ts":1,"ts":1704161511420297,"dur":4}',
    '{"ph":"X","name":"escaped key","p\\u0069d":5,"tid":3,"ts":1704161511420297,"dur":4}',
    '{"ph":"X","name":"list pid","pid":[1,2],"tid":3,"ts":1704161511420297,"dur":4}',
    '{"ph":"X","name":"float pid","pid":1.0,"tid":3.5,"ts":1704161511420297,"dur":4}',
    '{"ph":"X","name":"bool tid","pid":true,"tid":false,"ts":1704161511420297,"dur":4}',
    '{"ph":"X","name":"null pid","pid":null,"ts":1704161511420297,"dur":4}',
    '{"ph":"X","name":"escaped pid","pid":"H\\u00e9","tid":"t","ts":1704161511420297,"dur":4}',
    '{"ph":"X","name":"big pid","pid":123456789012345678901234,"tid":3,"ts":1704161511420297,'
    '"dur":4}',
    '{"ph":"s","name":"flow","id":1704161511422904204,"cat":"async_npu","pid":1,"tid":3,'
    '"ts":"1704161511420298.5"}',
    '{"ph":"f","name":"flow","id":1704161511422904204,"cat":"async_npu","pid":1,"tid":3,'
    '"ts":"1704161511420299.5","bp":"e"}',
    '{"ph":"s","id":"0x1f","cat":"c","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"t","id":"0x1f","cat":"c","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"b","id":2.5,"cat":"c","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"e","id":true,"cat":"c","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"n","id":null,"cat":"c","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"S","id":[1],"cat":"c","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"F","id":{"a":1},"cat":"c","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"s","id":12345678901234567890123456789,"cat":"c","pid":1,"tid":3,'
    '"ts":1704161511420300}',
    '{"ph":"s","id":7,"cat":5,"pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"s","id":7,"cat":null,"pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"s","id":7,"pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"s","id":7,"cat":"None","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"s","id":"7","cat":"c\\u00e9","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":"X","id":7,"cat":"c","pid":1,"tid":3,"ts":1704161511420300,"dur":1}',
    '{"ph":"\\u0058","name":"escaped ph","pid":1,"tid":3,"ts":1704161511420300,"dur":0.01}',
    '{"ph":"XX","name":"long ph","pid":1,"tid":3,"ts":1704161511420300,"dur":0.01}',
    '{"ph":5,"name":"number ph","pid":1,"tid":3,"ts":1704161511420300}',
    '{"ph":null,"name":"null ph","pid":1,"tid":3,"ts":1704161511420300,"name":null}',
    '{"name":"no ph","pid":1,"tid":3,"ts":1704161511420300,"args":null,"cat":null}',
    '{"ph":"i","pid":1,"tid":3,"ts":-5e-4,"s":"t"}',
    '{"ph":"i","pid":1,"tid":3,"ts":-0.0}',
    '{"ph":"i","pid":1,"tid":3,"ts":0.0005}',
    '{"ph":"i","pid":1,"tid":3,"ts":0.0015}',
    '{"ph":"i","pid":1,"tid":3,"ts":"1704161511420300.0005"}',
    '{"ph":"i","pid":1,"tid":3,"ts":"0001704161511420300.0015"}',
    '{"ph":"i","pid":1,"tid":3,"ts":1E3}',
    '{"ph":"i","pid":1,"tid":3,"ts":0.0625}',
    '{"ph":"i","pid":1,"tid":3,"ts":0.1875}',
    '{"ph":"i","pid":1,"tid":3,"ts":"1704161511420300.0625"}',
    '{"ph":"i","pid":1,"tid":3,"ts":"1704161511420300.1875"}',
    '{"ph":"i","pid":1,"tid":3,"ts":2.0000005}',
    '{"ph":"i","name":"span start","pid":1,"tid":3,"ts":1704161511420290}',
    '{"ph":"i","name":"span end","pid":1,"tid":3,"ts":1704161511420299}',
    '{"ph":"i","name":"span end text","pid":1,"tid":3,"ts":"1704161511420299.000"}',
    '{"ph":"i","name":"span start text","pid":1,"tid":3,"ts":"1704161511420290"}',
    '{"ph":"i","name":"23 digits","pid":1,"tid":3,"ts":"12345678901234567890123.5"}',
    '{"ph":"i","name":"19 digits","pid":1,"tid":3,"ts":"9223372036854775808.5"}',
    '{"ph":"i","name":"leading zeros","pid":1,"tid":3,"ts":"0000000001704161511420300.5"}',
    '{"ph":"i","name":"past int64","pid":1,"tid":3,"ts":"99999999999999999999999.5"}',
    '{"ph":"i","name":"past int64","pid":1,"tid":3,"ts":"55555555555555555555555.5"}',
    '{"ph":"i","pid":1,"tid":3,"ts":9007199254740993}',
    '{"ph":"i","pid":1,"tid":3,"ts":-9007199254740993}',
    '{"ph":"C","name":"counter","pid":1,"tid":3,"ts":1704161511420301,'
    '"args":{"value":1.5e-300,"big":1e300}}',
    '{}',
    '{ "ph" : "X" , "name" : "blanks" , "pid" : 1 , "tid" : 3 ,\n\t"ts" : 1704161511420302 ,'
    ' "dur" : 1 }',
]


def test_hostile_events_are_written_and_counted_as_the_python_path_does(
        tmp_path, monkeypatch, patch):
    path = raw_file(tmp_path, HOSTILE)
    counts = assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)])
    assert counts.unreadable >= 15 and counts.native_pieces == 1  # all but the last event
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], min_us=2.0)
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, (1704161511420290, 1704161511420299))],
                keep_steps=(2, 3), origin=0)
    # ties at the third decimal (0.0625 ms -> 0.062, 0.1875 -> 0.188: to even, as round does)
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], shift=0.0, origin=0)
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], shift=0.0,
                origin=1704161511420300)


def test_strings_with_a_byte_that_needs_attention_at_every_place_are_written_the_same(
        tmp_path, monkeypatch, patch):
    """The scan skips plain string bytes 16 at a time: a quote escape, a backslash escape, a
    \\u escape, a two-, three- and four-byte character and DEL (plain), at each offset of
    strings 0-40 bytes long, in a field that is copied (args), one that is read (name) and a
    key, are found as the byte loop finds them."""
    specials = ['\\"', "\\\\", "\\u00e9", "\u00e9", "\u20ac", "\U0001f600", "\x7f"]
    texts = []
    for special in specials:
        for before in range(0, 34, 3):
            for after in (0, 1, 7, 16):
                text = "a" * before + special + "b" * after
                texts.append('{"ph":"X","name":"%s","pid":1,"tid":3,"ts":%d,"dur":2,'
                             '"args":{"k":"%s","%s":1}}' % (text, len(texts), text, text))
    path = raw_file(tmp_path, texts)
    counts = assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], origin=0)
    # every event kept, and the rank's process and thread named (2 + 2 metadata events)
    assert counts.events == len(texts) + 4 and counts.native_pieces
    # a byte msgspec refuses (not UTF-8, a control character) leaves the piece to Python,
    # wherever it lies in a string
    state = write._Rank(pid=3, shift=0.0, keep_steps=None, min_us=0.0, ids=patch.IdMap())
    params = write._native_params(state, 0, None, 0)
    for bad in (b"\xff", b"\xc3", b"\x01", b"\x1f", b"\xed\xa0\x80"):
        for before in range(0, 34, 3):
            text = b"a" * before + bad + b"b" * 20
            array = b'[{"ph":"X","name":"n","pid":1,"tid":3,"ts":1,"dur":2,"args":{"k":"' + \
                text + b'"}}]'
            assert patch.rewrite(array, params, state.tids, state.ids, state, None) is None, \
                (bad, before)


def test_a_rewrite_called_inside_another_writes_its_own_piece(patch):
    """The rewrite keeps its buffers from one call to the next; a call made while another runs
    (from its fallback) takes buffers of its own and leaves the outer call's output whole."""
    def piece(names):
        return ("[" + ",".join('{"ph":"X","name":"%s","pid":1,"tid":3,"ts":%d,"dur":2}' % (n, i)
                                for i, n in enumerate(names)) + "]").encode()

    def run(array, fallback):
        state = write._Rank(pid=3, shift=0.0, keep_steps=None, min_us=0.0, ids=patch.IdMap())
        params = write._native_params(state, 0, None, 0)
        return patch.rewrite(array, params, state.tids, state.ids, state, fallback)

    inner_piece = piece(["inner"] * 3000)
    inner_alone = run(inner_piece, None)
    outer_piece = b"[" + piece(["outer"] * 2000)[1:-1] + \
        b',{"ph":"M","name":"thread_name","pid":1,"tid":3,"args":{"name":"t"}},' + \
        piece(["after"] * 2000)[1:]
    inner_results = []

    def fallback(raw):  # the metadata event: a whole rewrite runs meanwhile
        inner_results.append(run(inner_piece, None))
        return None

    outer = run(outer_piece, fallback)
    assert inner_results == [inner_alone]
    assert outer == run(outer_piece, lambda raw: None)
    events = json.loads(b"[" + outer[0] + b"]")
    assert [e["name"] for e in events] == ["outer"] * 2000 + ["after"] * 2000
    assert outer[1:] == (4000, 0, 0, 0)


@pytest.mark.parametrize("bad", [
    '{"ph":"X","name":"lone surrogate \\ud800","pid":1,"tid":3,"ts":5,"dur":1}',
    '{"ph":"X","name":"x","pid":1,"tid":3,"ts":5,"dur":1e400}',
    b'{"ph":"X","name":"bad utf-8 \xff","pid":1,"tid":3,"ts":5,"dur":1}',
    '{"ph":"X","name":"NaN literal","pid":1,"tid":3,"ts":NaN,"dur":1}',
    '{"ph":"X","name":"control \x01 char","pid":1,"tid":3,"ts":5,"dur":1}',
    '17',
])
def test_a_piece_msgspec_refuses_is_left_to_the_python_path_whole(
        tmp_path, monkeypatch, patch, bad):
    """Before any state changed: the events around it are written as the Python path writes
    them (one at a time, or refused as corrupt, the same way)."""
    good = HOSTILE[3]
    path = raw_file(tmp_path, [good, good, bad, good, good])
    array = path.read_bytes()
    state = write._Rank(pid=3, shift=0.0, keep_steps=None, min_us=0.0, ids=patch.IdMap())
    params = write._native_params(state, 0, None, ORIGIN)
    assert patch.rewrite(array, params, state.tids, state.ids, state, None) is None
    assert state.tids == {} and len(state.ids) == 0 and state.next_id == 0
    try:
        pure = part_of(tmp_path, monkeypatch, None, [(str(path), 0, None)], 0.0, None, 0.0,
                       ORIGIN)
    except Exception as exc:  # noqa: BLE001 - the same refusal is asked of the C path
        with pytest.raises(type(exc)):
            part_of(tmp_path, monkeypatch, patch, [(str(path), 0, None)], 0.0, None, 0.0,
                    ORIGIN)
    else:
        assert part_of(tmp_path, monkeypatch, patch, [(str(path), 0, None)], 0.0, None, 0.0,
                       ORIGIN) == pure


def test_the_pure_switch_and_a_missing_module_give_the_python_path(monkeypatch):
    monkeypatch.setenv(write.PURE_ENV, "1")
    assert write.native() is None
    monkeypatch.delenv(write.PURE_ENV)
    # what an install without a compiler meets: no module to import
    monkeypatch.setitem(sys.modules, "mindspeed_prof.output.timeline._eventpatch", None)
    monkeypatch.delattr(sys.modules["mindspeed_prof.output.timeline"], "_eventpatch",
                        raising=False)
    assert write.native() is None


# Generated events: every field a viewer reads, of every JSON kind the files hold.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
NUMBERS = st.one_of(st.integers(-2 ** 63, 2 ** 64), st.floats(allow_nan=False,
                                                                allow_infinity=False))
TIME_TEXT = st.one_of(
    st.builds(lambda w, f: f"{w}.{f}", st.integers(0, 10 ** 17), st.integers(0, 999999)),
    st.integers(0, 10 ** 19).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e400", " 5 ", "5_0", "", ".5", "5.", "-3.5",
                     "1e5", "0x10"]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6)
PHASES = st.sampled_from(["X", "X", "X", "M", "s", "f", "t", "b", "e", "n", "i", "C", "", "XY"])
EVENT = st.fixed_dictionaries({}, optional={
    "ph": st.one_of(PHASES, st.none(), st.integers(0, 3)),
    "name": st.one_of(TEXT, st.sampled_from(["ProfilerStep#5", "ProfilerStep#12", "thread_name",
                                             "process_name", "ProfilerStep#x", "a}, {b"]),
                      st.none(), st.integers()),
    "cat": st.one_of(TEXT, st.none(), st.integers(0, 3)),
    "pid": st.one_of(st.integers(-3, 3), st.integers(2 ** 62, 2 ** 70), TEXT, st.none(),
                     st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                     st.lists(st.integers(0, 2), max_size=2)),
    "tid": st.one_of(st.integers(-3, 3), TEXT, st.none(), st.booleans()),
    "ts": st.one_of(NUMBERS, TIME_TEXT, st.none(), st.booleans(), st.lists(st.integers())),
    "dur": st.one_of(NUMBERS, TIME_TEXT, st.none(), st.booleans()),
    "id": st.one_of(st.integers(-2 ** 70, 2 ** 70), TEXT, st.none(), st.booleans(),
                    st.floats(allow_nan=False, allow_infinity=False)),
    "args": VALUES, "tts": VALUES, "bp": VALUES, "s": VALUES, "id2": VALUES,
    "other": VALUES,
})


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(EVENT, max_size=25), torch=st.booleans(), ascii_only=st.booleans(),
       spaced=st.booleans(), min_us=st.sampled_from([0.0, 1.0, 1e6]),
       steps=st.sampled_from([None, (5, 6)]), span=st.sampled_from([None, (-1e6, 1e12)]),
       origin=st.sampled_from([0, ORIGIN]))
def test_generated_events_are_written_and_counted_as_the_python_path_does(
        tmp_path, monkeypatch, patch, events, torch, ascii_only, spaced, min_us, steps, span,
        origin):
    body = {"traceEvents": events} if torch else events
    path = tmp_path / "generated.json"
    path.write_text(json.dumps(body, ensure_ascii=ascii_only,
                               separators=(", ", ": ") if spaced else (",", ":")),
                    encoding="utf-8")
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, span)], keep_steps=steps,
                min_us=min_us, origin=origin)


def test_a_flow_id_met_first_on_either_path_is_one_number_on_both(tmp_path, monkeypatch, patch):
    """The id map lives in C (``IdMap``) and the Python path (events the C code leaves to it)
    reads and fills the same map: an id met first with an escape in its string (Python's),
    then plainly (C's), and the reverse, an integer written ``-0`` and ``0``, a cat with an
    escape and without, a cat absent and ``null``: one number per (cat, id), as the Python
    path alone numbers them. A map of dicts would pass only where no event went to Python."""
    def flow(ph, cat, ident, ts):
        cat_field = "" if cat is None else f'"cat":{cat},'
        return f'{{"ph":"{ph}","name":"f","pid":1,"tid":3,{cat_field}"ts":{ts},"id":{ident}}}'
    pairs = [('"a"', '"\\u0031"', '"a"', '"1"'), ('"a"', '"2"', '"a"', '"\\u0032"'),
             ('"a"', "-0", '"a"', "0"), ('"\\u0062"', "7", '"b"', "7"),
             (None, "9", "null", "9"), ('"a"', "1", '"a"', '"1"'),
             ('"c"', "123456789012345678901", '"c"', "123456789012345678901"),
             ('"%s"' % ("k" * 50), '"%s"' % ("v" * 60), '"%s"' % ("k" * 50), '"%s"' % ("v" * 60))]
    texts = []
    for index, (cat_s, id_s, cat_f, id_f) in enumerate(pairs):
        texts.append(flow("s", cat_s, id_s, 10 + index))
        texts.append(flow("f", cat_f, id_f, 20 + index))
    path = raw_file(tmp_path, texts)
    assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], origin=0)
    events, _ = part_of(tmp_path, monkeypatch, Counted(patch), [(str(path), 0, None)], 0.0,
                        None, 0.0, 0)
    ids = [e["id"] for e in events if e.get("ph") in ("s", "f")]
    # pairs 0-4 join; pair 5 an int (new) and the str "1" (pair 0's); pair 6 21 digits; pair
    # 7 a key past a slot's own bytes (kept beside the table)
    assert ids[0:10:2] == ids[1:10:2] and len(set(ids[0:10:2])) == 5
    assert ids[10] not in ids[:10] and ids[11] == ids[0] and ids[12] == ids[13]
    assert ids[14] == ids[15] and len(set(ids)) == 5 + 1 + 1 + 1


def test_the_id_map_answers_as_a_dict_of_its_keys(patch):
    ids = patch.IdMap()
    assert ids.get(("cat", 5)) is None and len(ids) == 0
    ids[("cat", 5)] = 11
    ids[("cat", "5")] = 12
    ids[("c\udc80t", "\ud800")] = 13  # what the Python path may hold: lone surrogates
    assert (ids.get(("cat", 5)), ids.get(("cat", "5")), ids[("c\udc80t", "\ud800")]) == \
        (11, 12, 13)
    assert ids.get(("ca", "t5")) is None and ids.get(("cat", 5.0)) is None
    with pytest.raises(KeyError):
        ids[("cat", 6)]
    with pytest.raises(TypeError):
        ids[("cat", 6.5)] = 1
    for n in range(5000):  # past its first table's size; long keys beside the table
        ids[("x", n)] = n
        ids[("x" * 40, f"{n:060d}")] = -n
    assert len(ids) == 10003 and all(ids.get(("x", n)) == n for n in range(0, 5000, 7))
    assert all(ids[("x" * 40, f"{n:060d}")] == -n for n in range(0, 5000, 7))
    assert ids.get(("x" * 40, f"{1:059d}")) is None
    ids[("x", 4999)] = 7  # a key set again: its value changes, no entry is added
    ids[("x" * 40, f"{3:060d}")] = 8
    assert (ids[("x", 4999)], ids[("x" * 40, f"{3:060d}")], len(ids)) == (7, 8, 10003)
    ids.clear()
    assert len(ids) == 0 and ids.get(("cat", 5)) is None
    for n in range(3000):  # filled again from nothing, past its first table once more
        ids[("y", n)] = n + 1
    assert len(ids) == 3000 and ids.get(("x", 1)) is None
    assert all(ids[("y", n)] == n + 1 for n in range(3000))


@pytest.mark.parametrize("min_us", [0.0, 2.0])
def test_durations_read_or_left_unread_keep_and_drop_as_the_python_path(
        tmp_path, monkeypatch, patch, min_us):
    """With no minimum the C code reads no plain duration (>= 0, under 1e18 by its digits):
    every edge of that shortcut, kept and dropped as the Python path decides."""
    durations = ["0", "-0", "-1.5", "0.5", "2", "1.66001658356567", "999999999999999999.5",
                 "1000000000000000000", "1000000000000000001", "12345678901234567890",
                 "1e2", "1E18", "1e19", "-1e300", "0.0000001"]
    texts = ['{"ph":"X","name":"op %d","pid":1,"tid":3,"ts":%d,"dur":%s}' % (i, i, d)
             for i, d in enumerate(durations)]
    path = raw_file(tmp_path, texts)
    counts = assert_same(tmp_path, monkeypatch, patch, [(path, 0, None)], min_us=min_us,
                         origin=0)
    assert counts.native_pieces and counts.events > 4  # the piece is C's
