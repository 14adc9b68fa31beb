"""Opt-in tier: the same chain on a real Megatron-LM checkout's pretrain_gpt.py (CPU, gloo, two
ranks under torchrun): the README's headline flags alone, a typed rank, the refusals, and the
routes (launcher, import line, autoload).

Set MEGATRON_LM_PATH to a checkout whose version matches the installed megatron-core: tag
core_v0.16.1 (or 0.12.3-0.15.3) with megatron-core 0.16.1 on Python 3.11; core_v0.17.1,
core_v0.18.2 or core_v0.19.0 with megatron-core 0.19.2 on Python 3.12. Install its extra imports
(six, regex, pydantic, einops). Skipped otherwise: Megatron-LM's training code is not on PyPI and
is never vendored here.
"""

import os
import subprocess
import sys

import pytest

from harness.launch import launcher as torchrun_launcher
from harness.real_megatron import TINY, overlay
from helpers.autoload import needs_autoload_pth
from helpers.traces import step_ids, torch_traces

CHECKOUT = os.environ.get("MEGATRON_LM_PATH")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not CHECKOUT, reason="MEGATRON_LM_PATH is not set (point it at a Megatron-LM checkout "
                         "matching the installed megatron-core to run the real-Megatron tier)")]
HEADLINE = ["--profile", "--profile-step-start", "3", "--profile-step-end", "5"]


def run(tmp_path, flags, launcher=("-m", "mindspeed_prof.launch"), first_line=None,
        autoload=False):
    wrapper = overlay.build(CHECKOUT, str(tmp_path / "overlay"), first_line=first_line)
    save = tmp_path / "prof"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                   [str(tmp_path / "overlay"), os.environ.get("PYTHONPATH", "")]),
               CUDA_DEVICE_MAX_CONNECTIONS="1", TORCHDYNAMO_DISABLE="1", OMP_NUM_THREADS="1",
               MINDSPEED_PROF_AUTOLOAD="1" if autoload else "0")
    command = [*torchrun_launcher("master", 2),  # Megatron-LM's examples: --master-addr
               *launcher, wrapper, *TINY, *flags, "--profile-save-path", str(save),
               "--profile-backend", "torch"]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    return done, save


def ranks_traced(save):
    return sorted(os.path.basename(t).split(".")[0] for t in torch_traces(save))


def check_exits_0(save):
    check = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "check", str(save)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_headline_flags_alone_train_to_the_end_with_megatrons_default_ranks(tmp_path):
    done, save = run(tmp_path, HEADLINE)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "iteration        6/       6" in done.stdout
    expected = ["rank0", "rank1"] if overlay.release(CHECKOUT) >= (0, 17) else ["rank0"]
    assert ranks_traced(save) == expected
    assert all(step_ids(t) == [3, 4] for t in torch_traces(save))
    assert "--profile-ranks not given: Megatron's own default" in done.stdout
    assert "Failed to record CUDA event" not in done.stderr
    check_exits_0(save)


def test_real_pretrain_gpt_profiles_rank_1_at_iterations_3_and_4(tmp_path):
    done, save = run(tmp_path, HEADLINE + ["--profile-ranks", "1"])
    assert done.returncode == 0, done.stderr[-4000:]
    traces = torch_traces(save)
    assert ranks_traced(save) == ["rank1"]
    assert step_ids(traces[0]) == [3, 4]
    check_exits_0(save)


def test_a_window_past_train_iters_is_refused_with_its_own_message(tmp_path):
    done, save = run(tmp_path, ["--profile", "--profile-step-start", "5",
                                "--profile-step-end", "9"])
    assert done.returncode != 0
    assert ("--profile-step-end 9 needs iterations up to 8, but --train-iters stops training "
            "after iteration 6") in done.stderr
    assert "names no rank" not in done.stderr and not torch_traces(save)


def test_use_pytorch_profiler_is_refused_with_its_own_message(tmp_path):
    done, save = run(tmp_path, HEADLINE + ["--use-pytorch-profiler", "--tensorboard-dir",
                                           str(tmp_path / "tb")])
    assert done.returncode != 0
    assert "--use-pytorch-profiler starts Megatron's own torch.profiler" in done.stderr
    assert "names no rank" not in done.stderr and not torch_traces(save)


def test_import_line_route_on_a_copy_of_pretrain_gpt(tmp_path):
    done, save = run(tmp_path, HEADLINE + ["--profile-ranks", "1"], launcher=(),
                     first_line="import mindspeed_prof.auto  # profiling hooks")
    assert done.returncode == 0, done.stderr[-4000:]
    assert ranks_traced(save) == ["rank1"] and step_ids(torch_traces(save)[0]) == [3, 4]


@needs_autoload_pth
def test_autoload_route_with_plain_torchrun(tmp_path):
    done, save = run(tmp_path, HEADLINE + ["--profile-ranks", "1"], launcher=(), autoload=True)
    assert done.returncode == 0, done.stderr[-4000:]
    assert ranks_traced(save) == ["rank1"] and step_ids(torch_traces(save)[0]) == [3, 4]
