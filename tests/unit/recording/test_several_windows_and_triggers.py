"""Several windows, on-demand triggers and the disk budget, on a plain loop with torch.profiler."""

import json
import os
import re
import time

import pytest

from helpers.loop import config, run_loop, train_one_step
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import ProfilerConfig, ProfilerManager, profile
from mindspeed_prof.control import trigger
from mindspeed_prof.cli import main
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.config.window import plan_windows

def window_folders(tmp_path):
    return sorted(d for d in os.listdir(tmp_path / "prof") if d.startswith("iter_"))


def test_every_k_repeats_the_window_into_its_own_folders(tmp_path):
    run_loop(config(tmp_path, profile_step_start=3, profile_step_end=5, profile_every=5), 14)
    assert window_folders(tmp_path) == ["iter_13-14", "iter_3-4", "iter_8-9"]
    for folder, expected in (("iter_3-4", [3, 4]), ("iter_8-9", [8, 9]), ("iter_13-14", [13, 14])):
        assert step_ids(torch_traces(tmp_path / "prof" / folder)[0]) == expected
    windows = manifest(tmp_path / "prof", 0)["windows"]
    assert [(w["start"], w["end"], w["dir"]) for w in windows] == [
        (3, 5, "iter_3-4"), (8, 10, "iter_8-9"), (13, 15, "iter_13-14")]


def test_explicit_steps_list_profiles_each_inclusive_range(tmp_path):
    run_loop(config(tmp_path, profile_steps=("2-3,6-6",)), 8)
    assert step_ids(torch_traces(tmp_path / "prof" / "iter_2-3")[0]) == [2, 3]
    assert step_ids(torch_traces(tmp_path / "prof" / "iter_6-6")[0]) == [6]


def test_back_to_back_windows_need_no_warmup_gap(tmp_path):
    run_loop(config(tmp_path, profile_steps=("2-3", "4-5")), 6)
    assert step_ids(torch_traces(tmp_path / "prof" / "iter_4-5")[0]) == [4, 5]


def test_repeated_windows_are_resume_aware(tmp_path):
    cfg = config(tmp_path, profile_step_start=3, profile_step_end=4, profile_every=10)
    plans = plan_windows(cfg, first_iteration=101, train_iters=140)
    assert [(p.start, p.end) for p in plans] == [(103, 104), (113, 114), (123, 124), (133, 134)]


@pytest.mark.parametrize("values, message", [
    (dict(profile_every=1, profile_step_start=3, profile_step_end=6), "--profile-every 1 is shorter"),
    (dict(profile_every=5, profile_step_end=-1), "--profile-every needs a finite window"),
    (dict(profile_every=5, profile_steps=("3-4",)), "use one of them"),
    (dict(profile_steps=("5-3",)), "runs backwards"),
    (dict(profile_steps=("3-6,5-8",)), "overlap"),
    (dict(profile_steps=("x",)), "--profile-steps 'x' is not an iteration range"),
    (dict(profile_trigger_poll=0), "--profile-trigger-poll 0 must be >= 1"),
    (dict(profile_max_gb=0), "--profile-max-gb 0"),
])
def test_unworkable_repetition_names_the_flag(tmp_path, values, message):
    with pytest.raises(ConfigError, match=message):
        config(tmp_path, **values)


def test_budget_below_the_estimate_refuses_to_start_with_the_estimate(tmp_path):
    manager = ProfilerManager(config(tmp_path, profile_step_start=2, profile_step_end=12,
                                     profile_max_gb=0.01, profile_with_stack=True))
    with pytest.raises(ConfigError) as info:
        manager.arm(train_iters=20)
    message = str(info.value)
    assert "--profile-max-gb 0.01 is below the estimated output: 0.20 GB = 10 iteration(s)" in message
    assert "x2.0 --profile-with-stack" in message


def test_budget_that_fits_profiles_normally(tmp_path):
    run_loop(config(tmp_path, profile_step_start=2, profile_step_end=4, profile_max_gb=10), 5)
    assert manifest(tmp_path / "prof", 0)["status"] == "complete"


def test_later_windows_over_the_budget_are_skipped_and_said(tmp_path, monkeypatch):
    from mindspeed_prof.config import budget
    monkeypatch.setitem(budget.BASE_MB, "torch", 1)  # the estimate: 1 MB per iteration
    padding = tmp_path / "prof" / "iter_2-3" / "padding"
    cfg = config(tmp_path, profile_step_start=2, profile_step_end=4, profile_every=4,
                 profile_max_gb=0.007)  # 6 MB estimated for three windows: allowed to start
    with profile(cfg, train_iters=12) as prof:
        for iteration in range(1, 13):
            train_one_step()
            prof.step()
            if iteration == 3:  # the first window turned out 5.5 MB larger than estimated
                padding.write_bytes(b"x" * 5_500_000)
                prof.manager.manifest.add_files([str(padding)])
    data = manifest(tmp_path / "prof", 0)
    assert [w["start"] for w in data["windows"]] == [2]
    assert any("would be exceeded" in w["message"] for w in data["warnings"])


