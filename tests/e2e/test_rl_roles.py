"""The RL scenario end to end: a GRPO-shaped job (tests/harness/rl) whose roles are separate
processes with tiny megatron-core GPTs, profiled from one role YAML like the issue's."""

import json
import os

import pytest

from helpers.cli import run_cli, run_cli_json
from helpers.rl import (assert_every_role_ran_every_step, manifests, run_rl_job,
                        steps_by_folder)
from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.e2e

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RL_YAML = """\
profile: true
profile_save_path: {save}
profile_backend: torch
roles:
  actor:   {{profile_steps: "2-3", profile_ranks: "0", profile_stages: [old_logprob, update]}}
  ref:     {{profile_steps: "2"}}
  rollout: {{profile_steps: "3", profile_level: level1}}
"""
STEPS = 4


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    """One GRPO job for every test here: 4 RL steps, 4 role processes."""
    return run_rl_job(tmp_path_factory.mktemp("rl"), "grpo", RL_YAML, STEPS)


def folders(path):
    return sorted(os.listdir(path))


def test_the_grpo_job_runs_every_role_through_every_rl_step(rl_run):
    done, _, worker = rl_run
    assert_every_role_ran_every_step(done, worker, STEPS)
    assert [s for g, s in worker["actor1"]["stages"] if g == 1] == [
        "sync_weights", "old_logprob", "update"]
    assert [s for g, s in worker["rollout0"]["stages"] if g == 1] == ["sync_weights", "generate"]
    assert len(worker["actor0"]["losses"]) == STEPS


def test_output_has_one_folder_per_role_and_nothing_from_the_controller(rl_run):
    done, save, worker = rl_run
    assert folders(save) == ["actor", "ref", "rollout"]
    pids = {data["pid"] for _, data in manifests(save)}
    assert pids <= {report["pid"] for report in worker.values()}
    controller = json.loads(done.stdout.strip().splitlines()[-1])
    assert controller["exit_codes"] == {"actor0": 0, "actor1": 0, "ref0": 0, "rollout0": 0}


def test_actor_records_only_its_selected_stages_steps_and_rank(rl_run):
    _, save, _ = rl_run
    actor = save / "actor"
    assert folders(actor) == ["old_logprob", "update"]
    for stage in ("old_logprob", "update"):
        assert folders(actor / stage) == ["profile_manifest_rank0.json", "step_2-2", "step_3-3"]
        assert steps_by_folder(actor / stage) == {"step_2-2": [2], "step_3-3": [3]}


def test_ref_and_rollout_record_their_whole_step_at_their_own_steps(rl_run):
    _, save, _ = rl_run
    assert steps_by_folder(save / "ref") == {"step_2-2": [2]}
    assert steps_by_folder(save / "rollout") == {"step_3-3": [3]}
    with open(save / "rollout" / "profile_manifest_rank0.json") as handle:
        rollout = json.load(handle)
    assert rollout["role"] == "rollout" and rollout["config"]["profile_level"] == "level1"
    [trace] = torch_traces(str(save / "rollout"))
    with open(trace) as handle:
        names = {e.get("name") for e in json.load(handle)["traceEvents"]}
    assert {"stage:sync_weights", "stage:generate"} <= names


def test_check_gives_a_valid_verdict_per_role_and_rank(rl_run, capsys):
    _, save, _ = rl_run
    code, report = run_cli_json(capsys, "check", save)
    assert code == 0, report
    assert report["expected_ranks"] == {"actor": [0], "ref": [0], "rollout": [0]}
    assert {(r["role"], r["rank"]): r["verdict"] for r in report["ranks"]} == {
        ("actor", 0): "valid", ("ref", 0): "valid", ("rollout", 0): "valid"}
    assert report["ranks"][0]["parts"] == {"old_logprob": "valid", "update": "valid"}


def test_summary_prints_one_cross_role_table_per_profiled_rl_step(rl_run, capsys):
    _, save, _ = rl_run
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0, out
    blocks = out.split("\nRL step ")[1:]
    assert [b.split("\n", 1)[0] for b in blocks] == ["2", "3"]
    step2, step3 = (b.splitlines() for b in blocks)
    assert step2[1].split()[:3] == ["ROLE", "RANKS", "STEP"] and "ref_logprob" in step2[1]
    assert [line.split()[0] for line in step2[2:4]] == ["actor", "ref"]
    assert [line.split()[0] for line in step3[2:4]] == ["actor", "rollout"]
    assert "generate" in step3[1] and "update" in step3[1]


