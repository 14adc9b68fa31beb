"""Rank selection by parallel topology and the on-demand trigger, under torchrun."""

import json
import os
import subprocess
import sys
import time

import pytest

from harness.launch import ENTRY_SCRIPT, default_args, launcher
from helpers.e2e import LAUNCHER, env_for, profile_flags, train
from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.e2e


def rank_of(path):
    return int(os.path.basename(path).split(".")[0].removeprefix("rank"))


def test_pp_stage_leaders_picks_one_rank_per_stage_on_tp2_pp2(tmp_path):
    save = tmp_path / "prof"
    args = default_args(tp=2, pp=2) + profile_flags(save, ranks=("pp-stage-leaders",),
                                                    start=2, end=3)
    run = train(tmp_path, args, nproc=4, timeout=300).check()
    assert sorted(rank_of(p) for p in torch_traces(save)) == [0, 2], run.describe()
    assert manifest(save, 2)["selected_ranks"] == [0, 2]
    assert "profiling rank(s) 0,2 at iteration 2" in run.stdout


def test_selector_matching_no_rank_stops_the_job_at_start_up(tmp_path):
    run = train(tmp_path, profile_flags(tmp_path / "prof", ranks=("tp=3",)))
    assert run.returncode != 0
    assert "--profile-ranks tp=3 matches no rank of this job (world size 2)" in run.stderr
    assert all(r["train_step_iterations"] == [] for r in run.reports.values())


def test_trigger_while_training_runs_profiles_the_same_iterations_on_every_rank(tmp_path):
    save, request = tmp_path / "prof", tmp_path / "trigger.json"
    args = [*default_args(train_iters=30),
            "--profile", "--profile-save-path", str(save), "--profile-backend", "torch",
            "--profile-ranks", "all", "--profile-trigger-file", str(request),
            "--profile-trigger-poll", "2"]
    # rank 0 pauses in iteration 6, so the request lands while training is under way
    env = env_for(tmp_path, HARNESS_SLEEP_AT_ITER="6:4@0")
    command = [*launcher("master", 2),  # Megatron-LM's examples: --master-addr
               *LAUNCHER, str(ENTRY_SCRIPT), *args]
    job = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    report = tmp_path / "reports" / "rank0.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            done = json.loads(report.read_text())["train_step_iterations"]
        except (OSError, ValueError, KeyError):
            done = []
        if 5 in done:
            break
        time.sleep(0.2)
    trigger = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "trigger", str(request),
                              "--steps", "2"], capture_output=True, text=True)
    assert trigger.returncode == 0, trigger.stderr
    out, err = job.communicate(timeout=180)
    assert job.returncode == 0, err[-3000:]
    windows = sorted(d for d in os.listdir(save) if d.startswith("iter_"))
    assert len(windows) == 1, (windows, out[-2000:])
    traces = torch_traces(save / windows[0])
    assert sorted(rank_of(p) for p in traces) == [0, 1]
    ids = [step_ids(p) for p in traces]
    assert ids[0] == ids[1] and len(ids[0]) == 2 and ids[0][0] > 6
    status = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "trigger", str(request),
                             "--status"], capture_output=True, text=True)
    assert status.returncode == 0 and status.stdout.count("idle") == 2


def test_data_parallel_coordinate_filter_selects_the_second_replica(tmp_path):
    save = tmp_path / "prof"
    run = train(tmp_path, profile_flags(save, ranks=("dp=1",), start=2, end=3)).check()
    assert [rank_of(p) for p in torch_traces(save)] == [1], run.describe()


def test_a_rank_range_profiles_each_rank_of_it_and_the_manifest_keeps_the_range(tmp_path):
    save = tmp_path / "prof"
    # 0-1048575: every rank this job has; the part past the world size is said, never built
    run = train(tmp_path, profile_flags(save, ranks=("0-1048575",), start=2, end=3)).check()
    assert sorted(rank_of(p) for p in torch_traces(save)) == [0, 1], run.describe()
    assert manifest(save, 1)["selected_ranks"] == [0, 1]
    assert manifest(save, 1)["config"]["profile_ranks"] == ["0-1048575"]
    assert "rank(s) 2-1048575 are beyond this job's 2 ranks" in run.stdout + run.stderr
