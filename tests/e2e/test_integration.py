"""The whole chain on CPU: torchrun -> mindspeed_prof.launch -> stand-in Megatron loop with real
megatron-core -> torch.profiler traces on disk for the chosen ranks and iterations only."""

import os
import sys

import pytest

from harness.launch import ENTRY_SCRIPT, default_args
from helpers.autoload import needs_autoload_pth
from helpers.e2e import env_for, profile_flags, tracebacks_from_training, train
from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.e2e


def traces_by_rank(directory):
    found = {}
    for path in torch_traces(directory):
        rank = int(os.path.basename(path).split(".")[0].removeprefix("rank"))
        found.setdefault(rank, []).append(path)
    return found


def test_launcher_profiles_rank_1_at_iterations_3_and_4_only(tmp_path):
    save = tmp_path / "prof"
    run = train(tmp_path, profile_flags(save)).check()
    traces = traces_by_rank(save)
    assert list(traces) == [1], run.describe()
    assert step_ids(traces[1][0]) == [3, 4]
    data = manifest(save, 1)
    assert data["status"] == "complete" and data["windows"][0]["iterations_recorded"] == [3, 4]
    assert data["parallel"]["data_parallel_size"] == 2
    assert not (save / "profile_manifest_rank0.json").exists()
    # the host's own profiling was switched off, training ran every iteration
    assert run.report(1)["profile"] is False
    assert run.report(0)["train_step_iterations"] == [1, 2, 3, 4, 5, 6]


def test_every_rank_with_minus_one_under_tensor_parallelism(tmp_path):
    save = tmp_path / "prof"
    args = default_args(tp=2) + profile_flags(save, ranks=("-1",), start=2, end=4)
    run = train(tmp_path, args).check()
    traces = traces_by_rank(save)
    assert sorted(traces) == [0, 1], run.describe()
    assert all(step_ids(paths[0]) == [2, 3] for paths in traces.values())
    assert manifest(save, 0)["parallel"]["tensor_model_parallel_size"] == 2


def test_pipeline_parallel_last_stage_selector_profiles_the_last_stage(tmp_path):
    save = tmp_path / "prof"
    args = default_args(pp=2) + profile_flags(save, ranks=("last-pp-stage",))
    run = train(tmp_path, args).check()
    assert list(traces_by_rank(save)) == [1], run.describe()
    assert manifest(save, 1)["selected_ranks"] == [1]


def test_resumed_run_profiles_the_logged_iterations(tmp_path):
    checkpoint = tmp_path / "ckpt"
    first = default_args(train_iters=4) + ["--save", str(checkpoint), "--save-interval", "4"]
    train(tmp_path / "first", first, launcher=(), nproc=1).check()
    save = tmp_path / "prof"
    resumed = default_args(train_iters=8) + ["--load", str(checkpoint)] + profile_flags(
        save, ranks=("0",), start=6, end=8)
    run = train(tmp_path / "second", resumed, nproc=1).check()
    assert run.report(0)["start_iteration"] == 4
    assert step_ids(traces_by_rank(save)[0][0]) == [6, 7]
    assert manifest(save, 0)["first_iteration"] == 5


def test_window_that_cannot_complete_stops_the_job_before_any_step(tmp_path):
    args = default_args(train_iters=4) + profile_flags(tmp_path / "prof", start=3, end=8)
    run = train(tmp_path, args)
    assert run.returncode != 0
    assert "--profile-step-end 8 needs iterations up to 7, but --train-iters stops training after iteration 4" in run.stderr
    assert all(report["train_step_iterations"] == [] for report in run.reports.values())
    assert tracebacks_from_training(run) == []
    assert "ran no loop mindspeed_prof hooks" not in run.stderr


def test_megatron_pytorch_profiler_together_with_ours_is_a_startup_error(tmp_path):
    args = profile_flags(tmp_path / "prof") + ["--use-pytorch-profiler", "--tensorboard-dir",
                                               str(tmp_path / "tb")]
    run = train(tmp_path, args)
    assert run.returncode != 0
    assert "--use-pytorch-profiler starts Megatron's own torch.profiler" in run.stderr
    assert not (tmp_path / "prof").exists()


