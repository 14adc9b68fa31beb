"""An RL role whose profile_stages names a stage the worker never runs (a typo): it is said at
the first step, and at the end as what it is, not as a loop that ended before the window."""

import json

import torch

import mindspeed_prof


def run_actor(tmp_path, capsys, stages):
    config = {"profile": True, "profile_save_path": str(tmp_path), "profile_backend": "torch",
              "roles": {"actor": {"profile_steps": "2-3", "profile_stages": stages}}}
    prof = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=3)
    for g in range(1, 4):
        with prof.step(g):
            for stage in ("generate", "update"):
                with prof.stage(stage):
                    torch.randn(8, 8).sum()
    prof.close()
    return capsys.readouterr().err


def warnings_of(tmp_path, stage):
    with open(tmp_path / "actor" / stage / "profile_manifest_rank0.json") as handle:
        return [w["message"] for w in json.load(handle)["warnings"]]


def test_a_selected_stage_that_never_ran_is_said_at_the_first_step_and_at_the_end(
        tmp_path, capsys):
    err = run_actor(tmp_path, capsys, ["updte", "update"])
    said = warnings_of(tmp_path, "updte")
    assert said[0] == ("profile_stages names 'updte', but RL step 1 ran no stage of that "
                       "name (it ran 'generate', 'update'); the names your worker passes to "
                       "prof.stage() are the ones to select")
    assert said[-1] == ("profile_stages names 'updte', but no stage of that name ran in RL "
                        "steps 1-3 (the stages that ran: 'generate', 'update'); nothing was "
                        "profiled for it: select the names your worker passes to prof.stage()")
    assert "before RL step 2" not in err and "ended (finished) before" not in err
    assert err.count("RL step 1 ran no stage of that name") == 1
    assert not any("updte" in w or "before" in w for w in warnings_of(tmp_path, "update"))
