"""The CPU harness behaves like Megatron-LM: real megatron-core training under torchrun, the
version's signatures, Megatron's own exit, skip, resume and profiler paths, and fault knobs.

Every training here is a torchrun subprocess (one Megatron per process); the module-scoped runs
are shared by the tests that only read them.
"""

import json
import pathlib
import subprocess
import sys

import pytest

TESTS_DIR = pathlib.Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from harness import launch  # noqa: E402
from harness.fixtures import run_launch_script  # noqa: E402,F401  (a fixture)

pytestmark = pytest.mark.e2e

VERSIONS = ("0.12.3", "0.13.1", "0.14.0", "0.15.3", "0.16.1")
OLDER_VERSIONS = VERSIONS[:-1]

S6 = "forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config"
T10 = (
    "forward_step_func, model, optimizer, opt_param_scheduler, train_data_iterator, "
    "valid_data_iterator, process_non_loss_data_func, config, checkpointing_context, "
    "non_loss_data_func"
)
P10 = (
    "train_valid_test_dataset_provider, model_provider, model_type, forward_step_func, "
    "process_non_loss_data_func=None, extra_args_provider=None, args_defaults={}, "
    "get_embedding_ranks=None, get_position_embedding_ranks=None, non_loss_data_func=None"
)
SIGNATURES = {
    "0.12.3": {"train_step": f"({S6})", "train": f"({T10})", "pretrain": f"({P10})"},
    "0.13.1": {"train_step": f"({S6})", "train": f"({T10})"},
    "0.14.0": {"train_step": f"({S6}, forward_backward_func)", "train": f"({T10})"},
    "0.15.3": {"train_step": f"({S6}, forward_backward_func)", "train": f"({T10})"},
    "0.16.1": {
        "train_step": f"({S6}, forward_backward_func, iteration=None)",
        "train": f"({T10}, inference_model=None)",
    },
}
for _version in VERSIONS[1:]:
    SIGNATURES[_version]["pretrain"] = f"({P10}, store=None, inprocess_call_wrapper=None)"


def _train(tmp_path, args=(), nproc=2, **env_overrides):
    env = launch.harness_env(tmp_path, **env_overrides)
    return launch.run_training(args, env=env, cwd=tmp_path, nproc=nproc)


@pytest.fixture(scope="module")
def dp_run(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("dp"), ["--train-iters", "6"]).check()


@pytest.fixture(scope="module")
def exit_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("exit")
    args = ["--train-iters", "6", "--exit-interval", "3",
            "--save", tmp_path / "ckpt", "--save-interval", "100"]
    return _train(tmp_path, args)


