"""Opt-in tier: the same chain on a real Megatron-LM checkout's pretrain_gpt.py (CPU, gloo).

Set MEGATRON_LM_PATH to a checkout whose version matches the installed megatron-core (e.g. tag
core_v0.16.1 with megatron-core 0.16.1) and install its extra imports (six, regex, pydantic).
Skipped otherwise: Megatron-LM's training code is not on PyPI and is never vendored here.
"""

import os
import subprocess
import sys

import pytest

from harness.real_megatron import TINY, overlay
from helpers.traces import step_ids, torch_traces

CHECKOUT = os.environ.get("MEGATRON_LM_PATH")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not CHECKOUT, reason="MEGATRON_LM_PATH is not set (point it at a Megatron-LM checkout "
                         "matching the installed megatron-core to run the real-Megatron tier)")]


def test_real_pretrain_gpt_profiles_rank_1_at_iterations_3_and_4(tmp_path):
    wrapper = overlay.build(CHECKOUT, str(tmp_path / "overlay"))
    save = tmp_path / "prof"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "overlay"), CUDA_DEVICE_MAX_CONNECTIONS="1",
               TORCHDYNAMO_DISABLE="1", OMP_NUM_THREADS="1", MINDSPEED_PROF_AUTOLOAD="0")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
               "2", "-m", "mindspeed_prof.launch", wrapper, *TINY, "--profile", "--profile-ranks",
               "1", "--profile-step-start", "3", "--profile-step-end", "5", "--profile-save-path",
               str(save), "--profile-backend", "torch"]
    run = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    traces = torch_traces(save)
    assert [os.path.basename(t).split(".")[0] for t in traces] == ["rank1"]
    assert step_ids(traces[0]) == [3, 4]
    check = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "check", str(save)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
