"""The CPU harness behaves like Megatron-LM: real megatron-core training under torchrun, the
version's signatures, Megatron's own exit, skip, resume and profiler paths, and fault knobs.

Every training here is a torchrun subprocess (one Megatron per process); the module-scoped runs
are shared by the tests that only read them.
"""

import gzip
import json
import os
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

from harness.launch import standin_default_version  # noqa: E402

VERSIONS = ("0.12.3", "0.13.1", "0.14.0", "0.15.3", "0.16.1", "0.17.1", "0.18.2", "0.19.0")
# The version a run emulates when none is asked for: the newest not newer than the installed
# megatron-core (0.16.1 on the Python 3.11 leg, 0.19.0 on the 3.12 leg with core 0.19.2).
DEFAULT_VERSION = standin_default_version()
OTHER_VERSIONS = tuple(v for v in VERSIONS if v != DEFAULT_VERSION)

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
for _version in VERSIONS[1:5]:  # 0.13.1-0.16.1
    SIGNATURES[_version]["pretrain"] = f"({P10}, store=None, inprocess_call_wrapper=None)"
SIGNATURES["0.17.1"] = dict(SIGNATURES["0.16.1"])
P18 = ("process_non_loss_data_func=None, get_embedding_ranks=None, "
       "get_position_embedding_ranks=None, non_loss_data_func=None, store=None, "
       "inprocess_call_wrapper=None")
SIGNATURES["0.18.2"] = dict(SIGNATURES["0.16.1"], pretrain=(
    f"(cfg_container, train_valid_test_dataset_provider, model_provider, model_type, "
    f"forward_step_func, {P18})"))
SIGNATURES["0.19.0"] = {
    "train_step": f"({S6}, forward_backward_func, iteration=None, pg_collection=None, "
                  f"p2p_communicator=None)",
    "train": f"({T10}, inference_model=None, p2p_communicator=None, pg_collection=None)",
    "pretrain": (f"(cfg_container, train_valid_test_dataset_provider, model_type, "
                 f"forward_step_func, model_provider=None, {P18}, p2p_communicator=None, "
                 f"pg_collection=None, skip_model_parallel_init=False)"),
}


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
        assert (report["world_size"], report["dp"], report["version"]) == (2, 2, DEFAULT_VERSION)
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


def test_a_job_past_its_timeout_is_killed_whole_and_what_it_printed_is_kept(tmp_path):
    # torchrun starts each rank in a session of its own: killing torchrun's group alone left
    # the ranks training on, orphaned, and the harness waiting on their pipes for ever
    env = launch.harness_env(tmp_path, HARNESS_SLEEP_AT_ITER="2:120")
    run = launch.run_training(["--train-iters", "4"], env=env, timeout=25)
    assert run.timed_out and run.returncode is None
    assert run.duration_s < 60, run.duration_s
    assert "iteration" in run.stdout + run.stderr  # what the ranks printed before it
    assert _processes_with_env(f"HARNESS_REPORT_DIR={env['HARNESS_REPORT_DIR']}") == []


def _processes_with_env(entry):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if entry.encode() in handle.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_pipeline_parallel_run_reports_losses_only_on_the_last_stage(tmp_path):
    run = _train(tmp_path, ["--train-iters", "3", "--pipeline-model-parallel-size", "2"]).check()
    assert run.report(0)["pp"] == 2
    assert run.losses(0) == {}
    assert sorted(run.losses(1)) == [1, 2, 3]
    assert run.report(0)["train_step_iterations"] == [1, 2, 3]


@pytest.mark.parametrize("version", OTHER_VERSIONS)
def test_other_megatron_versions_train_through_their_own_train_step(version, tmp_path):
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


MEGATRON_PROFILE_FLAGS = {
    "profile": False,
    "profile_step_start": 10,
    "profile_step_end": 12,
    "profile_ranks": [0],
    "use_pytorch_profiler": False,
    "record_memory_history": False,
    "memory_snapshot_path": "snapshot.pickle",
    "iterations_to_skip": [],
}
# 0.17+ build them from ProfilingConfig: [] (every rank) and the torch profiler's options.
MEGATRON_0_17_PROFILE_FLAGS = dict(
    MEGATRON_PROFILE_FLAGS, profile_ranks=[], pytorch_profiler_collect_shapes=False,
    pytorch_profiler_collect_callstack=False, pytorch_profiler_collect_chakra=False,
    record_shapes=False, nvtx_ranges=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_profile_flags_have_megatrons_names_and_defaults_and_cannot_be_re_added(
        version, introspection):
    flags = dict(introspection["profile_flags"][version])
    conflict = "argument --profile: conflicting option string: --profile"
    assert flags.pop("re_adding_profile") == conflict
    current = tuple(int(p) for p in version.split(".")[:2]) >= (0, 17)
    assert flags == (MEGATRON_0_17_PROFILE_FLAGS if current else MEGATRON_PROFILE_FLAGS)


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
        "accelerator_device_index": 0,
        "accelerator_stream_capturing": False,
        "cuda_stream_capturing": False,
        "pin_memory_stays_on_cpu": "cpu",
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
    run = _train(tmp_path, ["--train-iters", "3", *profile], nproc=1,
                 MEGATRON_STANDIN_VERSION="0.16.1").check()
    assert run.report(0)["megatron_torch_profiler"] is True
    traces = list(tensorboard_dir.glob("*.pt.trace.json"))
    assert len(traces) == 1, run.describe()
    # Megatron's schedule records [start, end): logged iteration 2 only.
    assert _profiler_steps(traces[0].read_text()) == {"ProfilerStep#2"}


def test_megatron_0_19_pytorch_profiler_writes_rank_traces_beside_tensorboard_dir(tmp_path):
    # 0.17+: {tensorboard_dir}/../torch_profile/rank-R.json.gz, on every rank (default []).
    profile = ["--profile", "--use-pytorch-profiler", "--profile-step-start", "2",
               "--profile-step-end", "3", "--tensorboard-dir", tmp_path / "tb",
               "--pytorch-profiler-collect-shapes"]
    run = _train(tmp_path, ["--train-iters", "3", *profile],
                 MEGATRON_STANDIN_VERSION="0.19.0").check()
    for rank in (0, 1):
        assert run.report(rank)["megatron_torch_profiler"] is True
        text = gzip.decompress((tmp_path / "torch_profile" / f"rank-{rank}.json.gz").read_bytes())
        assert _profiler_steps(text.decode()) == {"ProfilerStep#2"}
        assert '"Input Dims"' in text.decode()


def _profiler_steps(text):
    names = {event.get("name") for event in json.loads(text)["traceEvents"]}
    return {name for name in names if name and name.startswith("ProfilerStep#")}


def test_megatron_nsys_profile_path_fails_without_a_gpu_as_upstream_does(tmp_path):
    profile = ["--profile", "--profile-step-start", "1", "--profile-step-end", "2"]
    run = _train(tmp_path, ["--train-iters", "2", *profile], nproc=1)
    assert run.returncode != 0
    end = run.report(0)["end"]
    assert end["how"] == "exception"
    import torch

    # A CPU build of torch (the 3.11 leg) has no CUDA at all; a CUDA build (3.12: only that one
    # installs) finds no driver.
    expected = ("AssertionError('Torch not compiled with CUDA enabled')"
                if torch.version.cuda is None else "RuntimeError('Found no NVIDIA driver")
    assert end["repr"].startswith(expected)
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
