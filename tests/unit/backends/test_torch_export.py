"""The torch backend writes an async trace from a thread of the training process, a sync one on
the training thread. These tests run real windows through ``mindspeed_prof.profile`` and look at
what reached disk, which thread wrote it and what the manifest says."""

import json
import os
import threading
import time

import pytest
import torch

from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import ProfilerConfig, profile

MODEL = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def run_window(tmp_path, **overrides):
    values = dict(profile=True, profile_step_start=3, profile_step_end=5,
                  profile_save_path=str(tmp_path / "prof"), profile_backend="torch")
    values.update(overrides)
    with profile(ProfilerConfig(**values), train_iters=6) as prof:
        for _ in range(6):
            MODEL(torch.randn(8, 32)).sum().backward()
            prof.step()
    return tmp_path / "prof"


@pytest.fixture
def exporter(monkeypatch, tmp_path):
    """Make every export note its process and thread before calling ``then(self, path)``."""
    original = torch.profiler.profile.export_chrome_trace
    seen = []
    plan = {"then": original}

    def export_chrome_trace(self, path):
        seen.append((os.getpid(), threading.get_ident()))
        return plan["then"](self, path)

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", export_chrome_trace)
    plan["pids"] = lambda: [pid for pid, _ in seen]
    plan["threads"] = lambda: [thread for _, thread in seen]
    plan["original"] = original
    return plan


def test_the_async_trace_is_written_by_a_thread_of_the_training_process_and_is_complete(
        tmp_path, exporter):
    save = run_window(tmp_path, profile_record_shapes=True, profile_with_stack=True)
    assert exporter["pids"]() == [os.getpid()]
    assert exporter["threads"]() != [threading.main_thread().ident]
    (trace,) = torch_traces(save)
    assert step_ids(trace) == [3, 4]
    with open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    assert any(e.get("cat") == "python_function" for e in events)  # --profile-with-stack
    assert any("Input Dims" in e.get("args", {}) for e in events)  # --profile-record-shapes
    assert manifest(save, 0)["status"] == "complete"


def test_sync_mode_writes_the_trace_on_the_training_thread(tmp_path, exporter):
    save = run_window(tmp_path, profile_analyse="sync")
    assert exporter["threads"]() == [threading.main_thread().ident]
    assert step_ids(torch_traces(save)[0]) == [3, 4]
    assert manifest(save, 0)["status"] == "complete"


def test_a_failing_export_is_reported_with_its_message_and_the_fix(tmp_path, exporter):
    def full_disk(self, path):
        raise OSError(28, "No space left on device")

    exporter["then"] = full_disk
    save = run_window(tmp_path)
    data = manifest(save, 0)
    assert data["status"] == "failed"
    (error,) = data["errors"]
    assert "[Errno 28] No space left on device; check free space" in error["message"]


def test_the_window_end_does_not_wait_for_a_slow_export(tmp_path, exporter):
    def slow(self, path):
        time.sleep(2.0)
        return exporter["original"](self, path)

    exporter["then"] = slow
    values = dict(profile=True, profile_step_start=3, profile_step_end=5,
                  profile_save_path=str(tmp_path / "prof"), profile_backend="torch")
    with profile(ProfilerConfig(**values), train_iters=6) as prof:
        for iteration in range(1, 7):
            began = time.monotonic()
            MODEL(torch.randn(8, 32)).sum().backward()
            prof.step()
            assert time.monotonic() - began < 1.0, f"iteration {iteration} waited"
        assert manifest(tmp_path / "prof", 0)["status"] == "parsing"  # still being written
    assert manifest(tmp_path / "prof", 0)["status"] == "complete"  # close() waited for it