def test_trigger_request_profiles_the_next_iterations(tmp_path):
    path = str(tmp_path / "trigger.json")
    cfg = config(tmp_path, profile_trigger_file=path, profile_trigger_poll=2)

    def request(iteration):
        if iteration == 3:
            assert main(["trigger", path, "--steps", "2"]) == 0

    run_loop(cfg, 10, between=request)
    # polled at 4: warm-up at 4, iterations 5 and 6 recorded
    assert step_ids(torch_traces(tmp_path / "prof" / "iter_5-6")[0]) == [5, 6]
    statuses = trigger.read_statuses(path)
    assert statuses[0]["state"] == "idle"
    assert manifest(tmp_path / "prof", 0)["windows"][0]["status"] == "complete"


def test_request_older_than_the_job_is_ignored(tmp_path):
    path = str(tmp_path / "trigger.json")
    trigger.write_request(path, 2)
    run_loop(config(tmp_path, profile_trigger_file=path, profile_trigger_poll=1), 5)
    assert torch_traces(tmp_path / "prof") == []


def test_trigger_without_a_file_costs_nothing_per_step(tmp_path):
    manager = ProfilerManager(config(tmp_path, profile_ranks=(1,)), rank=0, world_size=2)
    manager.arm(train_iters=20)
    assert manager.step_begin.__name__ == "_nothing"
    manager.close()


def test_trigger_command_validates_its_arguments(tmp_path, capsys):
    assert main(["trigger", str(tmp_path / "t.json"), "--steps", "0"]) == 2
    assert "--steps 0 must be a number of iterations >= 1" in capsys.readouterr().err
    assert main(["trigger", str(tmp_path / "no" / "t.json"), "--steps", "1"]) == 2
    assert main(["trigger", str(tmp_path / "t.json"), "--steps", "1", "--ranks", "3-1"]) == 2


def test_trigger_status_lists_each_rank(tmp_path, capsys):
    path = str(tmp_path / "trigger.json")
    trigger.TriggerWatcher(path, poll=1, rank=3, world_size=1, report=None).set_state(
        "running", window=[5, 7])
    assert main(["trigger", path, "--status"]) == 0
    assert "3     running   5-6" in capsys.readouterr().out


def test_a_trigger_window_the_loop_cuts_reports_cut_a_documented_state(tmp_path, monkeypatch):
    path = str(tmp_path / "trigger.json")
    written = []
    original = trigger.TriggerWatcher.set_state
    monkeypatch.setattr(trigger.TriggerWatcher, "set_state", lambda self, state, **details: (
        written.append(state), original(self, state, **details)))

    def request(iteration):
        if iteration == 3:
            assert main(["trigger", path, "--steps", "5"]) == 0

    cfg = config(tmp_path, profile_trigger_file=path, profile_trigger_poll=2)
    with profile(cfg, train_iters=20) as prof:  # window 5-9; the loop stops early, after 6
        for iteration in range(1, 7):
            request(iteration)
            train_one_step()
            prof.step()
    assert manifest(tmp_path / "prof", 0)["windows"][0]["status"] == "cut"
    assert "cut" in written and set(written) <= set(trigger.STATES)


def test_trigger_wait_ends_on_a_cut_window_and_exits_1(tmp_path, capsys):
    path = str(tmp_path / "trigger.json")
    trigger.TriggerWatcher(path, poll=1, rank=0, world_size=1, report=None).set_state(
        "cut", window=[5, 10], updated=time.time() + 60)  # reported after the request
    assert main(["trigger", path, "--steps", "5", "--wait", "3"]) == 1
    out = capsys.readouterr().out
    assert "0     cut       5-9" in out and "did not finish" not in out