def test_iterations_megatron_skips_do_not_shift_the_window(tmp_path):
    save = tmp_path / "prof"
    args = profile_flags(save, ranks=("0",), start=3, end=6) + ["--iterations-to-skip", "3"]
    run = train(tmp_path, args, nproc=1).check()
    # Megatron compares the 0-based loop counter: 3 skips logged iteration 4
    assert run.report(0)["skipped_iterations"] == [4]
    assert manifest(save, 0)["windows"][0]["iterations_recorded"] == [3, 5]
    assert set(step_ids(traces_by_rank(save)[0][0])) >= {3, 5}


@pytest.mark.parametrize("version", ["0.12.3", "0.13.1", "0.14.0", "0.15.3"])
def test_each_megatron_signature_is_hooked(tmp_path, version):
    save = tmp_path / "prof"
    env = env_for(tmp_path, MEGATRON_STANDIN_VERSION=version)
    args = default_args(train_iters=4) + profile_flags(save, ranks=("0",), start=2, end=4)
    run = train(tmp_path, args, nproc=1, env=env).check()
    assert run.report(0)["version"] == version
    assert step_ids(traces_by_rank(save)[0][0]) == [2, 3]


def test_one_import_line_in_a_copied_entry_script(tmp_path):
    script = tmp_path / "pretrain_gpt_profiled.py"
    source = ENTRY_SCRIPT.read_text()
    script.write_text("import mindspeed_prof.auto  # profiling hooks\n" + source)
    save = tmp_path / "prof"
    run = train(tmp_path, profile_flags(save), launcher=(), script=script).check()
    assert step_ids(traces_by_rank(save)[1][0]) == [3, 4], run.describe()


@needs_autoload_pth
def test_autoload_profiles_an_unchanged_script_with_plain_torchrun(tmp_path):
    save = tmp_path / "prof"
    run = train(tmp_path, profile_flags(save), launcher=(), env=env_for(tmp_path, autoload=True))
    run.check()
    assert step_ids(traces_by_rank(save)[1][0]) == [3, 4]


def test_profile_flag_without_a_hooked_loop_says_so_at_exit(tmp_path):
    import subprocess
    plain = tmp_path / "plain.py"
    plain.write_text("print('training without Megatron')\n")
    result = subprocess.run([sys.executable, "-m", "mindspeed_prof.launch", str(plain), "--profile"],
                            capture_output=True, text=True, cwd=tmp_path,
                            env=env_for(tmp_path))
    assert result.returncode == 0
    assert "plain.py ran no loop mindspeed_prof hooks, so nothing was profiled: it never " \
           "imported megatron.training." in result.stderr
    assert "mindspeed_prof.launch`" not in result.stderr  # it ran under the launcher already


def test_launcher_refuses_a_missing_script(tmp_path):
    import subprocess
    result = subprocess.run([sys.executable, "-m", "mindspeed_prof.launch", "nope.py", "--profile"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and "training script 'nope.py' not found" in result.stderr


def test_npu_backend_under_torchrun_writes_torch_npu_layout_for_the_chosen_rank(tmp_path):
    import csv
    import glob
    import json
    import subprocess

    from helpers.e2e import FAKES
    save = tmp_path / "prof"
    env = env_for(tmp_path, pythonpath=(FAKES,), FAKE_TORCH_NPU_VERSION="2.14.0")
    args = profile_flags(save)[:-2] + ["--profile-backend", "npu", "--profile-level", "level1",
                                       "--profile-with-cpu", "--profile-analyse", "sync"]
    run = train(tmp_path, args, env=env).check()
    (run_dir,) = glob.glob(str(save / "rank1_*_ascend_pt"))
    assert os.path.exists(os.path.join(run_dir, "profiler_info_1.json")), run.describe()
    with open(os.path.join(run_dir, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv")) as handle:
        assert sorted({row["Step Id"] for row in csv.DictReader(handle)}) == ["3", "4"]
    with open(os.path.join(run_dir, "profiler_metadata.json")) as handle:
        assert json.load(handle)["distributed_args"]["world_size"] == 2
    check = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "check", str(save)],
                           capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
