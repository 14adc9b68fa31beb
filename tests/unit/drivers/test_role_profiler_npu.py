"""role_profiler's NPU path against the torch_npu double: captures named after role and rank,
step ids equal to RL steps, and check/summary reading them."""

import csv
import glob
import os

import torch

import mindspeed_prof
from helpers.cli import run_cli, run_cli_json
from helpers.npu import fake_npu  # noqa: F401 - a fixture

MODEL = torch.nn.Linear(16, 16)


def npu_config(save, **roles):
    return {"profile": True, "profile_save_path": str(save), "profile_backend": "npu",
            "profile_analyse": "sync", "profile_with_cpu": True, "profile_level": "level1",
            "roles": roles}


def rl_loop(prof, steps, stages):
    for g in range(1, steps + 1):
        with prof.step(g):
            for stage in stages:
                with prof.stage(stage):
                    MODEL(torch.randn(4, 16)).sum().backward()


def kernel_step_ids(capture):
    with open(os.path.join(capture, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv")) as handle:
        return {row["Step Id"] for row in csv.DictReader(handle)}


def test_stage_captures_carry_role_and_rank_in_their_name_and_rl_steps_as_step_ids(
        tmp_path, fake_npu, capsys):
    save = tmp_path / "prof"
    config = npu_config(save, actor={"profile_steps": "2-3", "profile_stages": ["update"]})
    with mindspeed_prof.role_profiler("actor", config, rank=0, world_size=2,
                                      total_steps=3) as prof:
        rl_loop(prof, 3, ("old_logprob", "update"))
    for g in (2, 3):
        (capture,) = glob.glob(str(save / "actor" / "update" / f"step_{g}-{g}"
                                   / f"actor_rank0_step{g}_*_ascend_pt"))
        assert kernel_step_ids(capture) == {str(g)}
    assert not os.path.exists(save / "actor" / "old_logprob")
    capsys.readouterr()  # the profiling log lines
    code, report = run_cli_json(capsys, "check", save)
    assert code == 0, report
    assert [(r["role"], r["rank"], r["verdict"]) for r in report["ranks"]] == [
        ("actor", 0, "valid")]


def test_colocated_roles_on_npu_keep_their_captures_apart(tmp_path, fake_npu, capsys):
    save = tmp_path / "prof"
    config = npu_config(save, actor={"profile_steps": "2"}, ref={"profile_steps": "2"})
    actor = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=2)
    ref = mindspeed_prof.role_profiler("ref", config, rank=0, world_size=1, total_steps=2)
    for g in (1, 2):
        with ref.step(g), ref.stage("ref_logprob"):
            MODEL(torch.randn(4, 16)).sum()
        with actor.step(g), actor.stage("update"):
            MODEL(torch.randn(4, 16)).sum().backward()
    actor.close()
    ref.close()
    captures = glob.glob(str(save / "*" / "step_2-2" / "*_ascend_pt"))
    assert sorted(os.path.relpath(p, save).split("_")[:3] for p in captures) == [
        ["actor/step", "2-2/actor", "rank0"], ["ref/step", "2-2/ref", "rank0"]]
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0, out
    assert "RL step 2" in out and "ref_logprob" in out and "update" in out