def test_check_and_summary_read_the_several_windows_layout(tmp_path, capsys):
    run_loop(config(tmp_path, profile_step_start=2, profile_step_end=4, profile_every=4), 9)
    capsys.readouterr()
    assert main(["check", str(tmp_path / "prof"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    windows = sorted(tuple(run["window"]) for rank in report["ranks"] for run in rank["runs"])
    assert windows == [(2, 4), (6, 8)]
    assert main(["summary", str(tmp_path / "prof"), "--json"]) == 0


def test_resumed_run_skips_the_profile_steps_windows_already_passed(tmp_path):
    cfg = config(tmp_path, profile_steps=("3-4,12-13",))
    with profile(cfg, train_iters=15, first_iteration=10) as prof:
        for _ in range(10, 16):
            train_one_step()
            prof.step()
    assert window_folders(tmp_path) == ["iter_12-13"]
    assert step_ids(torch_traces(tmp_path / "prof" / "iter_12-13")[0]) == [12, 13]


def test_a_profile_steps_window_the_resume_cuts_into_is_skipped_whole():
    cfg = ProfilerConfig(profile=True, profile_steps=("100-102,200-201",))
    plans = plan_windows(cfg, first_iteration=101, train_iters=300)
    assert [(p.start, p.end) for p in plans] == [(200, 202)]


def test_profile_steps_with_every_window_passed_is_refused_naming_profile_steps():
    cfg = ProfilerConfig(profile=True, profile_steps=("3-4,12-13",))
    with pytest.raises(ConfigError) as info:
        plan_windows(cfg, first_iteration=501, train_iters=1000)
    message = str(info.value)
    assert message.startswith("--profile-steps 3-4,12-13: every window has already passed")
    assert "give windows from iteration 501 on" in message
    assert "--profile-step-start" not in message


def test_profile_steps_window_past_the_end_names_profile_steps_and_its_fix():
    cfg = ProfilerConfig(profile=True, profile_steps=("3-4,18-22",))
    with pytest.raises(ConfigError) as info:
        plan_windows(cfg, train_iters=20)
    message = str(info.value)
    assert ("--profile-steps window 18-22 needs iterations up to 22, but --train-iters stops "
            "training after iteration 20; use 18-20 instead, drop it, or raise --train-iters") in message
    assert "--profile-step-end" not in message


@pytest.mark.parametrize("steps", [None, ("3-4,18-22",)])
def test_a_train_samples_run_names_train_samples(steps):
    from mindspeed_prof.config.window import train_limit
    values = dict(profile_steps=steps) if steps else dict(profile_step_start=10, profile_step_end=30)
    cfg = ProfilerConfig(profile=True, **values)
    with pytest.raises(ConfigError) as info:
        plan_windows(cfg, train_iters=train_limit(20, train_samples=640))
    message = str(info.value)
    assert "--train-samples stops training after iteration 20" in message
    assert "raise --train-samples" in message and "--train-iters" not in message


def test_train_samples_leave_the_iteration_count_unchanged():
    from mindspeed_prof.config.window import train_limit
    assert train_limit(20, train_samples=640) == 20 and train_limit(20) == 20
    assert json.dumps({"train_iters": train_limit(20, 640)}) == '{"train_iters": 20}'
    assert train_limit(None, 640) is None


def test_resumed_repeated_windows_with_none_left_name_profile_every():
    cfg = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5, profile_every=10)
    with pytest.raises(ConfigError) as info:
        plan_windows(cfg, first_iteration=101, train_iters=103)
    message = str(info.value)
    assert message.startswith("--profile-every 10: no window fits: this run resumes at "
                              "iteration 101")
    assert "the next window is iterations 103-104; raise --train-iters" in message
    assert "--profile-step-end 5" not in message


@pytest.mark.parametrize("extra", [["--steps", "2"], ["--status"]])
def test_trigger_on_a_directory_is_a_usage_error_that_leaves_nothing_behind(tmp_path, capsys,
                                                                             extra):
    folder = tmp_path / "shared"
    folder.mkdir()
    assert main(["trigger", str(folder), *extra]) == 2
    err = capsys.readouterr().err
    assert f"{folder} is a directory" in err and "--profile-trigger-file" in err
    assert sorted(os.listdir(tmp_path)) == ["shared"] and os.listdir(folder) == []


def test_an_atomic_write_that_fails_removes_its_temporary_file(tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    (target / "x").write_text("")  # a non-empty directory: os.replace cannot take its place
    with pytest.raises(OSError):
        trigger.write_json_atomic(str(target), {"id": 1})
    assert sorted(os.listdir(tmp_path)) == ["taken"]


def test_repeated_windows_whose_first_does_not_fit_name_profile_every_and_no_open_end():
    cfg = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5, profile_every=10)
    with pytest.raises(ConfigError) as info:
        plan_windows(cfg, train_iters=3)
    message = str(info.value)
    assert message.startswith("--profile-every 10: no window fits: the first window, iterations "
                              "3-4 (--profile-step-start 3, --profile-step-end 5), needs "
                              "iterations up to 4 but --train-iters stops training after "
                              "iteration 3")
    assert "-1" not in message  # an open end cannot repeat: not a fix for --profile-every
