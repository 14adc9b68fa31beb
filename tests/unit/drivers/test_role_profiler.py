"""role_profiler in one process with the real torch.profiler: windows in RL steps, stages,
colocated roles, threads, and what an unselected role costs."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

import mindspeed_prof
from mindspeed_prof.errors import ConfigError

from helpers.traces import step_ids, torch_traces


def roles_config(save, **roles):
    return {"profile": True, "profile_save_path": str(save), "profile_backend": "torch",
            "roles": roles}


def work():
    x = torch.randn(32, 32)
    return (x @ x).sum()


def manifest(path):
    with open(path) as handle:
        return json.load(handle)


def traces(folder):
    return torch_traces(str(folder))


def test_whole_step_session_numbers_trace_steps_with_rl_steps_and_labels_stages(tmp_path):
    config = roles_config(tmp_path, ref={"profile_steps": "3-4"})
    with mindspeed_prof.role_profiler("ref", config, rank=0, world_size=1, total_steps=5) as prof:
        for g in range(1, 6):
            with prof.step(g):
                with prof.stage("ref_logprob"):
                    work()
    found = {os.path.basename(os.path.dirname(t)): step_ids(t) for t in traces(tmp_path / "ref")}
    assert found == {"step_3-3": [3], "step_4-4": [4]}
    with open(traces(tmp_path / "ref" / "step_3-3")[0]) as handle:
        names = {e.get("name") for e in json.load(handle)["traceEvents"]}
    assert "stage:ref_logprob" in names
    data = manifest(tmp_path / "ref" / "profile_manifest_rank0.json")
    assert data["role"] == "ref" and data["unit"] == "RL step" and data["status"] == "complete"


def test_selected_stages_are_each_their_own_session_per_step_and_others_are_not_recorded(tmp_path):
    config = roles_config(tmp_path, actor={"profile_steps": "2-3",
                                           "profile_stages": ["old_logprob", "update"]})
    prof = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=4)
    for g in range(1, 5):
        with prof.step(g):
            for stage in ("sync_weights", "old_logprob", "update"):
                with prof.stage(stage):
                    work()
    prof.close()
    root = tmp_path / "actor"
    assert sorted(os.listdir(root)) == ["old_logprob", "update"]
    for stage in ("old_logprob", "update"):
        found = {os.path.basename(os.path.dirname(t)): step_ids(t)
                 for t in traces(root / stage)}
        assert found == {"step_2-2": [2], "step_3-3": [3]}
        data = manifest(root / stage / "profile_manifest_rank0.json")
        assert data["role"] == "actor" and data["stage"] == stage
        # profile_stages is the role driver's to use: no "ignored" warning here
        assert not any("--profile-stages" in w["message"] for w in data["warnings"])


def test_a_window_past_total_steps_is_refused_naming_the_role(tmp_path):
    config = roles_config(tmp_path, actor={"profile_steps": "9-10"})
    with pytest.raises(ConfigError, match=r"role 'actor': --profile-steps window 9-10 .* 4"):
        mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=4)


def test_colocated_roles_overlapping_sessions_are_refused_naming_both_and_work_goes_on(
        tmp_path, capsys):
    config = roles_config(tmp_path, actor={"profile_steps": "2"}, ref={"profile_steps": "2"})
    actor = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=3)
    ref = mindspeed_prof.role_profiler("ref", config, rank=0, world_size=1, total_steps=3)
    done = []
    for g in range(1, 4):
        with actor.step(g):
            with ref.step(g):  # ref's step runs inside actor's: one process, one session
                done.append(work())
    actor.close()
    ref.close()
    assert len(done) == 3
    assert [step_ids(t) for t in traces(tmp_path / "actor")] == [[2]]
    assert traces(tmp_path / "ref") == []
    errors = manifest(tmp_path / "ref" / "profile_manifest_rank0.json")["errors"]
    assert any("role 'ref'" in e["message"] and "role 'actor'" in e["message"] for e in errors)
    assert "role 'actor'" in capsys.readouterr().err


def test_colocated_roles_one_after_the_other_both_record(tmp_path):
    config = roles_config(tmp_path, actor={"profile_steps": "2"}, ref={"profile_steps": "2"})
    actor = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=3)
    ref = mindspeed_prof.role_profiler("ref", config, rank=0, world_size=1, total_steps=3)
    for g in range(1, 4):
        with ref.step(g):
            work()
        with actor.step(g):
            work()
    actor.close()
    ref.close()
    assert [step_ids(t) for t in traces(tmp_path / "actor")] == [[2]]
    assert [step_ids(t) for t in traces(tmp_path / "ref")] == [[2]]
    assert manifest(tmp_path / "ref" / "profile_manifest_rank0.json")["errors"] == []


def errors_on_another_thread(call, name=None):
    """The RuntimeError messages ``call()`` raises on a new thread (joined before returning)."""
    caught = []

    def other_thread():
        try:
            call()
        except RuntimeError as exc:
            caught.append(str(exc))

    thread = threading.Thread(target=other_thread, name=name)
    thread.start()
    thread.join()
    return caught


def test_stage_called_from_another_thread_than_the_step_is_a_clear_error(tmp_path):
    config = roles_config(tmp_path, actor={"profile_steps": "1"})
    prof = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=2)
    with prof.step(1):
        caught = errors_on_another_thread(lambda: prof.stage("update"))
    prof.close()
    assert len(caught) == 1 and "stage('update') on thread" in caught[0]
    assert "call step() and stage() on the thread that computes" in caught[0]


def test_a_step_entered_on_another_thread_while_one_runs_is_a_clear_error(tmp_path):
    config = roles_config(tmp_path, actor={"profile_steps": "1"})
    prof = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=2)
    with prof.step(1):
        caught = errors_on_another_thread(lambda: prof.step(2), name="worker-2")
    prof.close()
    assert len(caught) == 1
    assert "step(2) on thread 'worker-2' while step(1) runs on another thread" in caught[0]


def test_steps_must_increase_and_not_nest(tmp_path):
    config = roles_config(tmp_path, actor={"profile_steps": "1"})
    prof = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=3)
    with prof.step(2):
        with pytest.raises(RuntimeError, match=r"step\(3\) inside step\(2\)"):
            prof.step(3)
    with pytest.raises(ValueError, match=r"step\(1\) after step\(2\); RL steps must not go back"):
        prof.step(1)
    with pytest.raises(ValueError, match=r"step\('3'\) must be the controller's RL step number"):
        prof.step("3")
    with prof.step(torch.tensor(3).numpy()[()]):  # a numpy integer is a step number too
        pass
    prof.close()


def test_unselected_rank_records_nothing_and_costs_next_to_nothing(tmp_path):
    config = roles_config(tmp_path, actor={"profile_steps": "1", "profile_ranks": "0"})
    prof = mindspeed_prof.role_profiler("actor", config, rank=1, world_size=2, total_steps=3)
    assert prof.idle
    started = time.perf_counter()
    for g in range(1, 20_001):
        with prof.step(g):
            with prof.stage("update"):
                pass
    per_step_us = (time.perf_counter() - started) / 20_000 * 1e6
    prof.close()
    assert not os.path.exists(tmp_path / "actor")
    assert prof.step(1) is prof.stage("update") is prof.step(2)  # one shared no-op, no recorder
    assert per_step_us < 20, per_step_us  # about 1.3 us here


def test_rank_defaults_to_the_rank_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    config = roles_config(tmp_path, actor={"profile_steps": "1", "profile_ranks": "1"})
    with mindspeed_prof.role_profiler("actor", config, total_steps=1) as prof:
        with prof.step(1):
            work()
    assert os.path.isfile(tmp_path / "actor" / "profile_manifest_rank1.json")


@pytest.mark.slow  # a child interpreter that exits inside its step
def test_exit_inside_a_step_writes_the_trace_and_a_final_manifest_that_says_cut(tmp_path):
    script = (
        "import sys, torch, mindspeed_prof\n"
        f"cfg = {{'profile': True, 'profile_save_path': {str(tmp_path)!r}, "
        "'profile_backend': 'torch', 'roles': {'actor': {'profile_steps': '1-3'}}}\n"
        "prof = mindspeed_prof.role_profiler('actor', cfg, rank=0, world_size=1)\n"
        "for g in range(1, 4):\n"
        "    with prof.step(g):\n"
        "        torch.randn(8, 8).sum()\n"
        "        if g == 2: sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stderr
    data = manifest(tmp_path / "actor" / "profile_manifest_rank0.json")
    # sys.exit inside step 2 of window 1-3: the window is cut, and the manifest says how.
    assert data["exit"] == {"reason": "sys.exit", "detail": "exit code 3"}
    assert data["status"] == "cut"
    assert data["planned"][0]["cut"] == {"reason": "sys.exit", "in_progress": 2}
    assert [step_ids(t) for t in traces(tmp_path / "actor")] == [[1], [2]]


def test_importing_the_package_does_not_load_the_role_driver():
    code = ("import sys, mindspeed_prof; print('mindspeed_prof.drivers.roles' in sys.modules, "
            "callable(mindspeed_prof.role_profiler), 'mindspeed_prof.drivers.roles' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"]
