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
    assert "ranks:     1-2 -> 1, 2 (world size 4)" in out
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


@pytest.mark.slow  # the command in a child interpreter
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


@pytest.mark.parametrize("version", ["17", "0", "v0.17", "0.17.x"])
def test_a_megatron_version_that_is_no_release_number_is_refused_saying_how_they_read(
        capsys, version):
    code, out, err = run(capsys, "--megatron-version", version)
    assert code == 2 and out == ""
    assert err.strip().endswith(
        f"--megatron-version '{version}' is not a release number: Megatron-LM's read like 0.17 "
        f"or 0.17.1 (MAJOR.MINOR[.PATCH]); give e.g. --megatron-version 0.17.1."), err
    assert "Traceback" not in err


@pytest.mark.parametrize("version", ["0.17", "0.17.1", "0.19.0rc1"])
def test_a_megatron_release_number_is_taken(capsys, version):
    code, _, err = run(capsys, "--megatron-version", version)
    assert code == 0, err


def test_a_topology_selector_resolves_offline_with_the_hosts_parallel_sizes(capsys):
    # 16 ranks, tp 2 innermost, then dp 2, then pp 4 outermost (Megatron's tp-cp-ep-dp-pp)
    sizes = ["--world-size", "16", "--tensor-model-parallel-size", "2",
             "--pipeline-model-parallel-size", "4"]
    code, out, err = run(capsys, *sizes, "--profile-ranks", "tp=0,pp=*", "--json")
    report = json.loads(out)
    assert code == 0, err
    assert report["ranks"]["selected"] == [0, 2, 4, 6, 8, 10, 12, 14]
    assert not any("resolve inside the job" in n for n in report["notes"])
    code, out, _ = run(capsys, *sizes, "--profile-ranks", "pp-stage-leaders", "--json")
    assert json.loads(out)["ranks"]["selected"] == [0, 4, 8, 12]
    code, out, _ = run(capsys, *sizes, "--profile-ranks", "last-pp-stage")
    assert code == 0 and "ranks:     last-pp-stage -> 12, 13, 14, 15 (world size 16)" in out
    assert "ranks placed in Megatron's default order tp-cp-ep-dp-pp" in out
    code, out, _ = run(capsys, "--world-size", "16", "--tensor-model-parallel-size", "2",
                       "--context-parallel-size", "2", "--profile-ranks", "cp=1,dp=0", "--json")
    assert json.loads(out)["ranks"]["selected"] == [2, 3]
    code, out, _ = run(capsys, "--world-size", "16", "--nproc-per-node", "8",
                       "--profile-ranks", "node=1,tp=0", "--json")
    assert json.loads(out)["ranks"]["selected"] == list(range(8, 16))


def test_without_parallel_sizes_a_selector_says_which_flags_resolve_it(capsys):
    code, out, _ = run(capsys, "--world-size", "16", "--profile-ranks", "tp=0,pp=*", "--json")
    report = json.loads(out)
    assert code == 0 and report["ranks"]["selected"] is None
    assert any("--tensor-model-parallel-size" in n for n in report["notes"])


def test_parallel_sizes_that_do_not_fit_the_world_size_are_refused_in_one_line(capsys):
    code, out, err = run(capsys, "--world-size", "6", "--tensor-model-parallel-size", "4",
                         "--profile-ranks", "tp=0")
    assert code == 2 and out == ""
    assert err.strip().endswith("--world-size 6 is not a multiple of tensor x pipeline x "
                                "context parallel sizes (4 x 1 x 1 = 4); give the sizes of "
                                "the training command line."), err
    code, _, err = run(capsys, "--world-size", "8", "--expert-model-parallel-size", "3")
    assert code == 2 and "--expert-model-parallel-size 3 does not divide" in err
    code, _, err = run(capsys, "--world-size", "8", "--tensor-model-parallel-size", "4",
                       "--profile-ranks", "tp=5")
    assert code == 2 and "matches no rank of this job" in err
    code, _, err = run(capsys, "--world-size", "400000000", "--tensor-model-parallel-size", "8",
                       "--profile-ranks", "tp=0")  # refused at once, no 400-million-rank table
    assert code == 2 and "lay out at most 131,072 ranks here" in err
