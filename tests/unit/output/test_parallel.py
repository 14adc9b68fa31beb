"""Reading over several processes, threads or blocks gives the same answers as in one."""

import os

import pytest

from mindspeed_prof.output import check_directory, parallel
from mindspeed_prof.output.read import columns, csvrows
from mindspeed_prof.output.summary import aggregate
from mindspeed_prof.output.read.csvtable import CsvTable
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


def test_kernel_totals_summed_block_by_block_over_threads_equal_one_block(big_kernels,
                                                                           monkeypatch):
    monkeypatch.setattr(csvrows, "CHUNK_BYTES", 1 << 24)
    monkeypatch.setattr(parallel, "threads_allowed", lambda: False)
    expected = totals(aggregate.kernel_totals(big_kernels))
    monkeypatch.setattr(csvrows, "CHUNK_BYTES", 20_000)  # dozens of blocks
    monkeypatch.setattr(parallel, "threads_allowed", lambda: True)
    assert totals(aggregate.kernel_totals(big_kernels)) == expected
    assert sum(count for _, count in expected.values()) == 8 * 591


def test_a_ragged_row_late_in_a_large_table_is_skipped_with_its_line(big_kernels, monkeypatch):
    with open(big_kernels, "ab") as handle:
        handle.write(b"1,2,3\n")
    monkeypatch.setattr(csvrows, "CHUNK_BYTES", 20_000)
    table = CsvTable(str(big_kernels), columns.KERNEL_DETAILS)
    assert table.count_rows() == 8 * 591
    assert table.malformed == (1, f"line {8 * 591 + 2} has 3 columns, the header has 33")
    assert sum(i.count for i in aggregate.kernel_totals(big_kernels).values()) == 8 * 591


def test_check_reads_files_in_parallel_with_the_same_verdicts(tmp_path, monkeypatch):
    samples.two_ranks(tmp_path)
    os.remove(os.path.join(tmp_path, samples.run_name(1), samples.OUTPUT, "op_statistic.csv"))
    monkeypatch.setenv(WORKERS, "1")
    one = check_directory(str(tmp_path)).as_dict()
    monkeypatch.setenv(WORKERS, "2")
    two = check_directory(str(tmp_path)).as_dict()
    assert one == two and [r["verdict"] for r in two["ranks"]] == ["valid", "incomplete"]


def test_summary_over_several_processes_equals_one(tmp_path, monkeypatch):
    from mindspeed_prof.output import summarize_directory
    from mindspeed_prof.output.render import summary as render_summary
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
