"""patches/megatron_rl.py: megatron.rl's ``rl_inference_interface_shutdown`` ends the process with
``os._exit(0)`` (Megatron-LM 0.19), on ``train()``'s exit path (``--exit-interval``, the exit
signal handler: inside ``train()``, whose ``finally`` then never runs) and at the end of
``pretrain`` (after ``train()`` returned, its last trace still being exported in the background).
The hooked shutdown closes the driver and waits for its export first. Each scenario runs in a
fresh interpreter whose stand-in ``megatron.rl.rl_utils`` exits as the real one does."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.slow  # each scenario in a fresh interpreter that os._exit()s

SCENARIO = """
import os, sys, time, types
import torch
from mindspeed_prof import ProfilerConfig
from mindspeed_prof.backends import torch_backend
from mindspeed_prof.drivers.training import TrainingDriver
from mindspeed_prof.patches.state import state

rl_utils = types.ModuleType("megatron.rl.rl_utils")

def rl_inference_interface_shutdown():
    os._exit(0)  # what Megatron-LM 0.19's does, after stopping its servers

rl_utils.rl_inference_interface_shutdown = rl_inference_interface_shutdown
sys.modules["megatron.rl.rl_utils"] = rl_utils
if HOOKED:
    from mindspeed_prof.patches.megatron_rl import hook_rl_loop
    hook_rl_loop()
if SLOW_EXPORT:  # a large trace: its background export outlives train()'s return
    export = torch_backend.TorchBackend._export
    def slow_export(self, prof, path):
        time.sleep(1.5)
        export(self, prof, path)
    torch_backend.TorchBackend._export = slow_export

config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=END,
                        profile_save_path=SAVE, profile_backend="torch")
manager = TrainingDriver(config, rank=0, world_size=1)
manager.arm(first_iteration=1, train_iters=6)
state.finished_manager, state.manager, state.training = manager, manager, True
for iteration in (1, 2, 3):
    manager.begin(iteration)
    torch.mm(torch.randn(64, 64), torch.randn(64, 64))
    manager.end(iteration)
if INSIDE_TRAIN:  # Megatron's exit path: the shutdown runs inside train()
    pass
else:  # train() returned: its finally closed the driver, leaving the export running
    state.training = False
    manager.close("finished", wait=False)
sys.modules["megatron.rl.rl_utils"].rl_inference_interface_shutdown()
print("not reached")
"""


def run_scenario(tmp_path, hooked=True, inside_train=True, end=6, slow_export=False):
    script = tmp_path / "scenario.py"
    save = tmp_path / "prof"
    script.write_text(f"SAVE = {str(save)!r}\nHOOKED = {hooked}\nINSIDE_TRAIN = {inside_train}\n"
                      f"END = {end}\nSLOW_EXPORT = {slow_export}\n" + textwrap.dedent(SCENARIO))
    env = dict(os.environ, MINDSPEED_PROF_AUTOLOAD="0")
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not reached" not in done.stdout  # the stand-in really ended the process
    return save


def test_without_the_hook_an_exit_inside_train_loses_the_running_window(tmp_path):
    # what the real loop did before: the scenario's stand-in is faithful enough to lose it
    save = run_scenario(tmp_path, hooked=False)
    assert torch_traces(save) == []
    assert manifest(save, 0)["windows"][0]["status"] == "running"
    assert manifest(save, 0).get("exit") is None


def test_an_exit_inside_train_writes_the_running_window_and_says_how_the_run_ended(tmp_path):
    save = run_scenario(tmp_path)  # window 2-6, still running at the exit after step 3
    traces = torch_traces(save)
    assert len(traces) == 1 and step_ids(traces[0]) == [2, 3]
    found = manifest(save, 0)
    assert found["exit"]["reason"] == "sys.exit"
    assert "os._exit" in found["exit"]["detail"]
    assert found["windows"][0]["iterations_recorded"] == [2, 3]


def test_the_shutdown_after_train_waits_for_the_background_export(tmp_path):
    save = run_scenario(tmp_path, inside_train=False, end=4, slow_export=True)
    traces = torch_traces(save)
    assert len(traces) == 1 and step_ids(traces[0]) == [2, 3]
    with open(traces[0]) as handle:
        json.load(handle)  # whole, not cut by the exit
    assert manifest(save, 0)["exit"]["reason"] == "finished"


def test_without_the_hook_the_shutdown_after_train_kills_a_slow_export(tmp_path):
    save = run_scenario(tmp_path, hooked=False, inside_train=False, end=4, slow_export=True)
    assert torch_traces(save) == []
