import json

import pytest

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
    from mindspeed_prof.config import KNOBS
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
