"""What the readers (check, summary, memory, merge) do with output folders and reports that lie,
loop, block or carry terminal escapes (issue 29 §2 and §4): verdicts never claim more than the
files show; no file hangs a reader, fills its memory, or reaches the terminal raw; a bad file is
one clear line, never a traceback.

The hangs are tested in a child process with a timeout: on a reader that hangs, the test fails
at the timeout instead of hanging the suite (those tests are marked slow: child interpreters).
"""

import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest

from helpers.cli import assert_merge_refuses, rank_entry, run_cli, run_cli_json
from helpers.snapshots import snapshot
from output_fixtures.samples import db_capture, npu_capture, write_manifest
from output_fixtures.torch_traces import torch_trace

HOSTILE = "\x1b]0;pwned\x07\x1b[2J"  # sets the terminal's title, then clears the screen
HANG_LIMIT_S = 120  # a reader that takes this long on a few bytes is hung (it never returns)


def shared_references(levels=40):
    """A list holding one list twice, ``levels`` deep: a few hundred bytes pickled, 2**levels
    leaves when walked as a tree."""
    value: list = []
    for _ in range(levels):
        value = [value, value]
    return value


def readers_in_a_child(directory, *commands):
    """Each ``mindspeed-prof COMMAND DIR`` run in one child process, in turn: (exit codes,
    its output). The child is killed, and the test fails, past HANG_LIMIT_S."""
    script = ("import sys\nfrom mindspeed_prof.cli import main\n"
              "codes = [main([c, sys.argv[1]]) for c in sys.argv[2:]]\n"
              "print('EXIT CODES', *codes)\n")
    try:
        done = subprocess.run([sys.executable, "-c", script, str(directory), *commands],
                              capture_output=True, text=True, timeout=HANG_LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' / '.join(commands)} of {directory} did not return in {HANG_LIMIT_S} s "
                    f"(hung)")
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    codes = [int(c) for c in output.split("EXIT CODES", 1)[1].split()[:len(commands)]]
    return codes, output


# §2: verdicts never claim more than the files show


def test_a_rank_known_only_from_its_snapshot_is_not_a_valid_capture(tmp_path, capsys):
    (tmp_path / "memory_snapshot_rank0.pickle").write_bytes(pickle.dumps(snapshot()))

    code, report = run_cli_json(capsys, "check", tmp_path)

    assert code == 1
    rank = rank_entry(report, 0)
    assert rank["verdict"] == "incomplete"
    assert "known only from its allocator snapshot memory_snapshot_rank0.pickle" \
        in rank["problems"][0]


def test_a_trace_copied_over_another_ranks_is_that_ranks_not_a_valid_capture(tmp_path, capsys):
    # torch: the copy's traceName (the path torch exported to) names rank 0's file
    torch_dir = tmp_path / "torch"
    rank0 = torch_trace(torch_dir, rank=0)
    rank1 = torch_trace(torch_dir, rank=1)
    shutil.copy(rank0, rank1)
    # torch with torch.distributed up: distributedInfo.rank says 0 in rank 1's file
    dist_dir = tmp_path / "distributed"
    dist_dir.mkdir()
    for rank, says in ((0, 0), (1, 0)):
        events = [{"ph": "X", "name": f"ProfilerStep#{n}", "cat": "user_annotation", "pid": 1,
                   "tid": 1, "ts": 100.0 * n, "dur": 90.0} for n in (5, 6, 7)]
        (dist_dir / f"rank{rank}.{1000 + rank}.pt.trace.json").write_text(json.dumps(
            {"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": says,
                                                     "world_size": 2},
             "traceEvents": events}))
    # NPU: rank 0's capture folder copied under rank 1's worker name
    npu_dir = tmp_path / "npu"
    npu_dir.mkdir()
    shutil.copytree(npu_capture(npu_dir, 0, timestamp="20230919172259000"),
                    npu_dir / "rank1_1408367_20230919172259000_ascend_pt")

    for folder in (torch_dir, dist_dir, npu_dir):
        code, report = run_cli_json(capsys, "check", folder)

        assert code == 1, folder
        assert rank_entry(report, 0)["verdict"] == "valid", folder
        copied = rank_entry(report, 1)
        assert copied["verdict"] == "corrupt", folder
        assert "holds rank 0's capture, not rank 1's" in copied["runs"][0]["problems"][0]
    _, out, _ = run_cli(capsys, "summary", torch_dir)
    assert "holds rank 0's capture (its traceName, rank0." in out
    assert "these numbers are rank 0's, copied over rank 1's" in out


