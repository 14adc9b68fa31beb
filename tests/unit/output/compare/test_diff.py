"""``mindspeed-prof diff A B``: per step summary's breakdown side by side, the operators that
changed most, new and vanished ones, each rank's step time; unlike things said, not hidden."""

import json
import os

import pytest

from helpers.cli import run_cli, run_cli_json
from mindspeed_prof.output.compare import diff_paths
from output_fixtures import samples

STEP_US = 1000.0


def write_trace(folder, rank=0, steps=(1, 2, 3), ops=(("aten::mm", 300.0), ("aten::add", 100.0)),
                comm_us=0.0):
    """A torch chrome trace with one known content per step: each op once, one after the other
    from the step's start, then a collective of ``comm_us``."""
    os.makedirs(folder, exist_ok=True)
    events, clock = [], 1_000_000.0
    for step in steps:
        events.append({"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation",
                       "pid": 1, "tid": 1, "ts": clock, "dur": STEP_US})
        at = clock + 1.0
        for name, dur in ops:
            events.append({"ph": "X", "name": name, "cat": "cpu_op", "pid": 1, "tid": 1,
                           "ts": at, "dur": dur})
            at += dur
        if comm_us:
            events.append({"ph": "X", "name": "c10d::allreduce_", "cat": "cpu_op", "pid": 1,
                           "tid": 1, "ts": at, "dur": comm_us})
        clock += STEP_US
    path = os.path.join(str(folder), f"rank{rank}.{1_000 + rank}.pt.trace.json")
    with open(path, "w") as handle:
        json.dump({"traceEvents": events}, handle)
    return path


def test_the_operator_that_got_slower_tops_the_list_with_its_delta(tmp_path, capsys):
    write_trace(tmp_path / "a")
    write_trace(tmp_path / "b", ops=(("aten::mm", 500.0), ("aten::add", 100.0)))
    code, data = run_cli_json(capsys, "diff", tmp_path / "a", tmp_path / "b")
    assert code == 0 and data["comparable"] and data["matched_by"] == "number"
    top = data["grew"][0]
    assert (top["name"], top["a_us"], top["b_us"], top["change_us"]) == \
        ("aten::mm", 300.0, 500.0, 200.0)
    assert top["change_pct"] == pytest.approx(66.667, abs=0.01)
    assert [s["a_step"] for s in data["steps"]] == [1, 2, 3]
    for step in data["steps"]:
        assert step["change"]["Computing"] == pytest.approx(200.0)
        assert step["change"]["Free"] == pytest.approx(-200.0)
        assert step["change"]["step_time"] == pytest.approx(0.0)
    assert data["shrank"] == [] and data["new"] == [] and data["vanished"] == []


def test_the_breakdown_is_summarys_own(tmp_path, capsys):
    write_trace(tmp_path / "a", comm_us=150.0)
    write_trace(tmp_path / "b", comm_us=250.0)
    code, summary = run_cli_json(capsys, "summary", tmp_path / "b")
    data = diff_paths(str(tmp_path / "a"), str(tmp_path / "b"))
    by_step = {s["step"]: s for s in summary["ranks"][0]["steps"]}
    for step in data["steps"]:
        for part in ("Computing", "Communication(Not Overlapped)", "Overlapped", "Free"):
            assert step["b"][part] == by_step[step["b_step"]][part]
    assert data["overall"]["b"] == summary["overall"]["breakdown_us"]
    assert data["overall"]["change"]["Communication(Not Overlapped)"] == pytest.approx(100.0)


def test_new_and_vanished_operators_are_listed(tmp_path, capsys):
    write_trace(tmp_path / "a", ops=(("aten::mm", 300.0), ("aten::add", 100.0),
                                     ("aten::relu", 20.0)))
    write_trace(tmp_path / "b", ops=(("aten::mm", 300.0), ("aten::add", 100.0),
                                     ("aten::gelu", 40.0)))
    data = diff_paths(str(tmp_path / "a"), str(tmp_path / "b"))
    assert [(i["name"], i["b_us"]) for i in data["new"]] == [("aten::gelu", 40.0)]
    assert [(i["name"], i["a_us"]) for i in data["vanished"]] == [("aten::relu", 20.0)]


def test_json_is_exactly_what_diff_paths_returns(tmp_path, capsys):
    write_trace(tmp_path / "a")
    write_trace(tmp_path / "b", ops=(("aten::mm", 350.0),))
    code, printed = run_cli_json(capsys, "diff", tmp_path / "a", tmp_path / "b")
    assert printed == json.loads(json.dumps(diff_paths(str(tmp_path / "a"),
                                                       str(tmp_path / "b"))))


