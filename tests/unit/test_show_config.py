import json

import pytest

from helpers.npu import fake_npu  # noqa: F401 - fixture
from mindspeed_prof.cli import main


def run(capsys, *argv):
    code = main(["show-config", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_prints_ranks_window_backend_and_the_profiler_call(capsys):
    code, out, _ = run(capsys, "--world-size", "4", "--train-iters", "20", "--profile-step-start",
                       "5", "--profile-step-end", "7", "--profile-ranks", "1-2")
    assert code == 0
    assert "ranks:     1 2 -> 1, 2 (world size 4)" in out
    assert "window:    iterations 5-6 (warm-up at 4)" in out
    assert "torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1, skip_first=4)" in out


def test_json_output_carries_every_knob(capsys):
    from mindspeed_prof.config.profiler_config import KNOBS
    code, out, _ = run(capsys, "--json", "--profile-level", "Level2")
    report = json.loads(out)
    assert code == 0 and set(report["config"]) == set(KNOBS)
    assert report["config"]["profile_level"] == "level2" and report["config"]["profile"] is True


def test_npu_call_is_described_even_where_torch_npu_is_missing(capsys):
    code, out, _ = run(capsys, "--profile-backend", "npu", "--profile-level", "level1",
                       "--profile-analyse", "offline")
    assert code == 0
    assert "worker_name='rank0', analyse_flag=False, async_mode=False" in out
    assert "schedule(wait=0, active=2, warmup=1, repeat=1, skip_first=9)" in out
    assert "not runnable on this machine" in out


@pytest.mark.parametrize("argv, message", [
    (["--profile-step-end", "30", "--train-iters", "20"], "--profile-step-end 30"),
    (["--profile-level", "level7"], "--profile-level 'level7'"),
    (["--profile-ranks", "3-1"], "--profile-ranks range 3-1"),
    (["--world-size", "0"], "--world-size 0"),
])
def test_bad_values_exit_2_naming_the_flag(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    import subprocess
    import sys
    # show-config's JSON is longer than one pipe read: `| head -1` closes early
    command = (f"{sys.executable} -m mindspeed_prof.cli show-config --json --world-size 20000 --profile-ranks all "
               f"| head -c 10")
    result = subprocess.run(command, shell=True, capture_output=True, text=True, cwd=tmp_path)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_profile_steps_are_shown_window_by_window_instead_of_the_default(capsys):
    code, out, _ = run(capsys, "--train-iters", "8", "--profile-steps", "2-3,6-7")
    assert code == 0
    assert "windows:   2 planned\n           iterations 2-3 (warm-up at 1)\n" \
           "           iterations 6-7 (warm-up at 5)\n" in out
    assert "10-11" not in out and "/iter_2-3/rank0." in out


def test_profile_every_lists_each_window_up_to_train_iters(capsys):
    code, out, _ = run(capsys, "--json", "--train-iters", "20", "--profile-step-start", "3",
                       "--profile-step-end", "5", "--profile-every", "6")
    report = json.loads(out)
    assert code == 0 and report["window_count"] == 3
    assert [(w["start"], w["end"]) for w in report["windows"]] == [(3, 5), (9, 11), (15, 17)]


def test_resumed_run_shows_the_windows_it_skips(capsys):
    code, out, _ = run(capsys, "--first-iteration", "50", "--train-iters", "200",
                       "--profile-steps", "3-4,100-101")
    assert code == 0 and "window:    iterations 100-101 (warm-up at 99)" in out
    assert "skipped, already passed when the run starts at iteration 50: 3-4" in out


def test_trigger_file_is_described_and_needs_no_default_window(capsys, tmp_path):
    code, out, _ = run(capsys, "--train-iters", "5", "--profile-trigger-file",
                       str(tmp_path / "t.json"))
    assert code == 0
    assert f"trigger:   on request: `mindspeed-prof trigger {tmp_path / 't.json'} --steps N`" in out
    assert "window:" not in out and "windows:" not in out


def start_up_error(*flags, world_size=1):
    """What the training start-up says about these flags (preflight, then arm)."""
    from mindspeed_prof.arguments import parse_profile_flags
    from mindspeed_prof.errors import ConfigError
    from mindspeed_prof.manager import preflight
    try:
        preflight(parse_profile_flags(list(flags), implied_profile=True), rank=0,
                  world_size=world_size)
    except ConfigError as exc:
        return str(exc)
    return None


def test_unwritable_save_path_is_refused_as_at_start_up(capsys, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    flags = ("--profile-save-path", str(blocker / "prof"), "--profile-backend", "torch")
    code, _, err = run(capsys, *flags)
    expected = start_up_error(*flags)
    assert expected and "is not writable on rank 0" in expected
    assert code == 2 and err.strip() == f"mindspeed-prof show-config: error: {expected}"


def test_save_path_the_npu_backend_would_refuse_is_refused_as_at_start_up(capsys, tmp_path):
    from mindspeed_prof.backends.npu_options import unsupported_path_reason
    bad = str(tmp_path / "prof:dir")  # torch_npu refuses ':' in its output path
    assert unsupported_path_reason(bad)
    code, _, err = run(capsys, "--profile-save-path", bad, "--profile-backend", "npu")
    assert code == 2 and f"--profile-save-path {bad} " in err


def test_dry_run_leaves_no_save_path_folders_behind(capsys, tmp_path):
    code, _, _ = run(capsys, "--profile-save-path", str(tmp_path / "new" / "prof"))
    assert code == 0 and not (tmp_path / "new").exists()


def test_rank_that_matches_no_rank_of_the_world_size_is_refused_as_at_start_up(capsys):
    code, _, err = run(capsys, "--world-size", "2", "--profile-ranks", "2-3")
    expected = start_up_error("--profile-ranks", "2-3", world_size=2)
    assert code == 2 and expected and expected in err


def test_budget_below_the_estimate_is_refused_as_at_start_up(capsys):
    code, _, err = run(capsys, "--train-iters", "20", "--profile-max-gb", "0.001",
                       "--profile-backend", "torch")
    assert code == 2 and "--profile-max-gb 0.001 is below the estimated output" in err


def test_an_npu_capture_without_host_activity_says_it_will_carry_no_step_ids(capsys, tmp_path,
                                                                             fake_npu):
    flags = ("--profile-backend", "npu", "--profile-save-path", str(tmp_path / "p"))
    off = tmp_path / "off.yaml"
    off.write_text("profile_with_cpu: false\n")
    code, out, _ = run(capsys, *flags, "--profile-config", str(off))
    assert code == 0 and "without --profile-with-cpu torch_npu records no ProfilerStep" in out
    code, out, _ = run(capsys, *flags, "--profile-with-cpu")
    assert code == 0 and "without --profile-with-cpu" not in out


def test_host_activity_is_on_unless_turned_off_and_show_config_says_why(capsys, tmp_path,
                                                                        fake_npu, monkeypatch):
    flags = ("--profile-backend", "npu", "--profile-save-path", str(tmp_path / "p"))
    code, out, _ = run(capsys, *flags)
    assert code == 0 and "activities=[<ProfilerActivity.CPU: 0>, <ProfilerActivity.NPU: 1>]" in out
    assert "--profile-with-cpu is on (not given): torch_npu marks each step (ProfilerStep#N) " \
           "from host activity" in out
    assert "without --profile-with-cpu" not in out
    monkeypatch.setenv("MINDSPEED_PROF_WITH_CPU", "0")
    code, out, _ = run(capsys, *flags)
    assert code == 0 and "activities=[<ProfilerActivity.NPU: 1>]" in out
    monkeypatch.delenv("MINDSPEED_PROF_WITH_CPU")
    code, out, _ = run(capsys, *flags, "--profile-level", "level_none", "--profile-mstx")
    assert code == 0 and "--profile-with-cpu is off (not given): --profile-level level_none " \
                         "with --profile-mstx is the light capture" in out
