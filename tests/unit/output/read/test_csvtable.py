"""CSV tables by column name: every real header variant, quoting, damage."""

import csv
import io
import math
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindspeed_prof.output.read import columns, csvrows
from mindspeed_prof.output.read.csvtable import Column, CsvTable, number
from mindspeed_prof.output.read.errors import CorruptFile
from output_fixtures import corrupt, samples

KERNEL_SAMPLES = {
    "sep_2023_rank0": os.path.join(samples.sample_output(0), "kernel_details.csv"),
    "sep_2023_rank1": os.path.join(samples.sample_output(1), "kernel_details.csv"),
    "nov_2023": samples.KERNELS_NOV_2023,
    "jan_2025_tabs_no_final_newline": samples.KERNELS_JAN_2025,
    "cann_op_summary": samples.OP_SUMMARY,
}


def reference_rows(path, names):
    """What csv.DictReader (msprof-analyze's way) reads for these columns, width-checked."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = [h.strip() for h in next(reader)]
        index = [header.index(n) for n in names]
        return [tuple(row[i] for i in index) for row in reader if len(row) == len(header)]


@pytest.mark.parametrize("sample", sorted(KERNEL_SAMPLES))
def test_kernel_details_of_every_release_read_by_name(sample):
    path = KERNEL_SAMPLES[sample]
    table = CsvTable(path, columns.KERNEL_DETAILS)
    name_col = table.header_name("Name")
    dur_col = table.header_name("Duration(us)")
    rows = [(r[0], r[3]) for r in table.rows()]
    assert rows == reference_rows(path, [name_col, dur_col])
    assert all(number(d) is not None for _, d in rows)
    assert table.count_rows() == len(rows)


def test_block_dim_and_block_num_are_the_same_column(tmp_path):
    path = tmp_path / "kernel_details.csv"
    shutil.copy(KERNEL_SAMPLES["nov_2023"], path)
    assert CsvTable(path, columns.KERNEL_DETAILS).header_name("Block Num") == "Block Dim"
    corrupt.rename_header(path, "Block Dim", "Block Num")
    assert CsvTable(path, columns.KERNEL_DETAILS).header_name("Block Num") == "Block Num"


def test_device_id_column_may_lead_the_header(tmp_path):
    path = tmp_path / "step_trace_time.csv"
    path.write_text("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,"
                    "Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude "
                    "Receive),Preparing\r\n3,7,10.5,2.0,1.0,3.0,4.0,16.5,0,2.0,0.25\r\n")
    table = CsvTable(path, columns.STEP_TRACE_TIME)
    row = next(table.rows())
    assert row[0] == "7" and number(row[1]) == 3 and number(row[-1]) == 0.25


def test_values_with_trailing_tabs_parse_as_numbers():
    table = CsvTable(samples.KERNELS_JAN_2025, columns.KERNEL_DETAILS)
    starts = [number(r[5]) for r in table.rows()]
    assert starts and all(s > 1.7e15 for s in starts)
    assert number("1736413971558972.912\t") == 1736413971558972.912
    assert number("N/A") is None and number("") is None and number(" 3 ") == 3.0


def test_header_names_match_without_case_spaces_or_underscores(tmp_path):
    path = tmp_path / "op_statistic.csv"
    path.write_text("device_id,op type,Core Type,count,Total Time(us)\n0,MatMul,AI_CORE,2,5.5\n")
    row = next(CsvTable(path, columns.OP_STATISTIC).rows())
    assert row[:4] == ("MatMul", "AI_CORE", "2", "5.5")


def test_multi_line_call_stacks_are_one_row_each():
    path = os.path.join(samples.sample_output(0), "operator_details.csv")
    table = CsvTable(path, columns.OPERATOR_DETAILS)
    with open(path, newline="") as handle:
        expected = [r[0] for r in list(csv.reader(handle))[1:]]
    assert [r[0] for r in table.rows()] == expected
    assert table.count_rows() == len(expected)


@pytest.mark.parametrize("damage, reason", [
    (lambda p: corrupt.zero_bytes(p), "empty file"),
    (lambda p: corrupt.truncate(p, 0.5), "cut short"),
    (lambda p: corrupt.rename_header(p, "Duration(us)", "Dur"), "no column 'Duration\\(us\\)'"),
    (lambda p: corrupt.write_bytes(p, b"Name,Duration(us)\n"), "header only"),
    (lambda p: corrupt.write_bytes(p, b"Name,Duration(us)\nA,1\n\x00\x00,2\n"), "NUL"),
    (lambda p: corrupt.write_bytes(p, b"Name,Duration(us)\nA,1\n\xff,2\n"), "not UTF-8"),
    (lambda p: corrupt.write_bytes(p, b"Name,Duration(us)\nA,\"1\n"), "never closed"),
    (lambda p: corrupt.write_bytes(p, b"Name,Duration(us)\n" + b"A,1,2\n" * 20), "wrong number"),
])
def test_damaged_tables_are_corrupt_with_a_reason(tmp_path, damage, reason):
    path = tmp_path / "kernel_details.csv"
    shutil.copy(KERNEL_SAMPLES["nov_2023"], path)
    damage(path)
    with pytest.raises(CorruptFile, match=reason):
        table = CsvTable(path, columns.KERNEL_DETAILS)
        table.count_rows()
    with pytest.raises(CorruptFile, match=reason):
        list(CsvTable(path, columns.KERNEL_DETAILS).rows())


def test_one_ragged_row_is_skipped_and_reported_not_fatal():
    table = CsvTable(KERNEL_SAMPLES["sep_2023_rank0"], columns.KERNEL_DETAILS)
    table.count_rows()
    bad, first = table.malformed
    assert bad == 1 and "line 17" in first


def test_a_long_row_and_a_short_row_do_not_cancel_out(tmp_path):
    # the sample's 31-column line 17 plus a 33-column line 3: the column counts add up to two
    # good rows, which a comma-count shortcut once took for a valid table
    path = tmp_path / "kernel_details.csv"
    lines = open(KERNEL_SAMPLES["sep_2023_rank0"], "rb").read().split(b"\n")
    lines[2] += b",x"
    path.write_bytes(b"\n".join(lines))
    table = CsvTable(path, columns.KERNEL_DETAILS)
    assert table.count_rows() == 19
    assert table.malformed == (2, "line 3 has 33 columns, the header has 32")
    assert len(list(CsvTable(path, columns.KERNEL_DETAILS).rows())) == 19


def test_a_lone_carriage_return_is_text_inside_a_row_not_a_row_end(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"A,B\r\n1,x\ry\r\n2,z\r\n")
    table = CsvTable(path, [Column("A"), Column("B")])
    assert list(table.rows()) == [("1", "x\ry"), ("2", "z")]
    assert table.count_rows() == 2


def test_last_row_without_line_end_is_fine_when_complete():
    table = CsvTable(samples.KERNELS_JAN_2025, columns.KERNEL_DETAILS)
    assert table.count_rows() == len(list(table.rows())) == 29


# no lone \r: csv.writer leaves it unquoted with a \n terminator, so even csv misreads it
_cell = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                       blacklist_characters="\x00\r"), max_size=8)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(_cell, min_size=4, max_size=4), min_size=1, max_size=30),
       chunk=st.integers(8, 200), terminator=st.sampled_from(["\r\n", "\n"]))
def test_any_table_csv_writes_reads_back_unchanged(tmp_path, monkeypatch, rows, chunk, terminator):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=terminator)
    writer.writerow(["A", "B", "C", "D"])
    writer.writerows(rows)
    path = tmp_path / "t.csv"
    path.write_bytes(out.getvalue().encode("utf-8"))
    monkeypatch.setattr(csvrows, "CHUNK_BYTES", chunk)
    spec = [Column("D"), Column("B"), Column("Z", required=False)]
    table = CsvTable(path, spec)
    with open(path, newline="", encoding="utf-8") as handle:
        expected = [(r[3], r[1], None) for r in list(csv.reader(handle))[1:] if r]
    assert list(table.rows()) == [tuple(v.replace("\r\n", "\n") if v else v for v in r)
                                  for r in expected]
    assert table.count_rows() == len(expected)


ODD_DURATIONS = ["2.5\t", "1_000", " 3 ", "N/A", "nan", "inf", "-inf", "", "0x10", "1e999", "-0",
                 "NaN", "+7", "4e-3", "1.5e", "abc", "NULL", "#N/A", "1.#IND"]


def _kernel_table(path, durations):
    lines = ["Name,Type,Accelerator Core,Duration(us)"]
    lines += [f"k{i % 3},T{i % 2},AI_CORE,{d}" for i, d in enumerate(durations)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _loop_sums(durations):
    """What a Python loop over the rows gives: float() of each text, finite ones only."""
    sums = {}
    for i, text in enumerate(durations):
        try:
            value = float(text)
        except ValueError:
            continue
        if math.isfinite(value):
            total = sums.setdefault((f"k{i % 3}", f"T{i % 2}"), [0.0, 0])
            total[0] += value
            total[1] += 1
    return sums


@pytest.mark.parametrize("odd", [False, True], ids=["plain numbers", "odd texts"])
def test_kernel_sums_equal_a_python_loop_read_as_numbers_or_again_as_text(tmp_path, monkeypatch,
                                                                           odd):
    # The parser reads durations as numbers; a file where one is text it does not read as a
    # number (a TAB some CANN versions append, 1_000, N/A...) is read again as text.
    from mindspeed_prof.output.read import kernels

    durations = [f"{i * 0.37:.4f}" for i in range(4000)]  # past SMALL_TABLE_BYTES
    if odd:
        durations[100:100] = ODD_DURATIONS
    routes = []
    real = kernels._sums
    monkeypatch.setattr(kernels, "_sums", lambda reader, table, numeric: (
        routes.append(numeric), real(reader, table, numeric))[1])
    path = _kernel_table(tmp_path / "kernel_details.csv", durations)
    assert path.stat().st_size > csvrows.SMALL_TABLE_BYTES  # pyarrow's route, not csv's
    result = kernels._read(path)
    assert result.error is None and result.rows == len(durations)
    assert {(n, k): [t, c] for n, k, t, c in result.sums} == _loop_sums(durations)
    assert routes == ([True, False] if odd else [True])


def test_a_small_table_read_by_the_csv_module_sums_as_a_python_loop(tmp_path):
    # the exact pass gives text: rows without a finite duration are left out before encoding
    from mindspeed_prof.output.read import kernels

    durations = ["nan", "1.5", *ODD_DURATIONS, "2.25", "N/A", "3"]
    path = _kernel_table(tmp_path / "kernel_details.csv", durations)
    assert path.stat().st_size < csvrows.SMALL_TABLE_BYTES
    result = kernels._read(path)
    assert {(n, k): [t, c] for n, k, t, c in result.sums} == _loop_sums(durations)