@pytest.fixture(scope="module")
def introspection(tmp_path_factory):
    env = launch.harness_env(tmp_path_factory.mktemp("introspect"))
    done = subprocess.run(
        [sys.executable, str(launch.HARNESS_DIR / "introspect.py"), *VERSIONS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_two_rank_data_parallel_run_reports_losses_for_iterations_one_to_six(dp_run):
    for rank in (0, 1):
        report = dp_run.report(rank)
        assert (report["world_size"], report["dp"], report["version"]) == (2, 2, "0.16.1")
        assert sorted(dp_run.losses(rank)) == [1, 2, 3, 4, 5, 6]
        assert report["train_step_iterations"] == [1, 2, 3, 4, 5, 6]
        assert report["end"] == {"how": "returned"}


def test_data_parallel_ranks_agree_on_the_reduced_loss(dp_run):
    assert dp_run.losses(0) == dp_run.losses(1)


def test_identical_runs_give_bit_identical_losses(dp_run, tmp_path):
    again = _train(tmp_path, ["--train-iters", "6"]).check()
    assert again.losses(1) == dp_run.losses(1)


def test_tensor_parallel_run_on_two_ranks_completes(tmp_path):
    run = _train(tmp_path, ["--train-iters", "3", "--tensor-model-parallel-size", "2"]).check()
    assert run.report(0)["tp"] == 2 and run.report(0)["dp"] == 1
    assert sorted(run.losses(0)) == [1, 2, 3] and run.losses(0) == run.losses(1)


def test_pipeline_parallel_run_reports_losses_only_on_the_last_stage(tmp_path):
    run = _train(tmp_path, ["--train-iters", "3", "--pipeline-model-parallel-size", "2"]).check()
    assert run.report(0)["pp"] == 2
    assert run.losses(0) == {}
    assert sorted(run.losses(1)) == [1, 2, 3]
    assert run.report(0)["train_step_iterations"] == [1, 2, 3]


@pytest.mark.parametrize("version", OLDER_VERSIONS)
def test_older_megatron_versions_train_through_their_own_train_step(version, tmp_path):
    run = _train(tmp_path, ["--train-iters", "2"], nproc=1,
                 MEGATRON_STANDIN_VERSION=version).check()
    assert run.report(0)["version"] == version
    assert run.report(0)["train_step_iterations"] == [1, 2]
    assert sorted(run.losses(0)) == [1, 2]


@pytest.mark.parametrize("version", VERSIONS)
def test_train_step_train_and_pretrain_signatures_match_the_version_table(version, introspection):
    assert introspection["signatures"][version] == SIGNATURES[version]


def test_stand_in_keeps_megatrons_module_lookups(introspection):
    facts = introspection["lookups"]
    assert facts["megatron_is_namespace_package"]
    assert pathlib.Path(facts["training_dir"]).is_relative_to(launch.STANDIN_DIR)
    assert not pathlib.Path(facts["core_dir"]).is_relative_to(launch.STANDIN_DIR)
    assert facts["initialize_imports_parse_args_by_name"]
    assert facts["initialize_imports_validate_args_by_name"]
    assert facts["package_reexports_pretrain"]


def test_profile_flags_have_megatrons_names_and_defaults_and_cannot_be_re_added(introspection):
    flags = introspection["profile_flags"]
    conflict = "argument --profile: conflicting option string: --profile"
    assert flags.pop("re_adding_profile") == conflict
    assert flags == {
        "profile": False,
        "profile_step_start": 10,
        "profile_step_end": 12,
        "profile_ranks": [0],
        "use_pytorch_profiler": False,
        "record_memory_history": False,
        "memory_snapshot_path": "snapshot.pickle",
        "iterations_to_skip": [],
    }


def test_cpu_shim_maps_accelerator_devices_to_cpu_without_faking_cuda(introspection):
    assert introspection["shim"] == {
        "zeros_on_cuda": "cpu",
        "zeros_on_npu": "cpu",
        "zeros_on_current_device": "cpu",
        "dot_cuda": "cpu",
        "to_cuda_1": "cpu",
        "float_type": "torch.cuda.FloatTensor",
        "current_device": 0,
        "is_available": False,
        "event_elapsed_ms_non_negative": True,
        "reinstall_adds_no_mode": True,
    }


def test_exit_interval_ends_the_run_with_sys_exit_inside_train(exit_run):
    assert exit_run.returncode == 0, exit_run.describe()
    for rank in (0, 1):
        report = exit_run.report(rank)
        assert report["end"] == {"how": "sys_exit", "code": 0}
        assert report["sys_exit_in_train"] == {"code": 0, "iteration": 3}
        assert report["train_step_iterations"] == [1, 2, 3]


def test_resumed_run_starts_at_the_saved_iteration_and_continues_bit_identically(
        exit_run, dp_run, tmp_path):
    checkpoint = pathlib.Path(exit_run.command[exit_run.command.index("--save") + 1])
    assert (checkpoint / "latest_checkpointed_iteration.txt").read_text() == "3"
    resumed = _train(tmp_path, ["--train-iters", "6", "--load", checkpoint]).check()
    assert resumed.report(0)["start_iteration"] == 3
    assert resumed.report(0)["train_step_iterations"] == [4, 5, 6]
    assert resumed.losses(1) == {k: v for k, v in dp_run.losses(1).items() if k > 3}


def test_iterations_to_skip_bypasses_train_step_for_the_next_logged_iteration(tmp_path):
    # Upstream tests the 0-based loop counter, so value 1 skips logged iteration 2.
    run = _train(tmp_path, ["--train-iters", "4", "--iterations-to-skip", "1"], nproc=1).check()
    report = run.report(0)
    assert report["train_step_iterations"] == [1, 3, 4]
    assert report["skipped_iterations"] == [2]
    assert sorted(run.losses(0)) == [1, 3, 4]


def test_megatron_pytorch_profiler_writes_its_trace_to_tensorboard_dir(tmp_path):
    tensorboard_dir = tmp_path / "tb"
    profile = ["--profile", "--use-pytorch-profiler", "--profile-step-start", "2",
               "--profile-step-end", "3", "--tensorboard-dir", tensorboard_dir]
    run = _train(tmp_path, ["--train-iters", "3", *profile], nproc=1).check()
    assert run.report(0)["megatron_torch_profiler"] is True
    traces = list(tensorboard_dir.glob("*.pt.trace.json"))
    assert len(traces) == 1, run.describe()
    names = {event.get("name") for event in json.loads(traces[0].read_text())["traceEvents"]}
    # Megatron's schedule records [start, end): logged iteration 2 only.
    steps = {name for name in names if name and name.startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2"}


def test_megatron_nsys_profile_path_fails_without_a_gpu_as_upstream_does(tmp_path):
    profile = ["--profile", "--profile-step-start", "1", "--profile-step-end", "2"]
    run = _train(tmp_path, ["--train-iters", "2", *profile], nproc=1)
    assert run.returncode != 0
    end = run.report(0)["end"]
    assert end["how"] == "exception"
    assert end["repr"] == "AssertionError('Torch not compiled with CUDA enabled')"
    assert run.report(0)["train_step_iterations"] == [1]


def test_injected_exception_exits_non_zero_and_is_recorded(tmp_path):
    run = _train(tmp_path, ["--train-iters", "3"], nproc=1, HARNESS_RAISE_AT_ITER=2)
    assert run.returncode != 0
    report = run.report(0)
    assert report["end"]["how"] == "exception" and report["end"]["type"] == "RuntimeError"
    assert "HARNESS_RAISE_AT_ITER" in report["end"]["repr"]
    assert report["train_step_iterations"] == [1, 2] and sorted(run.losses(0)) == [1]


def test_injected_sigterm_kills_the_rank_and_the_report_says_so(tmp_path):
    run = _train(tmp_path, ["--train-iters", "3"], nproc=1, HARNESS_SIGNAL_AT_ITER=2)
    assert run.returncode != 0
    assert run.report(0)["end"] == {"how": "signal", "signal": "SIGTERM"}


def test_exit_signal_handler_turns_sigterm_on_one_rank_into_a_clean_exit_of_all(tmp_path):
    run = _train(
        tmp_path,
        ["--train-iters", "4", "--exit-signal-handler"],
        HARNESS_SIGNAL_AT_ITER=2,
        HARNESS_FAULT_RANKS="1",
    )
    assert run.returncode == 0, run.describe()
    for rank in (0, 1):
        assert run.report(rank)["sys_exit_in_train"] == {"code": 0, "iteration": 2}


def test_launch_script_trains_and_forwards_extra_flags(run_launch_script):
    run = run_launch_script(["--exit-interval", "1"], nproc=1, TRAIN_ITERS=3).check()
    assert run.report(0)["sys_exit_in_train"] == {"code": 0, "iteration": 1}
    assert run.report(0)["train_iters"] == 3
