"""With ``MINDSPEED_PROF_EXPORT_FORK=1`` the torch backend writes async traces from a forked child.

kineto's save holds the GIL, even through its file I/O, so the export thread stalls the training
loop for the whole write, however slow the storage; a child does not. Not the default: on CPU it
saves nothing over the iterations around the window end (BENCHMARKS.md figure 7). These tests run real windows through ``mindspeed_prof.profile``
and look at what reached disk, which process wrote it and what the manifest says.
"""

import json
import os
import signal
import sys
import time

import pytest
import torch

from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import ProfilerConfig, profile
from mindspeed_prof.backends import torch_backend

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the export forks only on Linux")

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
    """Make every export note its process id in ``pids`` before calling ``then(self, path)``;
    exports fork unless a test says otherwise."""
    original = torch.profiler.profile.export_chrome_trace
    pids = tmp_path / "export_pids"
    plan = {"then": original}
    monkeypatch.setenv(torch_backend.EXPORT_FORK_ENV, "1")

    def export_chrome_trace(self, path):
        with open(pids, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        return plan["then"](self, path)

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", export_chrome_trace)
    plan["pids"] = lambda: [int(line) for line in pids.read_text().split()]
    plan["original"] = original
    return plan


def test_the_async_trace_is_written_by_another_process_and_is_complete(tmp_path, exporter):
    save = run_window(tmp_path, profile_record_shapes=True, profile_with_stack=True)
    assert [pid != os.getpid() for pid in exporter["pids"]()] == [True]
    (trace,) = torch_traces(save)
    assert step_ids(trace) == [3, 4]
    with open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    assert any(e.get("cat") == "python_function" for e in events)  # --profile-with-stack
    assert any("Input Dims" in e.get("args", {}) for e in events)  # --profile-record-shapes
    assert manifest(save, 0)["status"] == "complete"


def test_by_default_the_trace_is_written_by_a_thread_of_the_training_process(
        tmp_path, exporter, monkeypatch):
    monkeypatch.delenv(torch_backend.EXPORT_FORK_ENV)
    save = run_window(tmp_path)
    assert exporter["pids"]() == [os.getpid()]
    assert step_ids(torch_traces(save)[0]) == [3, 4]
    assert manifest(save, 0)["status"] == "complete"


@pytest.mark.parametrize("how", [("analyse", "sync"), ("env", "0")], ids=["sync", "fork-off"])
def test_sync_mode_and_the_env_switch_write_the_trace_in_the_training_process(
        tmp_path, exporter, monkeypatch, how):
    if how[0] == "env":
        monkeypatch.setenv(torch_backend.EXPORT_FORK_ENV, how[1])
        save = run_window(tmp_path)
    else:
        save = run_window(tmp_path, profile_analyse=how[1])
    assert exporter["pids"]() == [os.getpid()]
    assert step_ids(torch_traces(save)[0]) == [3, 4]
    assert manifest(save, 0)["status"] == "complete"


def test_an_export_failing_in_the_child_is_reported_with_its_message_and_the_fix(
        tmp_path, exporter):
    def full_disk(self, path):
        raise OSError(28, "No space left on device")

    exporter["then"] = full_disk
    save = run_window(tmp_path)
    data = manifest(save, 0)
    assert data["status"] == "failed"
    (error,) = data["errors"]
    assert "[Errno 28] No space left on device; check free space" in error["message"]
    assert exporter["pids"]() != [os.getpid()]


def test_a_child_killed_mid_write_is_reported_and_leaves_no_partial_trace(tmp_path, exporter):
    def killed(self, path):
        with open(path, "w") as handle:
            handle.write('{"traceEvents": [')
        os.kill(os.getpid(), signal.SIGKILL)

    exporter["then"] = killed
    save = run_window(tmp_path)
    data = manifest(save, 0)
    assert data["status"] == "failed"
    assert f"died of signal {int(signal.SIGKILL)}" in data["errors"][0]["message"]
    assert torch_traces(save) == []


def test_sigterm_to_the_process_group_does_not_cut_the_child_export_short(tmp_path, exporter):
    # torchrun ends a job with killpg(SIGTERM): the child must finish the file it is writing.
    def slow_then_signalled(self, path):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
        return exporter["original"](self, path)

    exporter["then"] = slow_then_signalled
    save = run_window(tmp_path)
    assert step_ids(torch_traces(save)[0]) == [3, 4]
    assert manifest(save, 0)["status"] == "complete"


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


@pytest.mark.parametrize("value", ["0", "1"])
def test_the_fork_switch_is_not_mistaken_for_a_profile_flag_variable(value):
    from mindspeed_prof.arguments import parse_profile_flags
    config = parse_profile_flags(["--profile"], environ={torch_backend.EXPORT_FORK_ENV: value})
    assert config.profile
