"""The report's "What would each fix save" section (``output/report/whatif.py``), read back from
the HTML page ``mindspeed-prof report`` writes for a simulated 2 x 2 pipeline job."""

import html
import re

from helpers.cli import run_cli
from output_fixtures import whatif_job

TITLE = "What would each fix save"


def page(tmp_path, capsys, **play):
    marks = play.pop("marks", True)
    save = whatif_job.write_capture(tmp_path / "save", whatif_job.play(**play), marks=marks)
    code, _, err = run_cli(capsys, "report", save, "-o", tmp_path / "r.html")
    assert code in (0, 1), err
    text = (tmp_path / "r.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def test_the_report_says_which_stage_to_fix_and_what_it_saves(tmp_path, capsys):
    text = page(tmp_path, capsys, slow_stage=(1, 1.6), jitter=0.02)
    assert TITLE in text
    section = text[text.rindex(TITLE):]
    assert "If stage 1 ran like the others, a step would take" in section
    assert re.search(r"stage\s+1\s+1\.1\d\d\s+19\d\.\d\s+1\d\.\d", section)


def test_a_pipelined_run_without_marks_gets_a_note_saying_how_to_record_them(tmp_path, capsys):
    text = page(tmp_path, capsys, marks=False)
    section = text[text.rindex(TITLE):]
    assert "no what-if analysis" in section and "has no microbatch marks" in section


def test_a_run_that_is_not_pipelined_has_no_such_section(tmp_path, capsys):
    save = whatif_job.write_capture(tmp_path / "save", whatif_job.play(pp=1, dp=2), dp=2,
                                      pp=1)
    code, _, err = run_cli(capsys, "report", save, "-o", tmp_path / "r.html")
    assert code in (0, 1), err
    assert TITLE not in (tmp_path / "r.html").read_text()
