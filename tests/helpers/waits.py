"""What a waits e2e test reads of a save path: summary --json's slow ranks and data, summary's
terminal text and the report page (the stand-in's and the real loop's tests read the same)."""

import pytest

from helpers.cli import run_cli, run_cli_json


def slow_ranks_summary_and_report(capsys, save, tmp_path):
    """(the slow ranks of summary --json, its whole data, summary's text, the report page)."""
    code, data = run_cli_json(capsys, "summary", save)
    assert code == 0
    _, text, _ = run_cli(capsys, "summary", save)
    pytest.importorskip("plotly")
    from helpers.report_page import read_page

    out = str(tmp_path / "report.html")
    code, _, _ = run_cli(capsys, "report", save, "-o", out)
    assert code == 0
    return [s for s in data["slow_ranks"] if s["slow"]], data, text, read_page(out)


def slow_rank_rows(page):
    """The rows of the report's slow-ranks table."""
    return [row for t in page.tables if t.cls == "slow-ranks" for row in t.rows]
