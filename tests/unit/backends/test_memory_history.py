"""--profile-memory-snapshot and --profile-memory-oom on the NPU double: a snapshot per profiled
window in its folder, an out-of-memory dump before the original error propagates unchanged,
`check` and `summary` reading them back, and a clear refusal where no NPU or GPU is there."""

import functools
import json
import os
import sys

import pytest
import torch

from helpers import loop
from helpers.cli import run_cli
from helpers.loop import train_one_step
from mindspeed_prof import ProfilerConfig, profile
from mindspeed_prof.backends import memory as memory_backend
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.output.read.snapshot import load_snapshot

MiB = 1 << 20


@pytest.fixture
def npu(monkeypatch):
    """The torch_npu double (2.7.1 unless a test reloads another), unloaded afterwards; the
    process-wide OOM watch is forgotten, as its allocator goes with the double."""
    from fakes.loader import FAKES_DIR, load_fake_torch_npu, unload_fake_torch_npu

    monkeypatch.setenv("RANK", "0")
    memory_backend.OOM.forget()
    yield load_fake_torch_npu("2.7.1")
    memory_backend.OOM.forget()
    sys.modules["torch_npu.profiler.analysis"].wait_for_async_parses(timeout=60)
    unload_fake_torch_npu()
    while FAKES_DIR in sys.path:
        sys.path.remove(FAKES_DIR)
    os.environ.pop("FAKE_TORCH_NPU_VERSION", None)


config = functools.partial(loop.config, profile_backend="npu", profile_step_start=3,
                           profile_step_end=5, profile_memory_snapshot=True)


def train(npu, cfg, iterations=6, alloc=None):
    """A loop whose iteration i "allocates" alloc(i) bytes of NPU memory, then frees it."""
    memory = npu.npu.memory
    with profile(cfg, train_iters=iterations, rank=0, world_size=1) as prof:
        for iteration in range(1, iterations + 1):
            held = memory._fake_device_alloc(alloc(iteration) if alloc else MiB)
            train_one_step()
            memory._fake_device_free(held)
            prof.step()


def manifest(tmp_path):
    return json.loads((tmp_path / "prof" / "profile_manifest_rank0.json").read_text())


def test_each_profiled_window_leaves_a_snapshot_of_its_allocations_in_its_folder(npu, tmp_path):
    train(npu, config(tmp_path, profile_steps=("2-3", "5")), alloc=lambda i: (i + 1) * MiB)

    windows = manifest(tmp_path)["windows"]
    assert [w["dir"] for w in windows] == ["iter_2-3", "iter_5-5"]
    for window in windows:
        assert f"{window['dir']}/memory_snapshot_rank0.pickle" in window["files"]
    sizes = {}
    for folder in ("iter_2-3", "iter_5-5"):
        snapshot = load_snapshot(str(tmp_path / "prof" / folder / "memory_snapshot_rank0.pickle"))
        sizes[folder] = sorted({e["size"] for e in snapshot.device_traces[0]
                                if e["action"] == "alloc"})
    # each window's history starts at its session (warm-up unit included) and ends with it
    assert sizes == {"iter_2-3": [2 * MiB, 3 * MiB, 4 * MiB], "iter_5-5": [5 * MiB, 6 * MiB]}


def test_the_allocator_stops_recording_when_the_window_ends(npu, tmp_path):
    train(npu, config(tmp_path))

    assert not npu._C._allocator.ALLOCATOR.is_history_enabled()


def test_check_validates_the_snapshots_and_summary_reports_the_peak_and_its_site(npu, tmp_path, capsys):
    train(npu, config(tmp_path), alloc=lambda i: 10 * MiB if i == 3 else MiB)

    code, out, _ = run_cli(capsys, "check", str(tmp_path / "prof"))
    assert code == 0, out
    code, out, _ = run_cli(capsys, "summary", str(tmp_path / "prof"), "--json")
    (entry,) = json.loads(out)["memory"]
    (device,) = entry["devices"]
    assert entry["file"] == "memory_snapshot_rank0.pickle" and entry["rank"] == 0
    assert device["peak_allocated_bytes"] == 10 * MiB
    assert device["top_sites"][0]["bytes"] == 10 * MiB
    site = device["top_sites"][0]["site"]  # the innermost frame outside torch: train()'s call
    assert site.startswith("backends/test_memory_history.py:") and site.endswith(" train"), site


def test_a_window_whose_snapshot_is_missing_is_incomplete(npu, tmp_path, capsys):
    train(npu, config(tmp_path))
    os.unlink(tmp_path / "prof" / "memory_snapshot_rank0.pickle")

    code, out, _ = run_cli(capsys, "check", str(tmp_path / "prof"))

    assert code == 1
    assert "missing memory_snapshot_rank0.pickle (--profile-memory-snapshot" in out


