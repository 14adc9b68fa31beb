"""The readers' cache: the second command and a re-run read nothing, and agree with a fresh read."""

import json
import os

import pytest

from helpers.cli import run_cli_json
from mindspeed_prof.output import cache
from mindspeed_prof.output.read import kernels, tracescan
from output_fixtures import corrupt, samples


@pytest.fixture
def trusting(monkeypatch, tmp_path):
    """A cache that takes the sample's small, just-written files (the real one wants >= 1 MiB
    and files older than its racy window)."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 1)
    monkeypatch.setattr(cache, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(cache, "_disabled", False)
    return tmp_path / "cache"


@pytest.fixture
def counted(monkeypatch):
    """How often the big files are really read."""
    reads = {"kernel_details": 0, "trace": 0}
    real_kernels, real_scan = kernels._read, tracescan.scan_trace

    def read_kernels(path):
        reads["kernel_details"] += 1
        return real_kernels(path)

    def scan(path, *args, **kwargs):
        reads["trace"] += 1
        return real_scan(path, *args, **kwargs)

    monkeypatch.setattr(kernels, "_read", read_kernels)
    monkeypatch.setattr(tracescan, "scan_trace", scan)
    return reads


def test_check_then_summary_reads_each_big_file_once_and_a_rerun_reads_none(
        tmp_path, capsys, trusting, counted):
    data = tmp_path / "save"
    samples.two_ranks(data)
    _, first_check = run_cli_json(capsys, "check", str(data))
    assert counted == {"kernel_details": 2, "trace": 2}
    _, first_summary = run_cli_json(capsys, "summary", str(data))
    assert counted == {"kernel_details": 2, "trace": 2}  # summary took check's kernel sums
    _, again_check = run_cli_json(capsys, "check", str(data))
    _, again_summary = run_cli_json(capsys, "summary", str(data))
    assert counted == {"kernel_details": 2, "trace": 2}
    assert again_check == first_check and again_summary == first_summary


def test_remembered_results_equal_a_fresh_read_without_the_cache(tmp_path, capsys, trusting,
                                                                  monkeypatch):
    data = tmp_path / "save"
    samples.two_ranks(data)
    run_cli_json(capsys, "summary", str(data))  # summary first: it fills the check's entry too
    cached = (run_cli_json(capsys, "check", str(data)), run_cli_json(capsys, "summary", str(data)))
    fresh = (run_cli_json(capsys, "check", str(data), "--no-cache"),
             run_cli_json(capsys, "summary", str(data), "--no-cache"))
    assert cached == fresh and cached[0][0] == 0


def test_a_file_changed_after_it_was_remembered_is_read_again(tmp_path, capsys, trusting):
    data = tmp_path / "save"
    rank0, _ = samples.two_ranks(data)
    assert run_cli_json(capsys, "check", str(data))[0] == 0
    corrupt.truncate(os.path.join(rank0, samples.OUTPUT, "kernel_details.csv"), keep=0.5)
    code, report = run_cli_json(capsys, "check", str(data))
    assert code == 1
    assert report["ranks"][0]["verdict"] == "corrupt"


def test_a_same_size_rewrite_is_a_miss(tmp_path, capsys, trusting):
    data = tmp_path / "save"
    rank0, _ = samples.two_ranks(data)
    trace = os.path.join(rank0, samples.OUTPUT, "trace_view.json")
    run_cli_json(capsys, "check", str(data))
    size = os.path.getsize(trace)
    with open(trace, "r+b") as handle:  # same size, same first bytes: cut the array open
        handle.seek(size - 1)
        handle.write(b" ")
    assert os.path.getsize(trace) == size
    code, report = run_cli_json(capsys, "check", str(data))
    assert code == 1 and "truncated" in json.dumps(report["ranks"][0])


def test_files_written_within_the_racy_window_are_not_remembered(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 1)
    samples.two_ranks(tmp_path / "save")  # just written: their ctime is now
    run_cli_json(capsys, "check", str(tmp_path / "save"))
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))


def test_cache_off_writes_nothing_and_no_cache_reads_every_file(tmp_path, capsys, trusting,
                                                               monkeypatch, counted):
    data = tmp_path / "save"
    samples.two_ranks(data)
    monkeypatch.setenv(cache.CACHE_ENV, "off")
    run_cli_json(capsys, "check", str(data))
    assert not trusting.exists()
    monkeypatch.setenv(cache.CACHE_ENV, str(trusting))
    run_cli_json(capsys, "check", str(data))
    run_cli_json(capsys, "check", str(data), "--no-cache")
    assert counted["trace"] == 6  # off, filled, --no-cache: each read both traces


def test_a_damaged_cache_entry_is_a_miss_not_a_crash(tmp_path, capsys, trusting):
    data = tmp_path / "save"
    samples.two_ranks(data)
    _, first = run_cli_json(capsys, "check", str(data))
    for entry in trusting.rglob("*.json"):
        entry.write_text('{"version": 1, "path": 3, "results": [')
    _, again = run_cli_json(capsys, "check", str(data))
    assert again == first


def test_a_torch_traces_summary_is_remembered_too(tmp_path, capsys, trusting, monkeypatch):
    from mindspeed_prof.output.summary import torchtrace
    from output_fixtures.torch_traces import torch_trace

    torch_trace(tmp_path / "save", rank=0)
    code, first = run_cli_json(capsys, "summary", tmp_path / "save")
    monkeypatch.setattr(torchtrace, "summarize_trace", None)  # a second read would fail
    assert run_cli_json(capsys, "summary", tmp_path / "save") == (code, first)
    assert code == 0 and first["ranks"][0]["top_ops"]