@pytest.mark.parametrize("manifest", [
    json.dumps({"schema": 1, "tool": "mindspeed_prof", "rank": 1, "status": 5, "windows": "x",
                "files": {}, "selected_ranks": [0, 1]}),
    '{"schema": 1, "tool": "mindspeed_prof", "rank": 1, "status": "comp',
], ids=["wrong types", "not JSON"])
def test_a_rank_whose_manifest_cannot_be_read_is_not_valid(tmp_path, capsys, manifest):
    torch_trace(tmp_path, rank=0)
    torch_trace(tmp_path, rank=1)
    write_manifest(tmp_path, 0, backend="torch")
    (tmp_path / "profile_manifest_rank1.json").write_text(manifest)

    code, report = run_cli_json(capsys, "check", tmp_path)

    assert code == 1
    assert rank_entry(report, 0)["verdict"] == "valid"
    rank1 = rank_entry(report, 1)
    assert rank1["verdict"] == "corrupt"
    assert any(p.startswith("profile_manifest_rank1.json is unreadable") for p in
               rank1["problems"]), rank1["problems"]


# §4: readers bounded, never hung, never injected


@pytest.mark.slow  # child interpreters, each a few seconds to start
def test_a_pickle_of_shared_references_is_walked_once_per_object_not_as_a_tree(tmp_path):
    data = pickle.dumps(shared_references())
    assert len(data) < 500
    bare, shaped = tmp_path / "bare", tmp_path / "shaped"
    bare.mkdir()
    (bare / "memory_snapshot_rank0.pickle").write_bytes(data)
    # the same shared lists inside a snapshot's shape: plain values, read whole
    value = snapshot()
    value["device_traces"][0][0]["frames"] = shared_references()
    shaped.mkdir()
    (shaped / "memory_snapshot_rank0.pickle").write_bytes(pickle.dumps(value))

    codes, output = readers_in_a_child(bare, "check", "summary", "memory")
    assert codes == [1, 1, 1]
    assert "not an allocator snapshot: a list, not a dict" in output
    codes, output = readers_in_a_child(shaped, "memory")
    assert codes == [0], output


@pytest.mark.slow  # child interpreters, each a few seconds to start
def test_step_ids_far_apart_are_judged_without_building_the_range_between_them(tmp_path):
    events = [{"ph": "X", "name": f"ProfilerStep#{n}", "cat": "user_annotation", "pid": 1,
               "tid": 1, "ts": float(i), "dur": 1.0} for i, n in enumerate((5, 10 ** 12))]
    window = tmp_path / "iter_5-end"  # open-ended: until training ended, by its step ids
    window.mkdir()
    (window / "rank0.1000.pt.trace.json").write_text(json.dumps({"traceEvents": events}))

    codes, output = readers_in_a_child(tmp_path, "check")

    assert codes == [1]
    assert "spans 999999999996 units: no profiler records that many in one window" in output


@pytest.mark.slow  # child interpreters, each a few seconds to start
@pytest.mark.parametrize("kind", ["manifest", "snapshot", "trace", "/dev/zero snapshot",
                                  "NPU database"])