def test_out_of_memory_dumps_a_snapshot_then_raises_the_original_error_unchanged(npu, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_NPU_HBM_BYTES", str(64 * MiB))
    cfg = config(tmp_path, profile_memory_snapshot=False, profile_memory_oom=True)
    memory = npu.npu.memory

    with pytest.raises(torch.OutOfMemoryError) as raised:
        with profile(cfg, train_iters=6, rank=0, world_size=1) as prof:
            kept = [memory._fake_device_alloc(40 * MiB)]
            for _ in range(6):
                kept.append(memory._fake_device_alloc(40 * MiB))  # iteration 1 runs out
                prof.step()

    assert str(raised.value).startswith("NPU out of memory. Tried to allocate 40.00 MiB (NPU 0; "
                                        "64.00 MiB total capacity")
    # raised by the allocator itself: nothing of ours between the allocation and the error
    assert raised.traceback[-1].path.name == "_allocator.py"
    oom = load_snapshot(str(tmp_path / "prof" / "memory_oom_rank0.pickle"))
    assert oom.device_traces[0][-1]["action"] == "oom"
    (entry,) = manifest(tmp_path)["memory_oom"]
    assert entry["snapshot"] == "memory_oom_rank0.pickle"
    assert entry["requested_bytes"] == 40 * MiB and entry["device"] == "npu:0"
    assert any("out of memory on npu:0" in e["message"] for e in manifest(tmp_path)["errors"])


def test_a_failing_oom_dump_still_lets_the_original_error_through(npu, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_NPU_HBM_BYTES", str(8 * MiB))
    cfg = config(tmp_path, profile_memory_snapshot=False, profile_memory_oom=True)
    memory = npu.npu.memory

    def broken(snapshot, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(memory_backend, "write_snapshot", broken)
    with pytest.raises(torch.OutOfMemoryError, match="NPU out of memory"):
        with profile(cfg, train_iters=6, rank=0, world_size=1):
            memory._fake_device_alloc(16 * MiB)


def test_oom_recording_starts_at_start_up_before_any_window(npu, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_NPU_HBM_BYTES", str(16 * MiB))
    cfg = config(tmp_path, profile_memory_snapshot=False, profile_memory_oom=True,
                 profile_memory_max_entries=50)
    memory = npu.npu.memory
    with pytest.raises(torch.OutOfMemoryError):
        with profile(cfg, train_iters=6, rank=0, world_size=1) as prof:
            for iteration in range(1, 7):
                memory._fake_device_alloc(6 * MiB)  # iteration 3 runs out, in the window
                prof.step()

    snapshot = load_snapshot(str(tmp_path / "prof" / "memory_oom_rank0.pickle"))
    actions = [e["action"] for e in snapshot.device_traces[0]]
    assert actions.count("alloc") == 2 and actions[-1] == "oom"  # iterations 1 and 2 too
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "prof"))
    assert "rank 0 ran out of memory on npu:0" in out


def test_memory_flags_on_a_host_without_npu_or_gpu_are_refused_at_start_up(tmp_path):
    cfg = config(tmp_path, profile_backend="torch", profile_memory_oom=True)

    with pytest.raises(ConfigError) as refused:
        with profile(cfg, train_iters=6, rank=0, world_size=1):
            pass

    message = str(refused.value)
    assert message.startswith("--profile-memory-snapshot and --profile-memory-oom record the "
                              "caching allocator of an NPU or a GPU, and this host has neither")
    assert "drop --profile-memory-snapshot and --profile-memory-oom" in message


def test_show_config_refuses_nothing_but_says_where_snapshots_would_go(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "show-config", "--profile-memory-snapshot", "--profile-save-path",
                           str(tmp_path / "p"), "--profile-backend", "torch")

    assert code == 0
    assert "not runnable on this machine: --profile-memory-snapshot records the caching allocator" in out


@pytest.mark.parametrize("flags, message", [
    (["--profile-memory-max-entries", "0"], "--profile-memory-max-entries 0 must be >= 1"),
    (["--profile-memory-max-entries", "many"], "fix the value of --profile-memory-max-entries"),
])
def test_bad_max_entries_name_the_flag(flags, message, capsys):
    code, _, err = run_cli(capsys, "show-config", *flags)

    assert code == 2 and message in err


def test_megatrons_memory_flags_are_taken_over_and_megatrons_own_recorder_switched_off(capsys):
    from argparse import Namespace

    from mindspeed_prof.patches.megatron_memory import take_over_memory_history

    args = Namespace(record_memory_history=True, memory_snapshot_path="mine.pickle")
    taken = take_over_memory_history(args, ProfilerConfig(profile=True), rank=0)

    assert taken.profile_memory_snapshot and taken.profile_memory_oom
    assert args.record_memory_history is False  # Megatron's model provider records nothing
    assert "--memory-snapshot-path mine.pickle is not written" in capsys.readouterr().out
    untouched = Namespace(record_memory_history=True)
    assert not take_over_memory_history(untouched, ProfilerConfig(), 0).profile_memory_oom
    assert untouched.record_memory_history is True  # without --profile: Megatron's own, as ever


def test_each_request_of_a_window_leaves_a_snapshot_in_its_own_folder(npu, tmp_path, capsys):
    from helpers.inference import armed, config as request_config, work

    driver = armed(request_config(tmp_path, profile_backend="npu", profile_memory_snapshot=True),
                   rank=0, world_size=1)
    memory = npu.npu.memory
    for n in range(1, 5):
        with driver.request():
            with driver.forward():
                memory._fake_device_free(memory._fake_device_alloc(n * MiB))
                work()
    driver.close()

    for n in (2, 3):
        snapshot = load_snapshot(str(tmp_path / "prof" / f"req_{n}-{n}" /
                                     "memory_snapshot_rank0.pickle"))
        assert [e["size"] for e in snapshot.device_traces[0] if e["action"] == "alloc"] == [n * MiB]
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "prof"))
    assert code == 0, out


def test_oom_recording_waits_until_the_host_has_set_its_device_up(npu, tmp_path):
    from mindspeed_prof.recording.startup import preflight

    cfg = config(tmp_path, profile_memory_snapshot=False, profile_memory_oom=True)
    preflight(cfg, rank=0, world_size=1)  # as Megatron validates its arguments: no device yet

    assert not memory_backend.OOM.recording
    assert not npu.npu.is_initialized()  # recording would have set NPU 0 up on every rank
    npu.npu._lazy_init()
    preflight(cfg, rank=0, world_size=1)
    assert memory_backend.OOM.recording
