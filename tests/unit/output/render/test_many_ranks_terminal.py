"""A 1,024-rank job on the terminal: each per-rank table shows the ranks with a problem first,
then the others grouped as ranges (0-299,301-699,701-1023); ``--all`` prints a row per rank; the
plot stays within its bound in pixels. Before (issue 35): check printed 1,028 lines with the two
corrupt ranks at lines 303 and 703, summary 1,040, timeline 1,026, merge 2,071,
``show-config --profile-ranks all`` 1,024 numbers and ``summary --plot`` a 61,560-pixel-wide
PNG."""

import glob
import json
import os
import struct

import pytest

from helpers.cli import run_cli
from mindspeed_prof.output.render import many
from mindspeed_prof.output.render.plot import DPI, MAX_WIDTH_IN
from output_fixtures import corrupt
from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE
from output_fixtures.simulated_job import rank_trace, simulated_job

RANKS = 1024
BAD = (300, 700)
GOOD = "0-299,301-699,701-1023"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """1,024 ranks in step (the same step time everywhere); ranks 300 and 700 truncated."""
    directory = simulated_job(str(tmp_path_factory.mktemp("many") / "prof"), ranks=RANKS)
    for rank in BAD:
        corrupt.truncate(glob.glob(os.path.join(directory, f"rank{rank}.*"))[0])
    return directory


def rank_rows(out, rank):
    """The table rows of ``rank`` (not the closing verdict line, "1022 valid, ...")."""
    return [line for line in out.splitlines()
            if line.split()[:1] == [str(rank)] and "checked)" not in line]


def test_rank_ranges_tell_runs_of_consecutive_ranks():
    assert many.rank_ranges(range(1024)) == "0-1023"
    assert many.rank_ranges([*range(300), *range(301, 1024)]) == "0-299,301-1023"
    assert many.rank_ranges([9, 0, 1, 5, 6, 2]) == "0-2,5,6,9"
    assert many.rank_ranges([]) == "none"


def test_check_of_1024_ranks_shows_the_two_corrupt_ranks_first_then_one_group(job, capsys):
    code, out, _ = run_cli(capsys, "check", job)
    lines = out.splitlines()
    assert code == 1
    assert len(lines) <= 10, out
    assert lines[1].startswith("RANK")
    assert [line.split()[:2] for line in lines[2:5]] == [
        ["300", "corrupt"], ["700", "corrupt"], [GOOD, "valid"]]
    assert "1022 ranks" in lines[4]
    assert lines[-1] == "1022 valid, 2 corrupt (1024 checked): exit 1"


def test_check_all_prints_a_row_per_rank(job, capsys):
    code, out, _ = run_cli(capsys, "check", job, "--all")
    assert code == 1
    assert all(len(rank_rows(out, rank)) == 1 for rank in range(RANKS))
    assert len(out.splitlines()) >= RANKS


def test_summary_of_1024_ranks_puts_the_skipped_ranks_first_and_fits_a_screen(job, capsys):
    code, out, _ = run_cli(capsys, "summary", job)
    lines = out.splitlines()
    assert code == 0
    assert len(lines) <= 30, out
    notes = [i for i, line in enumerate(lines) if line.startswith("note: rank ")]
    assert len(notes) == 2 and notes[-1] < lines.index(next(l for l in lines
                                                          if l.startswith("RANK"))), out
    assert "the 5 slowest of 1024 rows (ranks 0-1023)" in out
    assert rank_rows(out, 300) and rank_rows(out, 700)  # no step time: shown, not hidden
    assert len(run_cli(capsys, "summary", job, "--all")[1].splitlines()) >= RANKS


def test_timeline_of_1022_ranks_prints_the_offsets_spread_and_the_largest(job, tmp_path, capsys):
    code, out, err = run_cli(capsys, "timeline", job, "-o", tmp_path / "t.json.gz")
    assert code == 0
    assert len(out.splitlines()) <= 10, out
    assert f"1022 ranks ({GOOD}): offsets +0.0 to +0.0 µs" in out
    assert err.count("left out") == 2
    code, out, _ = run_cli(capsys, "timeline", job, "-o", tmp_path / "t.json.gz", "--all")
    assert sum(" offset " in line for line in out.splitlines()) == RANKS - len(BAD)


def test_merge_of_four_node_reports_of_1024_ranks_fits_a_screen(job, tmp_path, capsys):
    for node in range(4):
        run_cli(capsys, "check", job, "--node", f"{node}/4", "--report",
                tmp_path / f"node{node}.json")
    reports = sorted(str(p) for p in tmp_path.glob("node*.json"))
    code, out, _ = run_cli(capsys, "merge", *reports)
    assert code == 1
    assert len(out.splitlines()) <= 40, out
    assert [line.split()[0] for line in out.splitlines() if "corrupt  torch" in line] == \
        ["300", "700"]
    assert len(run_cli(capsys, "merge", *reports, "--all")[1].splitlines()) > 2 * RANKS


def test_show_config_tells_every_rank_of_1024_as_one_range(capsys):
    code, out, _ = run_cli(capsys, "show-config", "--world-size", RANKS, "--profile-ranks", "all")
    assert code == 0
    assert "ranks:     all -> 0-1023 (world size 1024)" in out.splitlines()


def png_size(path):
    with open(path, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_the_plot_of_1024_ranks_stays_within_its_width(job, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code, _, _ = run_cli(capsys, "summary", job, "--plot", tmp_path / "p.png")
    width, height = png_size(tmp_path / "p.png")
    assert code == 0
    assert width <= MAX_WIDTH_IN * DPI and height <= 4 * DPI, (width, height)


def test_a_small_job_keeps_a_row_per_rank(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=4)
    code, out, _ = run_cli(capsys, "check", directory)
    assert code == 0 and all(len(rank_rows(out, rank)) == 1 for rank in range(4))
    code, out, _ = run_cli(capsys, "summary", directory)
    assert code == 0 and all(len(rank_rows(out, rank)) == 1 for rank in range(4))


def test_valid_ranks_whose_rows_all_differ_are_still_one_row_per_backend(tmp_path, capsys):
    # every rank recorded other steps: no two rows alike, yet the table stays short
    directory = tmp_path / "prof"
    directory.mkdir()
    for rank in range(40):
        name = TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns=1_700_000_000_000_000_000 + rank)
        (directory / name).write_text(json.dumps(rank_trace(rank, (rank + 1, rank + 2), {})))
    code, out, _ = run_cli(capsys, "check", directory)
    assert code == 0
    [row] = [line for line in out.splitlines() if line.startswith("0-39")]
    assert "40 ranks" in row and "details differ (--all: a row per rank)" in row


def test_merge_names_the_ranks_of_a_run_it_left_out_as_ranges():
    from mindspeed_prof.output.job.merge import _describe

    group = [("node0.json", {"covered_ranks": list(range(512))}),
             ("node1.json", {"covered_ranks": list(range(512, 1024))})]
    assert _describe("job-a", group) == \
        "run job-a (report(s) node0.json, node1.json: rank(s) 0-1023)"


def test_a_strided_selection_of_many_ranks_is_cut_with_its_count():
    assert many.few_ranges(range(0, 131072, 8)) == \
        "0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,...,131064 (16384 ranks)"
    assert many.few_ranges([*range(300), *range(301, 1024)]) == "0-299,301-1023"