# -- Megatron-LM's own RL loop (megatron/rl, train_rl.py) --------------------------------------

RL_HARNESS = os.path.join(TESTS, "harness", "rl")


def trace_spans(trace):
    """name -> [(start, end)] of the host events of one chrome trace."""
    with open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    spans = {}
    for event in events:
        if event.get("ph") == "X" and not str(event.get("cat", "")).startswith("gpu"):
            start = float(event["ts"])
            spans.setdefault(event["name"], []).append((start, start + float(event["dur"])))
    return spans


def test_megatron_rl_iteration_window_covers_rollout_logprobs_and_update(tmp_path):
    from harness.launch import default_args
    from helpers.e2e import env_for, profile_flags, train

    save = tmp_path / "prof"
    env = env_for(tmp_path, pythonpath=(os.path.join(TESTS, "harness"),
                                        os.path.join(RL_HARNESS, "megatron_rl_standin")))
    args = (default_args(train_iters=4) + ["--perform-rl-step", "--grpo-prompts-per-step", "2",
                                           "--grpo-group-size", "2"]
            + profile_flags(save, ranks=("0",), start=2, end=4))
    run = train(tmp_path, args, nproc=1, env=env, with_default_args=False,
                script=os.path.join(RL_HARNESS, "train_rl.py")).check()
    with open(tmp_path / "reports" / "rl_calls_rank0.json") as handle:
        calls = json.load(handle)
    assert [c for c in calls if c[1] in (2, 3)] == [
        ["get_environment_rollouts", 2], ["prepare_data_for_update", 2],
        ["get_environment_rollouts", 3], ["prepare_data_for_update", 3]], run.describe()
    [trace] = torch_traces(str(save))
    spans = trace_spans(trace)
    for step in (2, 3):
        [(start, end)] = spans[f"ProfilerStep#{step}"]
        inside = {name: [s for s in spans.get(f"stage:{name}", []) if start <= s[0] <= end]
                  for name in ("rollout", "logprobs", "update")}
        assert all(len(found) == 1 for found in inside.values()), (step, inside)
        assert inside["rollout"][0][1] <= inside["logprobs"][0][0]
        assert inside["logprobs"][0][1] <= inside["update"][0][0]


@pytest.mark.parametrize("exit_interval", [None, 3])
def test_megatron_rl_ending_its_process_with_os_exit_keeps_the_window_and_says_how_it_ended(
        tmp_path, exit_interval):
    """From Megatron-LM 0.17 megatron.rl's shutdown ends the process with ``os._exit(0)``, at
    the end of ``pretrain`` and on ``train()``'s own exit path (``--exit-interval``), where
    ``train()``'s ``finally`` never runs: the window and the final manifest must be on disk."""
    from harness.launch import default_args
    from helpers.e2e import env_for, profile_flags, train

    save = tmp_path / "prof"
    env = env_for(tmp_path, pythonpath=(os.path.join(TESTS, "harness"),
                                        os.path.join(RL_HARNESS, "megatron_rl_standin")),
                  MEGATRON_STANDIN_VERSION="0.17.1")  # 0.17+: os._exit; 0.18+ need cfg_container
    args = (default_args(train_iters=4) + ["--perform-rl-step", "--grpo-prompts-per-step", "2",
                                           "--grpo-group-size", "2"]
            + (["--exit-interval", str(exit_interval)] if exit_interval else [])
            + profile_flags(save, ranks=("0",), start=2, end=4))
    run = train(tmp_path, args, nproc=1, env=env, with_default_args=False,
                script=os.path.join(RL_HARNESS, "train_rl.py")).check()
    with open(tmp_path / "reports" / "rl_calls_rank0.json") as handle:
        calls = json.load(handle)
    assert calls[-1] == ["rl_inference_interface_shutdown", None], run.describe()
    assert run.reports[0]["end"]["how"] == "os_exit", run.reports[0]["end"]
    [trace] = torch_traces(str(save))
    assert step_ids(trace) == [2, 3]
    data = manifest(save, 0)
    assert data["status"] == "complete", data
    if exit_interval:
        assert data["exit"]["reason"] == "sys.exit" and "os._exit" in data["exit"]["detail"]
    else:
        assert data["exit"]["reason"] == "finished", data["exit"]