def test_a_fifo_or_a_device_in_place_of_a_file_is_skipped_and_said(tmp_path, kind):
    name = {"manifest": "profile_manifest_rank0.json",
            "snapshot": "memory_snapshot_rank0.pickle",
            "trace": "rank0.1700000000000000000.pt.trace.json",
            "/dev/zero snapshot": "memory_snapshot_rank0.pickle",
            "NPU database": "ascend_pytorch_profiler_0.db"}[kind]
    if kind == "NPU database":  # a db export whose database is a FIFO
        out = os.path.join(db_capture(tmp_path, 0), "ASCEND_PROFILER_OUTPUT")
        os.remove(os.path.join(out, name))
        os.mkfifo(os.path.join(out, name))
    elif kind.startswith("/dev/zero"):
        os.symlink("/dev/zero", tmp_path / name)
    else:
        os.mkfifo(tmp_path / name)

    codes, output = readers_in_a_child(tmp_path, "check", "summary", "memory")

    assert codes[0] == 1  # check: the file is no capture's
    assert codes[1] == (0 if kind == "NPU database" else 1)  # summary: what else it could read
    what = "a character device" if kind.startswith("/dev/zero") else "a FIFO (named pipe)"
    assert f"{what}, not a regular file: not read" in output


def test_names_read_from_files_reach_the_terminal_escaped(tmp_path, capsys):
    path = torch_trace(tmp_path, rank=0)
    with open(path) as handle:
        trace = json.load(handle)
    for event in trace["traceEvents"]:
        if str(event.get("name", "")).startswith("aten::"):
            event["name"] = HOSTILE + event["name"]
    with open(path, "w") as handle:
        json.dump(trace, handle)
    (tmp_path / "memory_snapshot_rank0.pickle").write_bytes(pickle.dumps(
        snapshot(name=HOSTILE, filename=f"/work/{HOSTILE}.py")))
    write_manifest(tmp_path, 0, backend="torch", selected_ranks=[0],
                   errors=[{"phase": "stop", "message": HOSTILE}])

    for command, *flags in (("check",), ("summary",), ("summary", "--csv"), ("memory",),
                            ("memory", "--csv")):
        _, out, err = run_cli(capsys, command, tmp_path, *flags)

        assert "\x1b" not in out + err and "\x07" not in out + err, command
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in out, (command, flags)


def report_of(tmp_path, capsys):
    torch_trace(tmp_path / "run", rank=0)
    path = tmp_path / "node0.json"
    code, _, _ = run_cli(capsys, "check", tmp_path / "run", "--node", "0/1", "--report", path)
    assert code == 0
    with open(path) as handle:
        return json.load(handle)


def test_a_bad_file_is_one_clear_line_never_a_traceback(tmp_path, capsys):
    snapshots = {"device -100": (snapshot(device=-100), "segment 0 has device -100"),
                 "2**20000 bytes": (snapshot(size=2 ** 20000), "which is not a count of bytes")}
    for case, (value, said) in snapshots.items():
        folder = tmp_path / case.replace(" ", "_")
        folder.mkdir()
        (folder / "memory_snapshot_rank0.pickle").write_bytes(pickle.dumps(value))
        for command, *flags in (("memory",), ("memory", "--json"), ("summary", "--json"),
                                ("check",)):
            code, out, err = run_cli(capsys, command, folder, *flags)

            assert code == 1, (case, command, flags)
            assert said in out + err, (case, command, flags)
    # a manifest's rank no job has: the manifest is unreadable, its rank not valid
    ranks = tmp_path / "selected"
    torch_trace(ranks, rank=0)
    for rank in (0, 1):
        write_manifest(ranks, rank, backend="torch", selected_ranks=[0, 1, 10 ** 30])
    code, out, _ = run_cli(capsys, "check", ranks)
    assert code == 1 and "selected_ranks holds a number of 25 hex digits, not a rank" in out
    # node reports that are no node reports: exit 2, naming the file and the field
    good = report_of(tmp_path, capsys)
    damage = {"directory is 5": lambda d: d.update(directory=5),
              "node is 'x'": lambda d: d.update(node="x"),
              "summary is missing": lambda d: d.pop("summary"),
              "check.expected_ranks is 5": lambda d: d["check"].update(expected_ranks=5),
              "summary.top is 'ten'": lambda d: d["summary"].update(top="ten")}
    assert_merge_refuses(capsys, tmp_path, good, damage)
