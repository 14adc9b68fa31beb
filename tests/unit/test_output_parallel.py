"""Reading over several processes gives the same answers as reading in one."""

import os

import pytest

from mindspeed_prof.output import aggregate, check_directory, parallel
from output_fixtures import samples

WORKERS = parallel.WORKERS_ENV


def totals(kernels):
    return {k: (round(i.total_us, 6), i.count) for k, i in kernels.items()}


@pytest.fixture
def big_kernels(tmp_path):
    """The 591-row real sample, repeated, so that it splits into many ranges."""
    path = tmp_path / "kernel_details.csv"
    with open(samples.KERNELS_NOV_2023, "rb") as handle:
        header, body = handle.read().split(b"\n", 1)
    path.write_bytes(header + b"\n" + body * 8)
    return path


def test_kernel_totals_split_into_ranges_equal_one_pass(big_kernels, monkeypatch):
    monkeypatch.setenv(WORKERS, "1")
    expected = totals(aggregate.kernel_totals(big_kernels))
    monkeypatch.setenv(WORKERS, "2")
    monkeypatch.setattr(aggregate, "RANGE_BYTES", 50_000)
    assert len(aggregate._ranges(str(big_kernels), 100, os.path.getsize(big_kernels))) > 10
    assert totals(aggregate.kernel_totals(big_kernels)) == expected


def test_a_ragged_row_sends_the_file_back_to_one_exact_pass(big_kernels, monkeypatch):
    with open(big_kernels, "ab") as handle:
        handle.write(b"1,2,3\n")
    monkeypatch.setenv(WORKERS, "1")
    expected = totals(aggregate.kernel_totals(big_kernels))
    monkeypatch.setenv(WORKERS, "2")
    monkeypatch.setattr(aggregate, "RANGE_BYTES", 50_000)
    assert totals(aggregate.kernel_totals(big_kernels)) == expected


def test_check_reads_files_in_parallel_with_the_same_verdicts(tmp_path, monkeypatch):
    samples.two_ranks(tmp_path)
    os.remove(os.path.join(tmp_path, samples.run_name(1), samples.OUTPUT, "op_statistic.csv"))
    monkeypatch.setenv(WORKERS, "1")
    one = check_directory(str(tmp_path)).as_dict()
    monkeypatch.setenv(WORKERS, "2")
    two = check_directory(str(tmp_path)).as_dict()
    assert one == two and [r["verdict"] for r in two["ranks"]] == ["valid", "incomplete"]


def test_summary_over_several_processes_equals_one(tmp_path, monkeypatch):
    from mindspeed_prof.output import render_summary, summarize_directory
    from output_fixtures.torch_traces import torch_trace

    samples.two_ranks(tmp_path)
    samples.npu_capture(tmp_path, 0, timestamp="20230919180000000", op_statistic=False)
    torch_trace(tmp_path, rank=3, start=2, end=4)
    monkeypatch.setenv(WORKERS, "1")
    one = render_summary.summary_dict(summarize_directory(str(tmp_path)))
    monkeypatch.setenv(WORKERS, "3")
    three = render_summary.summary_dict(summarize_directory(str(tmp_path)))
    assert one == three and [r["rank"] for r in three["ranks"]] == [0, 1, 3]
    assert three["ranks"][0]["op_types_source"] == "op_statistic.csv"
