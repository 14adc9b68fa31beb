"""The torch_npu backend against the fake torch_npu of each mirrored wheel (2.6.0, 2.7.1, 2.14.0)."""

import csv
import functools
import glob
import json
import os
import sys

import pytest

from helpers import loop
from helpers.loop import train_one_step
from helpers.traces import manifest
from mindspeed_prof import ProfilerManager, profile
from mindspeed_prof.errors import BackendUnavailable, ConfigError

VERSIONS = ("2.6.0", "2.7.1", "2.14.0")
LAYOUT = {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1,
          "data_parallel_size": 1, "context_parallel_size": 1, "expert_model_parallel_size": 1,
          "sequence_parallel": False, "rank": 0, "world_size": 2}


@pytest.fixture
def fake_npu(monkeypatch):
    from fakes.loader import FAKES_DIR, ensure_on_path, load_fake_torch_npu, unload_fake_torch_npu

    # torchrun sets RANK; torch_npu names profiler_info_{RANK}.json after it
    monkeypatch.setenv("RANK", "0")

    def load(version, fail=None):
        if fail:
            monkeypatch.setenv("FAKE_TORCH_NPU_FAIL", fail)
        if fail == "import":  # the backend's own import is what must fail
            ensure_on_path()
            unload_fake_torch_npu()
            monkeypatch.setenv("FAKE_TORCH_NPU_VERSION", version)
            return None
        return load_fake_torch_npu(version)

    yield load
    analysis = sys.modules.get("torch_npu.profiler.analysis")
    if analysis is not None:
        analysis.wait_for_async_parses(timeout=60)
    unload_fake_torch_npu()
    while FAKES_DIR in sys.path:
        sys.path.remove(FAKES_DIR)
    os.environ.pop("FAKE_TORCH_NPU_VERSION", None)


config = functools.partial(loop.config, profile_backend="npu", profile_step_start=3,
                           profile_step_end=5)
run_loop = functools.partial(loop.run_loop, rank=0, world_size=2, parallel=LAYOUT)


def run_dirs(tmp_path):
    return glob.glob(str(tmp_path / "prof" / "rank0_*_ascend_pt"))


