"""The progress bar of long check/summary/analyse runs: on a terminal's stderr only."""

import io
import json
import sys

import pytest

from mindspeed_prof.cli import main
from mindspeed_prof.output import progress
from mindspeed_prof.output.progress import Progress
from output_fixtures import samples


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_bar_on_a_terminal_shows_share_and_amount_then_erases_its_line(monkeypatch):
    monkeypatch.setattr(progress, "REDRAW_S", 0)
    term = Terminal()
    with Progress("check", 400e6, minimum=0, stream=term) as bar:
        bar.advance(100e6)
        bar.advance(300e6)
        drawn = term.getvalue()
    assert "check: [" in drawn and " 25% 100/400 MB" in drawn and "100% 400/400 MB" in drawn
    assert term.getvalue().endswith("\r") and term.getvalue().rsplit("\r", 2)[-2].strip() == ""


def test_nothing_is_written_when_stderr_is_not_a_terminal():
    stream = io.StringIO()
    with Progress("check", 400e6, minimum=0, stream=stream) as bar:
        bar.advance(400e6)
    assert stream.getvalue() == ""


def test_small_work_draws_no_bar_even_on_a_terminal():
    term = Terminal()
    with Progress("summary", progress.MIN_BYTES - 1, stream=term) as bar:
        bar.advance(progress.MIN_BYTES - 1)
    with Progress("analyse", 1, unit="captures", stream=term) as bar:
        bar.advance(1)
    assert term.getvalue() == ""


def test_counted_units_are_shown_as_counts(monkeypatch):
    monkeypatch.setattr(progress, "REDRAW_S", 0)
    term = Terminal()
    with Progress("analyse", 4, unit="captures", stream=term) as bar:
        bar.advance(1)
    assert "1/4 captures" in term.getvalue()


@pytest.mark.parametrize("command", ["check", "summary"])
def test_commands_draw_the_bar_on_a_terminal_stderr_and_leave_stdout_alone(
        tmp_path, monkeypatch, capsys, command):
    samples.two_ranks(tmp_path)
    monkeypatch.setattr(progress, "MIN_BYTES", 0)
    monkeypatch.setattr(progress, "REDRAW_S", 0)
    code = main([command, str(tmp_path), "--json"])
    plain = capsys.readouterr()
    assert plain.err == ""  # captured stderr is no terminal: no bar
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main([command, str(tmp_path), "--json"]) == code
    bar = capsys.readouterr()
    assert json.loads(bar.out) == json.loads(plain.out)
    assert f"{command}: [" in term.getvalue() and "100%" in term.getvalue()
