"""Megatron-LM 0.17-0.19's shapes (the stand-in's MEGATRON_STANDIN_VERSION=0.17.1/0.18.2/0.19.0):
the README's headline flags alone profile every rank as Megatron's own profiler would there,
while 0.16 keeps rank 0; typed ranks, refusals and the routes hold on every release.

These run on any megatron-core (the stand-in changes only megatron.training's shape); the tests
marked ``current_megatron`` need megatron-core >= 0.17 itself (the Python 3.12 leg,
scripts/test_current_megatron.sh). Those of a 0.17+ stand-in (``current_shapes``) run where
megatron-core >= 0.17 is installed: that leg runs this whole file over 0.19.2, and over 0.16.1
they would only repeat it (tests/conftest.py)."""

import os

import pytest

from harness.launch import ENTRY_SCRIPT, default_args
from helpers.autoload import needs_autoload_pth
from helpers.e2e import FAKES, check, env_for, train, verdicts
from helpers.traces import step_ids, torch_traces

pytestmark = pytest.mark.e2e

CURRENT = ("0.17.1", "0.18.2", "0.19.0")
SHAPES = pytest.mark.current_shapes
HEADLINE = ["--profile", "--profile-step-start", "3", "--profile-step-end", "5"]


def run_version(tmp_path, version, flags, nproc=2, **kwargs):
    save = tmp_path / "prof"
    env = kwargs.pop("env", None) or env_for(tmp_path, MEGATRON_STANDIN_VERSION=version)
    args = default_args(train_iters=6) + flags + ["--profile-save-path", str(save),
                                                  "--profile-backend", "torch"]
    return train(tmp_path, args, nproc=nproc, env=env, **kwargs), save


def ranks_traced(save):
    return sorted(int(os.path.basename(p).split(".")[0].removeprefix("rank"))
                  for p in torch_traces(save))


@SHAPES
@pytest.mark.parametrize("version", CURRENT)
def test_headline_flags_alone_profile_every_rank_at_steps_3_and_4(tmp_path, version):
    run, save = run_version(tmp_path, version, HEADLINE)
    run.check()
    assert ranks_traced(save) == [0, 1], run.describe()
    assert all(step_ids(path) == [3, 4] for path in torch_traces(save))
    assert all(run.report(r)["train_step_iterations"] == [1, 2, 3, 4, 5, 6] for r in (0, 1))
    assert "--profile-ranks not given: Megatron's own default [] applies" in run.stdout
    code, report = check(save)
    assert code == 0 and verdicts(report) == {0: "valid", 1: "valid"}


def test_headline_flags_alone_on_megatron_0_16_profile_rank_0_only(tmp_path):
    run, save = run_version(tmp_path, "0.16.1", HEADLINE)
    run.check()
    assert ranks_traced(save) == [0], run.describe()
    assert "--profile-ranks not given: Megatron's own default [0] applies" in run.stdout


@SHAPES
def test_typed_rank_1_on_megatron_0_19_profiles_rank_1_only(tmp_path):
    run, save = run_version(tmp_path, "0.19.0", HEADLINE + ["--profile-ranks", "1"])
    run.check()
    assert ranks_traced(save) == [1] and step_ids(torch_traces(save)[0]) == [3, 4]
    assert "not given" not in run.stdout


@SHAPES
def test_a_rank_list_written_empty_is_still_a_usage_error_on_megatron_0_19(tmp_path):
    # `--profile-ranks "$RANKS"` with RANKS unset
    run, save = run_version(tmp_path, "0.19.0", HEADLINE + ["--profile-ranks", ""], nproc=1)
    assert run.returncode != 0
    assert "--profile-ranks '' names no rank (an empty variable?)" in run.stderr
    assert all(report["train_step_iterations"] == [] for report in run.reports.values())
    assert not save.exists()


@SHAPES
def test_window_past_train_iters_is_refused_with_its_own_message_on_megatron_0_19(tmp_path):
    run, _ = run_version(tmp_path, "0.19.0", ["--profile", "--profile-step-start", "5",
                                             "--profile-step-end", "9"], nproc=1)
    assert run.returncode != 0
    assert ("--profile-step-end 9 needs iterations up to 8, but --train-iters stops training "
            "after iteration 6") in run.stderr
    assert "names no rank" not in run.stderr


@SHAPES
def test_use_pytorch_profiler_is_refused_with_its_own_message_on_megatron_0_19(tmp_path):
    run, save = run_version(tmp_path, "0.19.0", HEADLINE + [
        "--use-pytorch-profiler", "--tensorboard-dir", str(tmp_path / "tb")], nproc=1)
    assert run.returncode != 0
    assert "--use-pytorch-profiler starts Megatron's own torch.profiler" in run.stderr
    assert "names no rank" not in run.stderr
    assert not save.exists() and not (tmp_path / "torch_profile").exists()


