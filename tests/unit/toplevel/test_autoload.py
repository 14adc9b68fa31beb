import os
import subprocess
import sys

import pytest

from mindspeed_prof.autoload import is_launcher

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PTH = os.path.join(REPO, "mindspeed_prof", "autoload", "mindspeed_prof_autoload.pth")


@pytest.mark.parametrize("argv", [
    ["python", "/venv/bin/torchrun", "--nproc-per-node", "2", "pretrain_gpt.py", "--profile"],
    ["python", "-m", "torch.distributed.run", "pretrain_gpt.py", "--profile"],
    ["python", "/venv/bin/mindspeed-prof", "show-config", "--profile"],
])
def test_launchers_are_not_training_processes(argv):
    assert is_launcher(argv)


@pytest.mark.parametrize("argv", [
    ["python", "-u", "pretrain_gpt.py", "--profile"],
    ["python", "-m", "mindspeed_prof.launch", "pretrain_gpt.py", "--profile"],
])
def test_training_processes_are_not_launchers(argv):
    assert not is_launcher(argv)


def run_pth_line(tmp_path, args, env_extra=None):
    # A script file, not -c: the line itself contains "--profile" and would see it in argv.
    script = tmp_path / "probe.py"
    script.write_text(open(PTH).read() +
                      "\nimport sys\nprint('mindspeed_prof.patches.activate' in sys.modules)\n")
    env = dict(os.environ, **(env_extra or {}))
    result = subprocess.run([sys.executable, str(script)] + args, capture_output=True, text=True,
                            env=env, check=True)
    return result.stdout.strip() == "True"


def test_pth_line_loads_nothing_without_profile_flags(tmp_path):
    assert run_pth_line(tmp_path, ["--train-iters", "5"]) is False


@pytest.mark.slow  # a fresh interpreter that reads the .pth line
def test_pth_line_arms_the_patches_when_profile_is_on_the_command_line(tmp_path):
    assert run_pth_line(tmp_path, ["--profile"]) is True


def test_autoload_can_be_switched_off(tmp_path):
    assert run_pth_line(tmp_path, ["--profile"], {"MINDSPEED_PROF_AUTOLOAD": "0"}) is False


def test_launcher_moves_torch_distributed_launch_local_rank_after_the_script():
    from mindspeed_prof.launch import _script_first
    assert _script_first(["--local-rank=1", "pretrain_gpt.py", "--profile"]) == [
        "pretrain_gpt.py", "--local-rank=1", "--profile"]
    assert _script_first(["--local_rank", "0", "train.py"]) == ["train.py", "--local_rank", "0"]


CHAIN_MESSAGE = "ran no loop mindspeed_prof hooks"


def run_with_autoload(tmp_path, argv, script_text="print('no Megatron here')\n"):
    """``python ARGV`` with the autoload .pth line processed at start-up, as an installed one is
    (a sitecustomize runs at the same point of start-up; the editable install has no .pth)."""
    site_dir = tmp_path / "site"
    site_dir.mkdir(exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(open(PTH).read() + "\n")
    (tmp_path / "plain.py").write_text(script_text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site_dir),
                                                       os.environ.get("PYTHONPATH", "")]),
               MINDSPEED_PROF_AUTOLOAD="1")
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("argv, script_text", [
    (["-m", "mindspeed_prof.launch", "plain.py", "--profile"], "print('no Megatron here')\n"),
    (["plain.py", "--profile"], "import mindspeed_prof.auto\nprint('no Megatron here')\n"),
], ids=["launcher", "import mindspeed_prof.auto"])
def test_chain_not_connected_is_said_once_when_autoload_armed_the_patches_first(
        tmp_path, argv, script_text):
    result = run_with_autoload(tmp_path, argv, script_text)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(CHAIN_MESSAGE) == 1, result.stderr


def test_autoload_alone_stays_quiet_in_a_process_that_never_meant_to_train(tmp_path):
    result = run_with_autoload(tmp_path, ["plain.py", "--profile"])
    assert result.returncode == 0 and CHAIN_MESSAGE not in result.stderr, result.stderr


def test_the_sitecustomize_stand_in_really_runs_the_autoload_hook(tmp_path):
    probe = "import sys\nprint('mindspeed_prof.autoload' in sys.modules)\n"
    result = run_with_autoload(tmp_path, ["plain.py", "--profile"], probe)
    assert result.stdout.strip() == "True", result.stderr
