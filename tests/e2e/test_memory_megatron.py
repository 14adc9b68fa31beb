"""Memory history, light mode's refusals and torch_npu's armed profilers on Megatron's loop (the
CPU stand-in, real megatron-core), with the torch_npu double as the NPU: Megatron's own
--record-memory-history is honoured through ours, an out-of-memory in a training step leaves a
snapshot and the original error, and what cannot work stops the job at start-up (exit 2)."""

import os

import pytest

from helpers.e2e import check, env_for, profile_flags, train, worker_exit_codes
from helpers.traces import manifest
from mindspeed_prof.output.read.snapshot import load_snapshot

pytestmark = pytest.mark.e2e

FAKES = os.path.join(os.path.dirname(__file__), "..", "fakes")


def npu_flags(save, *extra):
    flags = profile_flags(save, ("0",), 3, 5, "--profile-with-cpu", *extra)
    flags[flags.index("--profile-backend") + 1] = "npu"
    return flags


def test_megatrons_record_memory_history_is_recorded_by_mindspeed_prof(tmp_path):
    save = tmp_path / "prof"
    env = env_for(tmp_path, pythonpath=[FAKES], HARNESS_NPU_ALLOC_MB="4")
    run = train(tmp_path, npu_flags(save, "--record-memory-history"), nproc=1, env=env).check()

    assert "--record-memory-history is recorded by mindspeed_prof (one recorder per process)" \
        in run.stdout
    config = manifest(save, 0)["config"]
    assert config["profile_memory_snapshot"] and config["profile_memory_oom"]
    assert config["profile_memory_max_entries"] == 100000  # Megatron's own bound
    snapshot = load_snapshot(str(save / "memory_snapshot_rank0.pickle"))
    sizes = [e["size"] for e in snapshot.device_traces[0] if e["action"] == "alloc"]
    assert sizes.count(4 << 20) == 4  # iterations 1-4: recorded from start-up to the window end
    code, report = check(save)
    assert code == 0, report


def test_an_out_of_memory_in_a_step_leaves_a_snapshot_and_the_same_error(tmp_path):
    save = tmp_path / "prof"
    env = env_for(tmp_path, pythonpath=[FAKES], HARNESS_NPU_ALLOC_MB="4",
                  HARNESS_NPU_OOM_AT_ITER="4")
    run = train(tmp_path, npu_flags(save, "--profile-memory-oom"), nproc=1, env=env)

    assert run.returncode != 0
    assert run.report(0)["end"]["type"] == "OutOfMemoryError"
    assert "torch.OutOfMemoryError: NPU out of memory. Tried to allocate" in run.stderr
    oom = load_snapshot(str(save / "memory_oom_rank0.pickle"))
    assert oom.device_traces[0][-1]["action"] == "oom"
    (entry,) = manifest(save, 0)["memory_oom"]
    assert entry["snapshot"] == "memory_oom_rank0.pickle"
    code, report = check(save)
    rank = report["ranks"][0]
    assert any("rank 0 ran out of memory on npu:0" in w for w in rank["warnings"]), rank


@pytest.mark.parametrize("extra_env, flags, message", [
    ({"PROF_CONFIG_PATH": "{tmp}/dp"}, (), "PROF_CONFIG_PATH={tmp}/dp arms torch_npu's dynamic "
                                           "profiling"),
    ({"MSMONITOR_USE_DAEMON": "1"}, (), "MSMONITOR_USE_DAEMON=1 arms torch_npu's msMonitor"),
], ids=["dynamic profiling", "msmonitor daemon"])
def test_torch_npus_armed_profilers_stop_the_job_at_start_up(tmp_path, extra_env, flags, message):
    env = env_for(tmp_path, pythonpath=[FAKES],
                  **{k: v.format(tmp=tmp_path) for k, v in extra_env.items()})
    run = train(tmp_path, npu_flags(tmp_path / "prof", *flags), nproc=1, env=env)

    assert 2 in worker_exit_codes(run).values() or run.returncode == 2, run.describe()
    assert message.format(tmp=tmp_path) in run.stderr
    assert run.report(0)["train_step_iterations"] == []


def test_memory_history_on_a_host_without_npu_or_gpu_stops_the_job_at_start_up(tmp_path):
    run = train(tmp_path, profile_flags(tmp_path / "prof", ("0",), 3, 5,
                                        "--record-memory-history"), nproc=1)

    assert 2 in worker_exit_codes(run).values() or run.returncode == 2, run.describe()
    assert ("--profile-memory-snapshot and --profile-memory-oom record the caching allocator of "
            "an NPU or a GPU, and this host has neither") in run.stderr
    assert run.report(0)["train_step_iterations"] == []