@SHAPES
def test_pytorch_profiler_collect_shapes_is_taken_over_as_record_shapes(tmp_path):
    run, save = run_version(tmp_path, "0.19.0", HEADLINE + [
        "--profile-ranks", "0", "--pytorch-profiler-collect-shapes"], nproc=1)
    run.check()
    assert "--pytorch-profiler-collect-shapes is taken over as --profile-record-shapes" in run.stdout
    trace = torch_traces(save)[0]
    with open(trace) as handle:
        assert '"Input Dims"' in handle.read()


@SHAPES
def test_pytorch_profiler_collect_chakra_is_refused_with_the_fix(tmp_path):
    run, save = run_version(tmp_path, "0.19.0", HEADLINE + ["--pytorch-profiler-collect-chakra"],
                            nproc=1)
    assert run.returncode != 0
    assert "--pytorch-profiler-collect-chakra asks Megatron's torch.profiler for a Chakra" in run.stderr
    assert not save.exists()


@pytest.mark.parametrize("version", ["0.16.1", pytest.param("0.19.0", marks=SHAPES)])
def test_under_an_nsys_session_megatrons_own_profile_path_is_left_alone(tmp_path, version):
    env = env_for(tmp_path, MEGATRON_STANDIN_VERSION=version, NSYS_PROFILING_SESSION_ID="7")
    # A window after the last iteration: Megatron's nsys path never calls cudaProfilerStart on
    # the CPU, and mindspeed_prof, which would refuse this window, stays out of the way.
    run, save = run_version(tmp_path, version, ["--profile", "--profile-step-start", "8",
                                               "--profile-step-end", "9"], nproc=1, env=env)
    run.check()
    assert run.report(0)["profile"] is True  # Megatron's loop still sees --profile
    assert "an Nsight Systems session profiles this process" in run.stderr
    assert "mindspeed_prof records nothing in this run" in run.stderr
    assert "ran no loop mindspeed_prof hooks" not in run.stderr
    assert not save.exists()


@SHAPES
@pytest.mark.parametrize("version", CURRENT)
def test_one_import_line_route(tmp_path, version):
    script = tmp_path / "pretrain_gpt_profiled.py"
    script.write_text("import mindspeed_prof.auto  # profiling hooks\n" + ENTRY_SCRIPT.read_text())
    run, save = run_version(tmp_path, version, HEADLINE + ["--profile-ranks", "1"],
                            launcher=(), script=script)
    run.check()
    assert ranks_traced(save) == [1] and step_ids(torch_traces(save)[0]) == [3, 4]


@needs_autoload_pth
@SHAPES
@pytest.mark.parametrize("version", CURRENT)
def test_autoload_route_with_plain_torchrun(tmp_path, version):
    env = env_for(tmp_path, autoload=True, MEGATRON_STANDIN_VERSION=version)
    run, save = run_version(tmp_path, version, HEADLINE, launcher=(), env=env)
    run.check()
    assert ranks_traced(save) == [0, 1] and step_ids(torch_traces(save)[0]) == [3, 4]


@SHAPES
@pytest.mark.parametrize("version", CURRENT)
def test_mindspeed_feature_route(tmp_path, version):
    from harness.real_mindspeed import script_copy

    script = script_copy(str(tmp_path / "script"), str(ENTRY_SCRIPT),
                         ("import torch", "import mindspeed.megatron_adaptor  # noqa"))
    env = env_for(tmp_path, pythonpath=(FAKES,), MEGATRON_STANDIN_VERSION=version,
                  FAKE_MINDSPEED_LOG=tmp_path / "mindspeed.jsonl")
    run, save = run_version(tmp_path, version, HEADLINE + ["--profile-level", "level1"],
                            env=env, script=script)
    run.check()
    # MindSpeed's parser has Megatron's [] default: every rank, as Megatron's own would.
    assert ranks_traced(save) == [0, 1], run.describe()
    assert '"mindspeed_prof"' in (tmp_path / "mindspeed.jsonl").read_text()


@pytest.mark.current_megatron
def test_stand_in_0_19_trains_on_the_installed_megatron_core_0_17_or_newer(tmp_path):
    from importlib.metadata import version

    run, save = run_version(tmp_path, "0.19.0", HEADLINE)
    run.check()
    assert tuple(int(p) for p in version("megatron-core").split(".")[:2]) >= (0, 17)
    assert ranks_traced(save) == [0, 1]
