"""Honest verdicts: a window cut short is `cut`, never `valid`; the trace, the manifest and `check`
agree on the iterations that really ran; one step rule for both backends."""

import glob
import json
import os

import pytest

from helpers.cli import rank_entry, run_cli_json
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import ProfilerConfig, profile
from output_fixtures import samples
from output_fixtures.torch_traces import torch_trace


def check(capsys, path):
    capsys.readouterr()  # what the profiled loop printed
    return run_cli_json(capsys, "check", path)


def texts(entry, key):
    return " | ".join(entry[key] + [t for r in entry["runs"] for t in r[key]])


def torch_window(tmp_path, steps, **window):
    """A real torch trace holding ``steps`` (consecutive) and a manifest window for it."""
    path = torch_trace(tmp_path, rank=0, start=steps[0], end=steps[-1] + 1)
    window = {"start": 3, "end": 6, "dir": ".", "status": "complete",
              "files": [os.path.basename(path)], **window}
    samples.write_manifest(tmp_path, 0, backend="torch", selected_ranks=[0], windows=[window])
    return path


def test_a_window_cut_by_a_signal_is_cut_not_valid_and_check_exits_1(tmp_path, capsys):
    torch_window(tmp_path, [3, 4], status="cut", iterations_recorded=[3],
                 cut={"reason": "signal", "in_progress": 4})
    code, report = check(capsys, tmp_path)
    entry = rank_entry(report, 0)
    assert code == 1 and entry["verdict"] == "cut"
    assert ("window [3, 6) cut short (signal): iterations 3 recorded, iteration 4 cut mid-way"
            in texts(entry, "problems"))
    assert "outside window" not in texts(entry, "warnings")  # step 4 is the partial one


def test_a_cut_window_whose_trace_lacks_a_recorded_iteration_is_incomplete(tmp_path, capsys):
    torch_window(tmp_path, [3], status="cut", iterations_recorded=[3, 4],
                 cut={"reason": "exception", "in_progress": None})
    code, report = check(capsys, tmp_path)
    entry = rank_entry(report, 0)
    assert code == 1 and entry["verdict"] == "incomplete"
    assert "ProfilerStep#4 of window [3, 6) missing" in texts(entry, "problems")


def test_a_whole_window_stays_valid(tmp_path, capsys):
    torch_window(tmp_path, [3, 4, 5], iterations_recorded=[3, 4, 5])
    code, report = check(capsys, tmp_path)
    assert code == 0 and rank_entry(report, 0)["verdict"] == "valid"


def test_a_step_opened_for_an_iteration_that_never_ran_is_named_and_not_counted(tmp_path,
                                                                              capsys):
    # NPU traces are parsed later by torch_npu: the manifest names the step check discounts.
    torch_window(tmp_path, [3, 4, 5, 6], end=None, iterations_recorded=[3, 4, 5], never_ran=6)
    code, report = check(capsys, tmp_path)
    entry = rank_entry(report, 0)
    assert code == 0 and entry["verdict"] == "valid"
    assert "ProfilerStep#6 was opened for iteration 6, which never ran" in texts(entry,
                                                                                  "warnings")


def test_an_npu_capture_missing_window_steps_is_incomplete_like_a_torch_trace(tmp_path, capsys):
    # The real sample's trace_view.json holds ProfilerStep#1 only; its folder says 1-3.
    samples.npu_capture(tmp_path / "iter_1-3", 0)
    code, report = check(capsys, tmp_path)
    entry = rank_entry(report, 0)
    assert code == 1 and entry["verdict"] == "incomplete"
    assert "ProfilerStep#2-3 of window [1, 4) missing (found 1)" in texts(entry, "problems")


def loop(save, end, iterations, fail_at=None, train_iters=None):
    config = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=end,
                            profile_save_path=str(save), profile_backend="torch",
                            profile_ranks=[0])
    import torch

    try:
        with profile(config, rank=0, world_size=1, train_iters=train_iters) as prof:
            for iteration in range(1, iterations + 1):
                torch.randn(8, 8).sum()
                if iteration == fail_at:
                    raise RuntimeError("boom")
                prof.step()
    except RuntimeError:
        pass
    return manifest(save, 0)


def test_an_open_ended_loop_window_holds_only_iterations_that_ran_and_is_valid(tmp_path,
                                                                               capsys):
    data = loop(tmp_path / "prof", -1, 6)
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [3, 4, 5, 6]  # no ProfilerStep#7
    assert data["windows"][0]["iterations_recorded"] == [3, 4, 5, 6]
    assert data["status"] == "complete" and "cut" not in data["windows"][0]
    code, report = check(capsys, tmp_path / "prof")
    assert code == 0 and rank_entry(report, 0)["verdict"] == "valid"


def test_a_loop_that_ends_before_its_window_does_is_cut(tmp_path, capsys):
    data = loop(tmp_path / "prof", 9, 6)
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [3, 4, 5, 6]
    assert data["status"] == "cut"
    assert data["windows"][0]["cut"] == {"reason": "finished", "in_progress": None}
    code, report = check(capsys, tmp_path / "prof")
    assert code == 1 and rank_entry(report, 0)["verdict"] == "cut"


def test_an_exception_inside_the_window_keeps_the_recorded_iterations_and_says_cut(tmp_path,
                                                                                  capsys):
    data = loop(tmp_path / "prof", 9, 8, fail_at=5, train_iters=8)
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [3, 4, 5]  # 5: partial
    window = data["windows"][0]
    assert window["iterations_recorded"] == [3, 4]
    assert window["cut"] == {"reason": "exception", "in_progress": 5}
    code, report = check(capsys, tmp_path / "prof")
    entry = rank_entry(report, 0)
    assert code == 1 and entry["verdict"] == "cut"
    assert "iteration 5 cut mid-way" in texts(entry, "problems")


@pytest.mark.parametrize("iterations", [4, 6])
def test_a_window_stopped_between_iterations_has_no_step_for_an_iteration_that_never_began(
        tmp_path, iterations):
    # The recorder's own stop (a cut after iteration N) closes ProfilerStep#N, the last that ran.
    from mindspeed_prof.drivers.training import ProfilerManager

    config = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=9,
                            profile_save_path=str(tmp_path / "prof"), profile_backend="torch",
                            profile_ranks=[0])
    manager = ProfilerManager(config, rank=0, world_size=1)
    manager.arm(first_iteration=1, train_iters=10)
    for iteration in range(1, iterations + 1):
        manager.step_begin(iteration)
        manager.step_end(iteration)
    manager.close("sys.exit", "exit code 0")
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == list(range(3, iterations + 1))
    data = json.loads(open(glob.glob(str(tmp_path / "prof" / "profile_manifest_rank0.json"))[0])
                      .read())
    assert data["windows"][0]["cut"] == {"reason": "sys.exit", "in_progress": None}