def test_two_ranks_of_one_run_are_compared_rank_against_rank(tmp_path, capsys):
    save = tmp_path / "prof"
    write_trace(save, rank=0)
    write_trace(save, rank=3, ops=(("aten::mm", 300.0), ("aten::add", 100.0)), comm_us=400.0)
    code, out, _ = run_cli(capsys, "diff", f"{save}:rank0", f"{save}:rank3")
    assert code == 0
    data = diff_paths(f"{save}:rank0", f"{save}:rank3")
    assert data["a"]["ranks"] == [0] and data["b"]["ranks"] == [3]
    [row] = data["ranks"]
    assert (row["a_rank"], row["b_rank"]) == (0, 3)
    assert [(i["name"], i["b_us"]) for i in data["new"]] == [("c10d::allreduce_", 400.0)]
    assert all(s["change"]["Communication(Not Overlapped)"] == pytest.approx(400.0)
               for s in data["steps"])
    assert "RANK A" in out and "c10d::allreduce_" in out


def test_two_windows_of_one_run_are_paired_in_order_and_said(tmp_path, capsys):
    save = tmp_path / "prof"
    write_trace(save / "iter_1-3", steps=(1, 2, 3))
    write_trace(save / "iter_10-12", steps=(10, 11, 12), ops=(("aten::mm", 400.0),
                                                             ("aten::add", 100.0)))
    data = diff_paths(str(save / "iter_1-3"), str(save / "iter_10-12"))
    assert data["matched_by"] == "position"
    assert [(s["a_step"], s["b_step"]) for s in data["steps"]] == [(1, 10), (2, 11), (3, 12)]
    assert any("no step number in common" in n for n in data["notes"])
    assert data["a"]["unit"] == data["b"]["unit"] == "iteration"


def test_another_unit_is_not_compared_and_said(tmp_path, capsys):
    write_trace(tmp_path / "a" / "iter_1-3")
    write_trace(tmp_path / "b" / "req_1-3")
    code, out, err = run_cli(capsys, "diff", tmp_path / "a", tmp_path / "b")
    assert code == 1
    assert "another unit: A counts iterations, B counts requests" in out
    assert "not compared" in err
    data = diff_paths(str(tmp_path / "a"), str(tmp_path / "b"))
    assert not data["comparable"] and data["steps"] == [] and data["grew"] == []


def test_another_backend_is_not_compared(tmp_path, capsys):
    write_trace(tmp_path / "a")
    samples.npu_capture(tmp_path / "b", 0)
    data = diff_paths(str(tmp_path / "a"), str(tmp_path / "b"))
    assert not data["comparable"] and "another backend" in data["unlike"][0]


def test_unlike_operator_sets_are_said_beside_the_comparison(tmp_path, capsys):
    write_trace(tmp_path / "a", ops=(("aten::mm", 300.0), ("aten::add", 100.0)))
    write_trace(tmp_path / "b", ops=(("aten::conv2d", 300.0), ("aten::add", 100.0)))
    data = diff_paths(str(tmp_path / "a"), str(tmp_path / "b"))
    assert data["comparable"]
    assert any("another model" in u for u in data["unlike"])
    assert data["shared_time"]["a_pct"] == pytest.approx(25.0)


def test_the_npu_samples_are_compared_by_kernel(tmp_path, capsys):
    samples.npu_capture(tmp_path / "a", 0, sample=0)
    samples.npu_capture(tmp_path / "b", 0, sample=1)
    code, data = run_cli_json(capsys, "diff", tmp_path / "a", tmp_path / "b")
    assert code == 0 and data["items"] == "kernels (total time)"
    assert data["a"]["backend"] == "npu" and data["steps"]
    grew = data["grew"] + data["shrank"]
    assert grew and all(c["change_us"] == pytest.approx(c["b_us"] - c["a_us"]) for c in grew)


@pytest.mark.parametrize("a, b, named", [
    ("{tmp}/nope", "{tmp}/b", "A "),
    ("{tmp}/b", "{tmp}/b:rank7", "B "),
])
def test_bad_input_is_one_line_naming_the_side_and_exit_2(tmp_path, capsys, a, b, named):
    write_trace(tmp_path / "b")
    code, _, err = run_cli(capsys, "diff", a.format(tmp=tmp_path), b.format(tmp=tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and named in err
    assert "Traceback" not in err
