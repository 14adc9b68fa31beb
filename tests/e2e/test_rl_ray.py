"""Opt-in: the GRPO job with its roles as Ray actors, the way verl runs them
(``RL_RAY_TIER=1`` with ``ray`` installed; Ray takes about a minute and a half to
start on 2 cores, so the default suite leaves it out).

Each actor method is one command wrapped in ``prof.step(g)`` + ``prof.stage(name)``, as a verl
worker method would be, so every role selects its stages with ``profile_stages``: a step
entered once per method call keeps only its first block otherwise (docs/rl.md).
"""

import importlib.util
import json
import os

import pytest

from helpers.cli import run_cli, run_cli_json
from helpers.rl import (assert_every_role_ran_every_step, manifests, run_rl_job,
                        steps_by_folder)
from helpers.traces import torch_traces

TIER_ENV = "RL_RAY_TIER"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get(TIER_ENV) != "1" or importlib.util.find_spec("ray") is None,
                       reason=f"{TIER_ENV}=1 and `pip install ray` run the Ray-actor RL tier"),
]

RAY_YAML = """\
profile: true
profile_save_path: {save}
profile_backend: torch
roles:
  actor:   {{profile_steps: "2-3", profile_ranks: "0", profile_stages: [old_logprob, update]}}
  ref:     {{profile_steps: "2", profile_stages: [ref_logprob]}}
  rollout: {{profile_steps: "3", profile_stages: [generate]}}
"""
STEPS = 4


@pytest.fixture(scope="module", params=[1, 3], ids=["sync-actors", "threaded-actors"])
def ray_run(request, tmp_path_factory):
    """The job once with sync actors (verl's) and once with 3 threads per actor."""
    done, save, worker = run_rl_job(tmp_path_factory.mktemp("rl_ray"), "grpo_ray", RAY_YAML,
                                    STEPS, "--max-concurrency", str(request.param), timeout=600)
    done.max_concurrency = request.param
    return done, save, worker


def test_every_actor_runs_every_step_on_the_threads_ray_gives_it(ray_run):
    done, _, worker = ray_run
    assert_every_role_ran_every_step(done, worker, STEPS)
    if done.max_concurrency == 1:
        for name, report in worker.items():
            # A sync actor runs every call on its main thread (a session may span calls).
            assert report["threads"] == ["MainThread"], (name, report["threads"])
    if done.max_concurrency > 1:
        # What makes this variant worth running: calls of one actor land on different threads,
        # and each selected stage's session starts and ends within its call.
        assert any(len(report["threads"]) > 1 for report in worker.values()), worker
    assert len(worker["actor0"]["losses"]) == STEPS


def test_sessions_live_in_the_actors_never_in_the_driver(ray_run):
    done, save, worker = ray_run
    driver = json.loads(done.stdout.strip().splitlines()[-1])
    actor_pids = {report["pid"] for report in worker.values()}
    assert set(driver["actor_pids"].values()) == actor_pids
    found = dict(manifests(save))
    assert sorted(found) == ["actor/old_logprob", "actor/update", "ref/ref_logprob",
                             "rollout/generate"]
    for folder, data in found.items():
        assert data["pid"] in actor_pids and data["pid"] != driver["driver_pid"], folder
        assert data["errors"] == [], (folder, data["errors"])


def test_each_role_records_only_its_own_stages_steps_and_rank(ray_run):
    _, save, _ = ray_run
    for stage in ("old_logprob", "update"):
        assert steps_by_folder(save / "actor" / stage) == {"step_2-2": [2], "step_3-3": [3]}
    assert steps_by_folder(save / "ref" / "ref_logprob") == {"step_2-2": [2]}
    assert steps_by_folder(save / "rollout" / "generate") == {"step_3-3": [3]}
    [trace] = torch_traces(str(save / "rollout" / "generate"))
    with open(trace) as handle:
        names = {e.get("name") for e in json.load(handle)["traceEvents"]}
    assert "stage:generate" in names and "stage:sync_weights" not in names


def test_check_and_summary_read_the_ray_job(ray_run, capsys):
    _, save, _ = ray_run
    code, report = run_cli_json(capsys, "check", save)
    assert code == 0, report
    assert {(r["role"], r["rank"]): r["verdict"] for r in report["ranks"]} == {
        ("actor", 0): "valid", ("ref", 0): "valid", ("rollout", 0): "valid"}
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0, out
    blocks = out.split("\nRL step ")[1:]
    assert [b.split("\n", 1)[0] for b in blocks] == ["2", "3"]