def kernel_step_ids(run_dir):
    with open(os.path.join(run_dir, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv")) as handle:
        return sorted({row["Step Id"] for row in csv.DictReader(handle)})


@pytest.mark.parametrize("version", VERSIONS)
def test_kernel_step_ids_equal_the_window_iterations(tmp_path, fake_npu, version):
    fake_npu(version)
    run_loop(config(tmp_path, profile_level="level1", profile_with_cpu=True))
    (run_dir,) = run_dirs(tmp_path)
    assert kernel_step_ids(run_dir) == ["3", "4"]
    assert glob.glob(os.path.join(run_dir, "profiler_info_0.json"))
    assert manifest(tmp_path / "prof", 0)["status"] == "complete"


@pytest.mark.parametrize("version", VERSIONS)
def test_distributed_args_reach_profiler_metadata(tmp_path, fake_npu, version):
    fake_npu(version)
    run_loop(config(tmp_path))
    with open(os.path.join(run_dirs(tmp_path)[0], "profiler_metadata.json")) as handle:
        assert json.load(handle)["distributed_args"] == LAYOUT


def test_keyword_the_installed_torch_npu_lacks_is_dropped_by_name(tmp_path, fake_npu):
    fake_npu("2.6.0")
    run_loop(config(tmp_path, profile_mstx=True))
    warnings = [w["message"] for w in manifest(tmp_path / "prof", 0)["warnings"]]
    assert "torch_npu 2.6.0 does not support --profile-mstx; it is ignored (upgrade torch_npu to use it)." in warnings
    assert run_dirs(tmp_path)


def test_old_torch_npu_forcing_aic_metrics_at_level1_is_announced(tmp_path, fake_npu):
    fake_npu("2.7.1")
    run_loop(config(tmp_path, profile_level="level1", profile_aic_metrics="AiCoreNone"))
    warnings = " ".join(w["message"] for w in manifest(tmp_path / "prof", 0)["warnings"])
    assert "upgrades --profile-aic-metrics AiCoreNone to PipeUtilization" in warnings


@pytest.mark.parametrize("version", VERSIONS)
def test_errors_torch_npu_only_prints_are_surfaced(tmp_path, fake_npu, version, capsys):
    fake_npu(version, fail="start")
    run_loop(config(tmp_path))  # training goes on: torch_npu swallowed the failure
    data = manifest(tmp_path / "prof", 0)
    assert data["status"] == "failed"
    assert any("Call start failed" in e["message"] for e in data["errors"])
    assert "rank 0] ERROR: start:" in capsys.readouterr().err


def test_parser_failure_in_sync_mode_is_recorded(tmp_path, fake_npu):
    fake_npu("2.14.0", fail="parse")
    run_loop(config(tmp_path, profile_level="level1"))
    data = manifest(tmp_path / "prof", 0)
    assert data["status"] == "failed"
    assert any(e["phase"] == "parse" for e in data["errors"])


def test_offline_mode_keeps_raw_data_unparsed(tmp_path, fake_npu):
    fake_npu("2.14.0")
    run_loop(config(tmp_path, profile_analyse="offline"))
    (run_dir,) = run_dirs(tmp_path)
    assert not os.path.isdir(os.path.join(run_dir, "ASCEND_PROFILER_OUTPUT"))
    assert manifest(tmp_path / "prof", 0)["status"] == "unparsed"


def test_async_mode_parses_off_the_training_thread(tmp_path, fake_npu):
    fake_npu("2.14.0")
    run_loop(config(tmp_path, profile_analyse="async", profile_with_cpu=True))
    sys.modules["torch_npu.profiler.analysis"].wait_for_async_parses(timeout=60)
    assert kernel_step_ids(run_dirs(tmp_path)[0]) == ["3", "4"]


def parse_in_a_process(monkeypatch):
    """Parse the way the real wheel does, in a forked process (the double uses a thread) that
    sleeps; returns the processes, and a call that ends them with SIGTERM, as a job-wide signal
    would."""
    import multiprocessing
    import signal
    import time

    from torch_npu.profiler.analysis._driver import NpuProfiler

    context = multiprocessing.get_context("fork")
    parses, ready = [], context.Event()

    def parse():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the handlers earlier tests left
        ready.set()
        time.sleep(60)

    def start(parser):
        process = context.Process(target=parse)
        process.start()
        parses.append(process)

    def kill():
        for process in parses:
            ready.wait(10)
            os.kill(process.pid, signal.SIGTERM)
            process.join(10)

    monkeypatch.setattr(NpuProfiler, "_start_async", staticmethod(start))
    return parses, kill


def test_an_async_parse_killed_with_the_job_leaves_the_window_unparsed_with_the_fix(
        tmp_path, fake_npu, monkeypatch):
    fake_npu("2.14.0")
    parses, kill = parse_in_a_process(monkeypatch)
    with profile(config(tmp_path, profile_analyse="async"), train_iters=6, rank=0, world_size=2,
                 parallel=LAYOUT) as prof:
        for iteration in range(1, 7):
            train_one_step()
            prof.step()
            if iteration == 5:  # the window 3-4 is saved; its parse dies with the job
                kill()
    (run_dir,) = run_dirs(tmp_path)
    data = manifest(tmp_path / "prof", 0)
    assert len(parses) == 1 and data["windows"][0]["status"] == "unparsed"
    errors = " ".join(e["message"] for e in data["errors"])
    assert f"parse process (pid {parses[0].pid}, --profile-analyse async) was killed by " \
           f"SIGTERM" in errors
    assert f"`mindspeed-prof analyse {run_dir}`" in errors


def test_an_async_parse_still_running_at_the_end_stays_parsing(tmp_path, fake_npu, monkeypatch):
    fake_npu("2.14.0")
    parses, _ = parse_in_a_process(monkeypatch)
    try:
        run_loop(config(tmp_path, profile_analyse="async"))
        data = manifest(tmp_path / "prof", 0)
        assert data["windows"][0]["status"] == "parsing" and data["errors"] == []
    finally:
        for process in parses:
            process.kill()
            process.join(10)


def test_cpu_activity_only_with_profile_with_cpu_and_its_absence_is_explained(tmp_path, fake_npu):
    fake_npu("2.7.1")
    run_loop(config(tmp_path, profile_with_cpu=False))  # on unless turned off, as here
    with open(glob.glob(os.path.join(run_dirs(tmp_path)[0], "profiler_info_*.json"))[0]) as handle:
        activities = json.load(handle)["config"]["common_config"]["activities"]
    assert activities == ["ProfilerActivity.NPU"]
    warnings = " ".join(w["message"] for w in manifest(tmp_path / "prof", 0)["warnings"])
    assert "without --profile-with-cpu torch_npu records no ProfilerStep markers" in warnings


def test_save_path_torch_npu_would_refuse_fails_at_start_up(tmp_path, fake_npu):
    fake_npu("2.7.1")
    manager = ProfilerManager(config(tmp_path, profile_save_path=str(tmp_path / "run:1")))
    with pytest.raises(ConfigError, match="--profile-save-path .*run:1 contains ':'"):
        manager.arm(train_iters=6)


def test_npu_backend_without_a_working_torch_npu_is_a_start_up_error(tmp_path, fake_npu):
    fake_npu("2.7.1", fail="import")
    with pytest.raises(BackendUnavailable, match="--profile-backend npu needs a working torch_npu.*libhccl"):
        ProfilerManager(config(tmp_path))


def test_auto_backend_picks_npu_when_torch_npu_works(tmp_path, fake_npu):
    fake_npu("2.14.0")
    manager = ProfilerManager(config(tmp_path, profile_backend="auto"))
    manager.close()
    assert manager.backend_name == "npu"
