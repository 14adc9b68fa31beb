"""An NPU capture without host activity has no step ids: summary says its steps are unknown, and
never prints its window as one step (STEPS 1 with the window's time as the step time)."""

import glob

import torch

from helpers.cli import run_cli
from helpers.npu import fake_npu_fixture
from mindspeed_prof import ProfilerConfig, profile

fake_npu = fake_npu_fixture("2.7.1")
MODEL = torch.nn.Linear(8, 8)


def capture(tmp_path, **knobs):
    config = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5,
                            profile_backend="npu", profile_analyse="sync",
                            profile_save_path=str(tmp_path / "prof"), **knobs)
    with profile(config, train_iters=6, rank=0, world_size=1) as prof:
        for _ in range(6):
            MODEL(torch.randn(2, 8)).sum().backward()
            prof.step()
    assert glob.glob(str(tmp_path / "prof" / "rank0_*_ascend_pt"))
    return tmp_path / "prof"


def breakdown_row(text):
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("RANK  BACKEND  STEPS"))
    return lines[header + 1].split()


def test_a_window_without_step_ids_is_no_step_and_summary_says_steps_are_unknown(
        tmp_path, capsys, fake_npu):
    save = capture(tmp_path, profile_with_cpu=False)
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0, out
    row = breakdown_row(out)
    assert row[:3] == ["0", "npu", "-"], row  # not "1"
    assert "steps unknown: step_trace_time.csv has no step ids" in out
    assert "--profile-with-cpu was off" in out


def test_with_host_activity_on_by_default_each_step_of_the_window_is_counted(
        tmp_path, capsys, fake_npu):
    save = capture(tmp_path)  # profile_with_cpu not given: on
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0, out
    assert breakdown_row(out)[:3] == ["0", "npu", "2"]
    assert "steps unknown" not in out
