"""``mindspeed-prof timeline``: one Chrome-trace/Perfetto file of many ranks, read back from disk:
a named process per rank, the asked steps' markers only, clocks aligned with the offsets stated,
torch traces and the real Ascend sample, RL roles and request windows."""

import gzip
import json
import os
import shutil

import pytest

from helpers.cli import run_cli
from helpers.inference import armed, config, serve
from output_fixtures import samples
from output_fixtures.torch_traces import torch_trace
from helpers.role_runs import profile_role

SHIFT_US = 5_000_000.0  # another host's clock: 5 s ahead


def merged(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def process_names(data):
    return {e["pid"]: e["args"]["name"] for e in data["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name"}


def step_markers(data):
    """{pid: {N: (ts, dur)}} of the ProfilerStep#N events."""
    found = {}
    for e in data["traceEvents"]:
        if e["ph"] == "X" and e["name"].startswith("ProfilerStep#"):
            found.setdefault(e["pid"], {})[int(e["name"].split("#")[1])] = (e["ts"], e["dur"])
    return found


def write_manifest(save, rank, hostname="node0", world=2, tp=2):
    samples.write_manifest(save, rank, hostname=hostname, world_size=world, backend="torch",
                           parallel={"tensor_model_parallel_size": tp,
                                     "pipeline_model_parallel_size": 1,
                                     "data_parallel_size": world // tp,
                                     "context_parallel_size": 1, "rank": rank,
                                     "world_size": world})


def shift_trace(path, by_us):
    """The same trace as another host's clock would stamp it."""
    with open(path) as handle:
        data = json.load(handle)
    for event in data["traceEvents"]:
        if isinstance(event.get("ts"), (int, float)):
            event["ts"] += by_us
    with open(path, "w") as handle:
        json.dump(data, handle)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """Ranks 0 and 1 of a tp=2 job, iterations 5-7, with manifests."""
    save = tmp_path_factory.mktemp("timeline") / "prof"
    for rank in (0, 1):
        torch_trace(save, rank=rank, start=5, end=8)
        write_manifest(save, rank)
    return save


def test_merged_file_opens_as_json_with_one_process_per_rank_named_with_its_place(
        two_ranks, tmp_path, capsys):
    out = tmp_path / "merged.json.gz"
    code, printed, _ = run_cli(capsys, "timeline", two_ranks, "-o", out)
    assert code == 0
    data = merged(out)
    assert process_names(data) == {1: "rank 0 · tp0 pp0 dp0", 2: "rank 1 · tp1 pp0 dp0"}
    assert {pid: sorted(steps) for pid, steps in step_markers(data).items()} == \
        {1: [5, 6, 7], 2: [5, 6, 7]}
    assert {e["pid"] for e in data["traceEvents"]} == {1, 2}
    meta = data["mindspeed_prof"]
    assert set(meta["offsets_us"]) == {"0", "1"} and meta["aligned_on"].startswith(
        "start and end of ProfilerStep#5-7")
    assert f"({os.path.getsize(out) / 1024:,.1f} KB)" in printed
    # Perfetto reads displayTimeUnit only before the events, and stops at a key it does not
    # know: ours comes after every event
    text = gzip.open(out, "rt", encoding="utf-8").read()
    assert text.startswith('{"displayTimeUnit":"ms","traceEvents":[')
    assert text.index('"mindspeed_prof":') > text.rindex('"ph":')
    assert "rank 1 · tp1 pp0 dp0" in printed and "offset +0.0 µs" in printed


def test_steps_keeps_only_the_asked_steps_markers_and_events(two_ranks, tmp_path, capsys):
    out = tmp_path / "one.json.gz"
    code, printed, _ = run_cli(capsys, "timeline", two_ranks, "-o", out, "--steps", "6-6")
    assert code == 0
    data = merged(out)
    markers = step_markers(data)
    assert {pid: sorted(steps) for pid, steps in markers.items()} == {1: [6], 2: [6]}
    for event in data["traceEvents"]:
        if event["ph"] == "X":  # nothing that began before step 6 on its rank
            assert event["ts"] >= markers[event["pid"]][6][0] - 0.001
    assert "outside the steps" in printed and data["mindspeed_prof"]["steps"] == [6, 6]


def test_ranks_selects_by_global_rank_and_by_layout_selector(two_ranks, tmp_path, capsys):
    for selector in ("1", "tp=1"):
        out = tmp_path / f"r{selector.replace('=', '')}.json.gz"
        assert run_cli(capsys, "timeline", two_ranks, "-o", out, "--ranks", selector)[0] == 0
        assert process_names(merged(out)) == {2: "rank 1 · tp1 pp0 dp0"}


def test_min_us_drops_short_events_but_keeps_the_step_markers(two_ranks, tmp_path, capsys):
    out = tmp_path / "long.json"
    code, printed, _ = run_cli(capsys, "timeline", two_ranks, "-o", out, "--min-us", "50")
    assert code == 0
    data = merged(out)
    complete = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert all(e["dur"] >= 50 for e in complete if not e["name"].startswith("ProfilerStep#"))
    assert sum(len(s) for s in step_markers(data).values()) == 6
    assert "shorter than 50 µs" in printed and data["mindspeed_prof"]["dropped_short"] > 0


def test_a_rank_on_another_host_is_aligned_and_its_steps_start_within_the_stated_tolerance(
        tmp_path, capsys):
    save = tmp_path / "prof"
    from mindspeed_prof.output.timeline import clock

    starts = []
    for rank, host in ((0, "node0"), (1, "node1")):
        path = torch_trace(save, rank=rank, start=5, end=8)
        write_manifest(save, rank, hostname=host)
        steps, base, _ = clock.recorded_steps(path)
        starts.append(base / 1000.0 + steps[5][0])
    # the two traces are recorded one after the other: rank 1's steps start later by the time
    # between them (25-50 ms here, more on a loaded machine), then its clock runs 5 s ahead
    shift_trace(next(save.glob("rank1.*.pt.trace.json")), SHIFT_US)
    out = tmp_path / "aligned.json.gz"
    code, printed, _ = run_cli(capsys, "timeline", save, "-o", out)
    assert code == 0
    data = merged(out)
    meta = data["mindspeed_prof"]
    assert meta["clocks"] == "per host" and meta["reference_rank"] == 0
    expected = -(SHIFT_US + starts[1] - starts[0])
    assert meta["offsets_us"]["1"] == pytest.approx(expected, abs=20_000)  # steps' jitter
    markers = step_markers(data)
    for step in (5, 6, 7):
        assert abs(markers[1][step][0] - markers[2][step][0]) <= meta["tolerance_us"] + 0.01
    assert f"offset {meta['offsets_us']['1']:+,.1f} µs" in printed


def test_ranks_of_one_host_keep_its_one_clock(two_ranks, tmp_path, capsys):
    out = tmp_path / "host.json.gz"
    assert run_cli(capsys, "timeline", two_ranks, "-o", out)[0] == 0
    assert merged(out)["mindspeed_prof"]["offsets_us"] == {"0": 0.0, "1": 0.0}


def test_no_step_every_rank_recorded_is_said_and_the_raw_clocks_kept(tmp_path, capsys):
    save = tmp_path / "prof"
    torch_trace(save, rank=0, start=5, end=7)
    torch_trace(save, rank=1, start=10, end=12)
    out = tmp_path / "raw.json.gz"
    code, printed, _ = run_cli(capsys, "timeline", save, "-o", out)
    assert code == 0
    meta = merged(out)["mindspeed_prof"]
    assert meta["aligned_on"] is None and meta["offsets_us"] == {"0": 0.0, "1": 0.0}
    assert any("raw clock" in note for note in meta["notes"])
    assert "clocks: NOT aligned: no step was recorded by every chosen rank" in printed


def test_npu_trace_views_string_timestamps_are_written_as_numbers_in_each_ranks_process(
        tmp_path, capsys):
    save = tmp_path / "prof"
    samples.two_ranks(save)
    out = tmp_path / "npu.json.gz"
    code, _, _ = run_cli(capsys, "timeline", save, "-o", out)
    assert code == 0
    data = merged(out)
    timed = [e for e in data["traceEvents"] if e["ph"] != "M"]
    assert timed and all(isinstance(e["ts"], (int, float)) for e in timed)
    assert process_names(data) == {1: "rank 0", 2: "rank 1"}
    threads = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"}
    assert "Ascend Hardware · Stream 3" in threads
    # "1704161511420289.011": the fraction survives (float() of the string would lose it)
    # (the origin is the earliest aligned step start: rank 1's, its clock 16.5 µs behind by the
    # collectives' ends in communication.json)
    origin = data["mindspeed_prof"]["origin_us"]
    assert 1704161511420289 - origin == 17
    assert step_markers(data)[1][1] == (1704161511420289 - origin + 0.011, 14091.97)
    flows = [e for e in data["traceEvents"] if e["ph"] in ("s", "f")]
    assert {e["id"] >> 32 for e in flows} == {1, 2}  # no id shared across ranks


def test_rl_output_needs_a_role_and_names_the_roles_processes(tmp_path, capsys):
    save = tmp_path / "rl"
    for rank in (0, 1):
        profile_role(save, "rollout", rank)
    profile_role(save, "ref", 0)
    out = tmp_path / "rl.json.gz"
    code, _, err = run_cli(capsys, "timeline", save, "-o", out)
    assert code == 2 and "--role ref" in err and "ref, rollout" in err
    code, _, _ = run_cli(capsys, "timeline", save, "-o", out, "--role", "rollout")
    assert code == 0
    data = merged(out)
    assert sorted(process_names(data).values()) == ["rollout rank 0", "rollout rank 1"]
    assert {pid: sorted(s) for pid, s in step_markers(data).items()} == {1: [2], 2: [2]}
    assert data["mindspeed_prof"]["role"] == "rollout"


def test_request_windows_are_one_timeline_with_steps_and_otherwise_named(tmp_path, capsys):
    driver = armed(config(tmp_path))
    serve(driver, 4)
    driver.close()
    save = tmp_path / "prof"
    out = tmp_path / "req.json.gz"
    code, _, err = run_cli(capsys, "timeline", save, "-o", out)
    assert code == 2 and "--steps A-B" in err and "req_2-2" in err
    code, printed, _ = run_cli(capsys, "timeline", save, "-o", out, "--steps", "2-3")
    assert code == 0 and "requests 2-3" in printed
    data = merged(out)
    assert {pid: sorted(s) for pid, s in step_markers(data).items()} == {1: [2, 3]}
    assert data["mindspeed_prof"]["unit"] == "request"
    window = save / "req_3-3"
    assert run_cli(capsys, "timeline", window, "-o", out)[0] == 0
    assert {pid: sorted(s) for pid, s in step_markers(merged(out)).items()} == {1: [3]}


@pytest.mark.parametrize("args, named", [
    (["-o", "{tmp}/x.txt"], "-o"),
    (["-o", "{tmp}/none/x.json.gz"], "-o"),
    (["-o", "{tmp}/x.json.gz", "--steps", "7-5"], "--steps"),
    (["-o", "{tmp}/x.json.gz", "--steps", "five"], "--steps"),
    (["-o", "{tmp}/x.json.gz", "--min-us", "-1"], "--min-us"),
    (["-o", "{tmp}/x.json.gz", "--ranks", "9"], "--ranks"),
    (["-o", "{tmp}/x.json.gz", "--role", "actor"], "--role"),
])
def test_bad_input_is_one_line_naming_the_argument_and_exit_2(two_ranks, tmp_path, capsys,
                                                             args, named):
    code, _, err = run_cli(capsys, "timeline", two_ranks,
                           *[a.format(tmp=tmp_path) for a in args])
    assert code == 2 and len(err.strip().splitlines()) == 1 and named in err
    assert "Traceback" not in err and not list(tmp_path.glob("x.json*"))


def test_a_missing_directory_is_named(tmp_path, capsys):
    code, _, err = run_cli(capsys, "timeline", tmp_path / "nope", "-o", tmp_path / "x.json.gz")
    assert code == 2 and "DIR" in err and "does not exist" in err


def test_a_trace_copied_under_another_name_keeps_its_rank_from_the_file_name(
        two_ranks, tmp_path, capsys):
    save = tmp_path / "copy"
    shutil.copytree(two_ranks, save)
    (save / "profile_manifest_rank1.json").unlink()
    out = tmp_path / "copy.json.gz"
    assert run_cli(capsys, "timeline", save, "-o", out)[0] == 0
    assert process_names(merged(out))[2] == "rank 1"


def test_ranks_written_by_worker_processes_make_the_same_file(two_ranks, tmp_path, capsys,
                                                              monkeypatch):
    one = tmp_path / "one.json"
    assert run_cli(capsys, "timeline", two_ranks, "-o", one)[0] == 0
    monkeypatch.setenv("MINDSPEED_PROF_OUTPUT_WORKERS", "2")  # a pool even for small files
    two = tmp_path / "two.json"
    assert run_cli(capsys, "timeline", two_ranks, "-o", two)[0] == 0
    assert one.read_bytes() == two.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json", "two.json"]  # no parts


def test_an_event_msgspec_refuses_is_written_all_the_same(tmp_path, capsys):
    save = tmp_path / "prof"
    path = torch_trace(save, rank=0, start=5, end=7)
    text = open(path).read()
    marker = '"ph": "X"'
    assert marker in text
    # NaN is no JSON, but json (and torch's readers) take it: the piece is decoded one by one
    with open(path, "w") as handle:
        handle.write(text.replace(marker, '"ph": "X", "args": {"odd": NaN}', 1))
    out = tmp_path / "nan.json.gz"
    assert run_cli(capsys, "timeline", save, "-o", out)[0] == 0
    data = merged(out)
    assert data["mindspeed_prof"]["unreadable"] == 0
    original = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") not in ("M",)]
    assert data["mindspeed_prof"]["events"] == len(original) + 2 + 2 * len(
        {(e.get("pid"), e.get("tid")) for e in original})  # + process and thread names


def test_an_engine_step_window_is_a_timeline_in_engine_steps(tmp_path, capsys):
    window = tmp_path / "prof" / "estep_3-5"
    torch_trace(window, rank=0, start=3, end=6)
    out = tmp_path / "engine.json.gz"
    code, printed, _ = run_cli(capsys, "timeline", tmp_path / "prof", "-o", out)
    assert code == 0 and "engine steps 3-5" in printed
    data = merged(out)
    assert data["mindspeed_prof"]["unit"] == "engine step"
    assert {pid: sorted(s) for pid, s in step_markers(data).items()} == {1: [3, 4, 5]}


def test_a_file_corrupt_past_its_markers_is_left_out_with_its_reason_though_read_quickly(
        two_ranks, tmp_path, capsys, monkeypatch):
    """Files check has not scanned give their steps from their markers alone (not validated);
    the write finds rank 1's file corrupt, and the choice is made again, validated: the file is
    left out with check's reason, the other rank written, no part left behind."""
    from mindspeed_prof.output.timeline import choose

    save = tmp_path / "prof"
    shutil.copytree(two_ranks, save)
    trace = next(save.glob("rank1.*.pt.trace.json"))
    text = trace.read_text()
    middle = text.index('"name": "aten::', len(text) // 2)
    trace.write_text(text[:middle] + '"name": "aten::\x01broken", ' + text[middle:])
    monkeypatch.setenv("MINDSPEED_PROF_CACHE", str(tmp_path / "empty_cache"))
    calls = []
    select = choose.select

    def spy(*args, **kwargs):
        selection = select(*args, **kwargs)
        calls.append((kwargs.get("quick", False), selection.quick))
        return selection
    monkeypatch.setattr(choose, "select", spy)
    out = tmp_path / "merged.json.gz"

    code, printed, err = run_cli(capsys, "timeline", save, "-o", out)

    assert code == 0, err
    assert calls == [(True, True), (False, False)]
    data = merged(out)
    assert set(process_names(data)) == {1}
    assert any(trace.name in note and "unreadable" in note and "left out" in note
               for note in data["mindspeed_prof"]["notes"])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "empty_cache") == \
        ["merged.json.gz", "prof"]  # no part, no temporary file


def test_files_check_scanned_are_not_read_again_for_their_steps(two_ranks, tmp_path, capsys,
                                                                 monkeypatch):
    from mindspeed_prof.output import cache
    from mindspeed_prof.output.read import tracescan

    monkeypatch.setenv("MINDSPEED_PROF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 1)  # the fixture's files: small, just written
    monkeypatch.setattr(cache, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(cache, "_disabled", False)  # an earlier --no-cache in this process
    assert run_cli(capsys, "check", two_ranks)[0] == 0
    quick = []
    monkeypatch.setattr(tracescan, "quick_steps", lambda path: quick.append(path))
    assert run_cli(capsys, "timeline", two_ranks, "-o", tmp_path / "m.json.gz")[0] == 0
    assert quick == []
