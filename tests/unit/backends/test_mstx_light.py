"""`--profile-level level_none --profile-mstx`: a light capture that still shows every unit
(ProfilerStep#N), request, forward and RL stage, as mstx ranges recorded by the torch_npu double;
`check` knows what such a capture holds and does not ask it for kernels."""

import glob
import json
import os
import sys

import pytest
import torch

import mindspeed_prof
from helpers.cli import run_cli, run_cli_json
from helpers.inference import armed, config as request_config, serve
from helpers.npu import fake_npu_fixture
from mindspeed_prof import ProfilerConfig, profile

MODEL = torch.nn.Linear(8, 8)
# (profile_with_cpu: on by default in ProfilerConfig; the flags leave it off for level_none
# with mstx when it is not given, as show-config says)
LIGHT = dict(profile_backend="npu", profile_analyse="sync", profile_level="level_none",
             profile_mstx=True, profile_with_cpu=False)

fake_npu = fake_npu_fixture("2.7.1")
fake_npu_2_14 = fake_npu_fixture("2.14.0")
fake_npu_2_6 = fake_npu_fixture("2.6.0")


def mstx_calls():
    return sys.modules["torch_npu._C._mstx"].CALLS


def trace_names(capture, cat=None):
    with open(os.path.join(capture, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as handle:
        events = json.load(handle)
    return sorted({e["name"] for e in events if e.get("ph") == "X"
                   and (cat is None or e.get("cat") == cat)})


def train_light(tmp_path, **overrides):
    cfg = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5,
                         profile_save_path=str(tmp_path / "prof"), **{**LIGHT, **overrides})
    with profile(cfg, train_iters=6, rank=0, world_size=1) as prof:
        for _ in range(6):
            with prof.manager.range("stage:update"):
                MODEL(torch.randn(2, 8)).sum().backward()
            prof.step()
    (capture,) = glob.glob(str(tmp_path / "prof" / "rank0_*_ascend_pt"))
    return capture


@pytest.mark.parametrize("fixture", ["fake_npu", "fake_npu_2_14"])
def test_a_light_capture_holds_every_iteration_and_label_as_mstx_ranges(tmp_path, capsys,
                                                                      request, fixture):
    request.getfixturevalue(fixture)
    capture = train_light(tmp_path)

    # the units are ProfilerStep#N (ours on 2.7.1, torch_npu's own on 2.14), the label ours
    # (the warm-up unit 2 is not collected: collection starts with the window)
    assert trace_names(capture, "mstx") == ["ProfilerStep#3", "ProfilerStep#4", "stage:update"]
    assert trace_names(capture) == trace_names(capture, "mstx")  # no host operator at all
    assert ("range_start", "stage:update", "default") in mstx_calls()
    assert not os.path.exists(os.path.join(capture, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    capsys.readouterr()
    code, report = run_cli_json(capsys, "check", tmp_path / "prof")
    assert code == 0, report
    (run,) = report["ranks"][0]["runs"]
    assert run["settings"] == "level_none text" and run["steps"] == [3, 4]


def test_without_mstx_the_labels_stay_record_function_ranges(tmp_path, fake_npu):
    capture = train_light(tmp_path, profile_level="level0", profile_mstx=False,
                          profile_with_cpu=True)

    assert "stage:update" in trace_names(capture)
    assert trace_names(capture, "mstx") == []
    assert not any(call[1] == "stage:update" for call in mstx_calls())


def test_on_2_6_0_which_has_no_mstx_the_labels_stay_record_function_ranges(tmp_path,
                                                                         fake_npu_2_6):
    capture = train_light(tmp_path, profile_with_cpu=True)

    assert "stage:update" in trace_names(capture)  # a record_function range, with CPU activity
    assert not any(call[1] == "stage:update" for call in mstx_calls())


def test_a_light_capture_whose_ranges_were_filtered_out_is_incomplete(tmp_path, capsys, fake_npu):
    cfg_warning = ProfilerConfig(profile=True, profile_mstx=True,
                                 profile_mstx_domain_exclude=("default",)).warnings()
    assert any("mindspeed_prof's iteration, request, forward and stage ranges are in it" in w
               for w in cfg_warning)
    capture = train_light(tmp_path, profile_mstx_domain_exclude=("default",), profile_with_cpu=False)

    assert not os.path.exists(os.path.join(capture, "ASCEND_PROFILER_OUTPUT", "trace_view.json"))
    code, out, _ = run_cli(capsys, "check", tmp_path / "prof")
    assert code == 1
    assert "a level_none capture shows its units only as ProfilerStep#N ranges" in out
    assert "incomplete" in out


def test_the_mstx_domain_knobs_reach_torch_npus_experimental_config(tmp_path, fake_npu):
    capture = train_light(tmp_path, profile_mstx_domain_exclude=("communication", "comm2"))

    (info,) = glob.glob(os.path.join(capture, "profiler_info*.json"))
    with open(info) as handle:
        experimental = json.load(handle)["config"]["experimental_config"]
    assert sorted(experimental["_mstx_domain_exclude"]) == ["comm2", "communication"]
    assert experimental["_mstx"] is True


def test_light_requests_show_each_request_and_its_prefill_and_decode(tmp_path, capsys, fake_npu):
    driver = armed(request_config(tmp_path, **LIGHT), rank=0, world_size=1)
    serve(driver, 3, on_new_threads=True)
    driver.close()

    for n in (2, 3):
        (capture,) = glob.glob(str(tmp_path / "prof" / f"req_{n}-{n}" / "rank0_req*_ascend_pt"))
        assert trace_names(capture) == [f"ProfilerStep#{n}", "decode", "prefill"]
    capsys.readouterr()
    code, report = run_cli_json(capsys, "check", tmp_path / "prof")
    assert code == 0, report


def test_light_rl_steps_show_each_stage(tmp_path, capsys, fake_npu):
    config = {"profile": True, "profile_save_path": str(tmp_path / "prof"), **LIGHT,
              "roles": {"actor": {"profile_steps": "2"}}}
    with mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=2) as prof:
        for g in (1, 2):
            with prof.step(g):
                for stage in ("old_logprob", "update"):
                    with prof.stage(stage):
                        MODEL(torch.randn(2, 8)).sum().backward()

    (capture,) = glob.glob(str(tmp_path / "prof" / "actor" / "step_2-2" / "actor_rank0_*_ascend_pt"))
    assert trace_names(capture) == ["ProfilerStep#2", "stage:old_logprob", "stage:update"]


@pytest.mark.parametrize("flags, message", [
    (["--profile-mstx-domain-include", "a", "--profile-mstx-domain-exclude", "b"],
     "--profile-mstx-domain-include and --profile-mstx-domain-exclude are both set"),
    (["--profile-mstx-domain-include", ","], "--profile-mstx-domain-include names no domain"),
])
def test_bad_mstx_domain_flags_name_the_flag(capsys, flags, message):
    code, _, err = run_cli(capsys, "show-config", *flags)

    assert code == 2 and message in err


def test_show_config_shows_the_domains_in_the_torch_npu_call(capsys):
    code, out, _ = run_cli(capsys, "show-config", "--profile-level", "level_none", "--profile-mstx",
                           "--profile-mstx-domain-include", "default,communication",
                           "--profile-backend", "npu")

    assert code == 0
    assert "mstx_domain_include=['default', 'communication']" in out
