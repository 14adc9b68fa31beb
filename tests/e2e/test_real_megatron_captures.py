"""Opt-in tier: captures by themselves on a real Megatron-LM checkout's pretrain_gpt.py (CPU, gloo,
two ranks), with the harness's fault knobs run inside the real loop's forward step
(tests/harness/real_megatron/run_pretrain_gpt.py). MEGATRON_LM_PATH as for test_real_megatron.py.
"""

import json
import os
import subprocess
import sys

import pytest

from harness.launch import launcher
from harness.real_megatron import TINY, overlay
from helpers.traces import manifest, step_ids, torch_traces

CHECKOUT = os.environ.get("MEGATRON_LM_PATH")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not CHECKOUT, reason="MEGATRON_LM_PATH is not set (point it at a Megatron-LM checkout "
                         "matching the installed megatron-core to run the real-Megatron tier)")]


def real_run(tmp_path, faults, *flags):
    wrapper = overlay.build(CHECKOUT, str(tmp_path / "overlay"))
    save = tmp_path / "prof"
    path = os.pathsep.join(p for p in (str(tmp_path / "overlay"), os.environ.get("PYTHONPATH"))
                           if p)
    env = dict(os.environ, PYTHONPATH=path, CUDA_DEVICE_MAX_CONNECTIONS="1",
               TORCHDYNAMO_DISABLE="1", OMP_NUM_THREADS="1", MINDSPEED_PROF_AUTOLOAD="0",
               **faults)
    command = [*launcher("master", 2),  # Megatron-LM's examples: --master-addr
               "-m", "mindspeed_prof.launch", wrapper, *TINY, "--profile", "--profile-ranks",
               "all", "--profile-save-path", str(save), "--profile-backend", "torch",
               "--profile-capture-warmup", "5", *map(str, flags)]
    run = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    return save, run


def cli(*args):
    return subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", *map(str, args)],
                          capture_output=True, text=True)


def test_real_loop_captures_a_slow_iteration_on_rank_1_from_the_next_one_on_both_ranks(tmp_path):
    save, run = real_run(tmp_path, {"HARNESS_SLEEP_AT_ITER": "14:4@1"}, "--train-iters", 20,
                         "--profile-on-slow-step", 12, "--profile-trigger-poll", 1)
    traces = torch_traces(save)
    assert [os.path.relpath(t, save).split(os.sep)[0] for t in traces] == ["iter_15-17"] * 2
    assert [step_ids(t) for t in traces] == [[15, 16, 17], [15, 16, 17]]
    for rank in (0, 1):
        [window] = manifest(save, rank)["windows"]
        assert (window["trigger"]["rule"], window["trigger"]["unit"]) == ("slow step", 14)
    assert cli("check", save).returncode == 0


def test_real_loop_captures_a_straggler_with_its_reference_and_names_the_slowed_operator(
        tmp_path):
    save, run = real_run(tmp_path, {"HARNESS_BUSY_FROM_ITER": "8:0.6@1"}, "--train-iters", 24,
                         "--profile-on-straggler", 4, "--profile-trigger-poll", 2,
                         "--profile-max-captures", 1)
    traces = torch_traces(save)
    assert len(traces) == 2 and step_ids(traces[0]) == step_ids(traces[1])
    roles = {rank: manifest(save, rank)["windows"][0]["trigger"]["this_rank"] for rank in (0, 1)}
    assert roles == {0: "reference", 1: "straggler"}
    assert cli("check", save).returncode == 0
    summary = cli("summary", save, "--json")
    [capture] = json.loads(summary.stdout)["captures"]
    assert (capture["anomalous"]["rank"], capture["reference"]["rank"]) == (1, 0)
    assert capture["grew"][0]["name"] == "aten::mm"
