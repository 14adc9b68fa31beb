import functools
import os
import time

import pytest
import torch

from helpers import loop
from helpers.loop import run_loop, train_one_step
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import ProfilerManager, profile
from mindspeed_prof.errors import ConfigError

# async, ProfilerConfig's default: the manager's tests see the export a user gets unasked
config = functools.partial(loop.config, profile_step_start=3, profile_step_end=5,
                           profile_analyse="async")


def test_trace_step_ids_equal_the_window_iterations(tmp_path):
    run_loop(config(tmp_path))
    traces = torch_traces(tmp_path / "prof")
    assert len(traces) == 1 and step_ids(traces[0]) == [3, 4]
    assert os.path.basename(traces[0]).startswith("rank0.")


def test_resumed_loop_profiles_from_start_not_zero(tmp_path):
    run_loop(config(tmp_path, profile_step_start=103, profile_step_end=105), first=101)
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [103, 104]


def test_rank_not_selected_writes_nothing(tmp_path):
    run_loop(config(tmp_path, profile_ranks=(1,)), rank=0, world_size=2)
    assert not os.path.exists(tmp_path / "prof") or os.listdir(tmp_path / "prof") == []


def test_selected_rank_writes_its_own_trace_and_manifest(tmp_path):
    run_loop(config(tmp_path, profile_ranks=(1,)), rank=1, world_size=2)
    data = manifest(tmp_path / "prof", 1)
    assert data["status"] == "complete" and data["selected_ranks"] == [1]
    assert data["windows"][0]["iterations_recorded"] == [3, 4]
    assert data["files"] == [os.path.basename(torch_traces(tmp_path / "prof")[0])]


def test_profiling_off_creates_no_profiler_and_no_files(tmp_path):
    run_loop(config(tmp_path, profile=False))
    assert not os.path.exists(tmp_path / "prof")


def test_sync_export_is_written_before_the_next_step(tmp_path):
    cfg = config(tmp_path, profile_analyse="sync")
    with profile(cfg, train_iters=6) as prof:
        for iteration in range(1, 7):
            train_one_step()
            prof.step()
            if iteration == 4:
                assert step_ids(torch_traces(tmp_path / "prof")[0]) == [3, 4]


def test_unwritable_save_path_fails_before_the_first_step(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    manager = ProfilerManager(config(tmp_path, profile_save_path=str(blocker / "prof")))
    with pytest.raises(ConfigError, match="--profile-save-path .* is not writable on rank 0"):
        manager.arm(train_iters=6)


def test_window_that_cannot_complete_fails_at_arm_on_every_rank(tmp_path):
    manager = ProfilerManager(config(tmp_path, profile_ranks=(1,)), rank=0, world_size=2)
    with pytest.raises(ConfigError, match="--profile-step-end 5"):
        manager.arm(train_iters=3)


def test_exception_inside_the_window_flushes_and_records_how_training_ended(tmp_path):
    with pytest.raises(RuntimeError, match="boom at 4"):
        run_loop(config(tmp_path, profile_step_end=6), fail_at=4)
    # iteration 4 began (its marker is in the trace) but never completed
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [3, 4]
    data = manifest(tmp_path / "prof", 0)
    assert data["exit"] == {"reason": "exception", "detail": "RuntimeError: boom at 4"}
    assert data["windows"][0]["iterations_recorded"] == [3]


@pytest.mark.parametrize("fail_at", [1, 2], ids=["before-warmup", "during-warmup"])
def test_training_ending_before_the_window_is_recorded_as_incomplete(tmp_path, fail_at):
    with pytest.raises(RuntimeError):
        run_loop(config(tmp_path), fail_at=fail_at)
    data = manifest(tmp_path / "prof", 0)
    assert data["status"] == "incomplete" and data["files"] == []
    assert any("nothing was profiled" in w["message"] for w in data["warnings"])


def test_profiler_failure_is_reported_and_training_continues(tmp_path, monkeypatch, capsys):
    def broken_start(self):
        raise RuntimeError("Profiler is already enabled on this thread")

    monkeypatch.setattr(torch.profiler.profile, "start", broken_start)
    run_loop(config(tmp_path))  # no exception reaches the loop
    data = manifest(tmp_path / "prof", 0)
    assert data["status"] == "failed"
    assert "Profiler is already enabled" in data["errors"][0]["message"]
    assert "rank 0] ERROR: start: RuntimeError" in capsys.readouterr().err


def test_export_failure_is_reported_with_the_fix(tmp_path, monkeypatch):
    def full_disk(self, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", full_disk)
    run_loop(config(tmp_path))
    data = manifest(tmp_path / "prof", 0)
    assert data["status"] == "failed"
    assert "check free space" in data["errors"][0]["message"]


def test_iterations_the_loop_skips_do_not_shift_the_window(tmp_path):
    cfg = config(tmp_path, profile_step_start=3, profile_step_end=6)
    manager = ProfilerManager(cfg)
    manager.arm(train_iters=8)
    for iteration in range(1, 9):
        if iteration in (2, 4):
            continue  # Megatron's --iterations-to-skip bypasses train_step
        manager.step_begin(iteration)
        train_one_step()
        manager.step_end(iteration)
    manager.close()
    assert manifest(tmp_path / "prof", 0)["windows"][0]["iterations_recorded"] == [3, 5]
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [3, 4, 5]


def test_close_is_idempotent(tmp_path):
    manager = ProfilerManager(config(tmp_path))
    manager.arm(train_iters=6)
    manager.close("finished")
    manager.close("again")
    assert manifest(tmp_path / "prof", 0)["exit"]["reason"] == "finished"


def test_npu_only_flags_get_one_warning_on_the_torch_backend(tmp_path):
    run_loop(config(tmp_path, profile_level="level1", profile_l2_cache=True))
    warnings = manifest(tmp_path / "prof", 0)["warnings"]
    assert [w["message"] for w in warnings if "only to the npu backend" in w["message"]] == [
        "--profile-level, --profile-l2-cache apply only to the npu backend; the torch backend "
        "ignores them."]


def test_async_export_does_not_block_the_training_loop(tmp_path, monkeypatch):
    original = torch.profiler.profile.export_chrome_trace

    def slow_export(self, path):
        time.sleep(1.5)
        return original(self, path)

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", slow_export)
    cfg = config(tmp_path)
    with profile(cfg, train_iters=6) as prof:
        for iteration in range(1, 7):
            began = time.monotonic()
            train_one_step()
            prof.step()
            assert time.monotonic() - began < 1.0, f"iteration {iteration} waited for the export"
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [3, 4]
    assert manifest(tmp_path / "prof", 0)["status"] == "complete"


def test_a_manifest_that_cannot_be_written_is_said_once(tmp_path, capsys):
    from mindspeed_prof.recording.manifest import Manifest
    manifest_file = Manifest(str(tmp_path / "gone" / "profile_manifest_rank3.json"), rank=3,
                             world_size=4, backend="torch", config=config(tmp_path))
    assert manifest_file.save() is False and manifest_file.save() is False
    err = capsys.readouterr().err
    assert err.count("rank 3] ERROR: cannot write") == 1 and "free space" in err


def test_preflight_fails_fast_on_an_unwritable_save_path_of_a_profiled_rank(tmp_path):
    from mindspeed_prof.manager import preflight
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cfg = config(tmp_path, profile_save_path=str(blocker / "prof"), profile_ranks=(1,))
    preflight(cfg, rank=0, world_size=2)  # rank 0 does not profile: nothing to check
    with pytest.raises(ConfigError, match="is not writable on rank 1"):
        preflight(cfg, rank=1, world_size=2)
