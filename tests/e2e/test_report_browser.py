"""The report in a real browser: Debian's chromium, headless, with every host name unresolvable
(a page that fetched anything would fail), loads the page with no console message and renders
each figure; the rendered page's heatmap labels and table numbers are summary --json's.

CI installs chromium (.ci/run); where it is absent the tests skip, saying so.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from helpers.cli import run_cli, run_cli_json  # noqa: E402
from helpers.report_page import read_page  # noqa: E402
from output_fixtures import samples  # noqa: E402
from output_fixtures.simulated_job import simulated_job  # noqa: E402

pytestmark = pytest.mark.e2e
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
TICK = re.compile(r'class="(x|y)tick"><text[^>]*transform="translate\(([\d.]+),([\d.]+)\)"'
                  r'[^>]*>([^<]*)</text>')


@pytest.fixture(scope="module")
def browser():
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        pytest.skip("no chromium here (Debian: `apt-get install -y chromium`); CI installs it "
                    "in .ci/run, where this test runs")
    return found


def load(browser, page, tmp_path):
    """(the DOM after the page's scripts ran, the console lines) of ``page``."""
    done = subprocess.run(
        [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=10000",
         "--dump-dom", f"file://{page}"],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines()
               if ":CONSOLE" in line or "Uncaught" in line]
    return done.stdout, console


def rendered_figures(dom):
    """div id -> its rendered SVG's text (the figures come in page order)."""
    marks = [(m.start(), m.group(1)) for m in re.finditer(r'<div class="card [a-z]+[^"]*" '
                                                          r'id="(fig\d+)"', dom)]
    ends = [start for start, _ in marks[1:]] + [len(dom)]
    return {div: dom[start:end] for (start, div), end in zip(marks, ends)}


def ticks(svg, axis):
    """The axis' tick labels as drawn: left to right, top to bottom."""
    found = [(float(x), float(y), text) for which, x, y, text in TICK.findall(svg)
             if which == axis]
    return [text for _, _, text in sorted(found, key=lambda t: (t[0], t[1]) if axis == "x"
                                          else (t[1], t[0]))]


def _titled(page, title):
    """The div of the page's figure whose title starts with ``title``."""
    return next(div for div, figure in read_page(page).figures.items()
                if figure["layout"].get("title", {}).get("text", "").startswith(title))


def test_the_torch_report_renders_with_no_console_message_and_summarys_numbers(
        browser, tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=8, slow={5: "compute"})
    page = str(tmp_path / "report.html")
    assert run_cli(capsys, "report", directory, "-o", page)[0] == 0
    dom, console = load(browser, page, tmp_path)
    assert console == []
    figures = rendered_figures(dom)
    # the lateness at arrival (who makes whom wait), 5 heatmaps, the step bars
    assert len(figures) == len(read_page(page).figures) == 7
    for svg in figures.values():
        assert "js-plotly-plot" in svg[:200] and "main-svg" in svg  # plotly drew it
    step_time = figures[_titled(page, "Step time")]
    assert 'class="hm"' in step_time  # the heatmap layer
    assert ticks(step_time, "y") == [f"rank {r}" for r in range(8)]
    assert ticks(step_time, "x") == ["5", "6", "7"]
    assert "Step time" in step_time
    _, summary = run_cli_json(capsys, "summary", directory)
    rendered = str(tmp_path / "rendered.html")
    with open(rendered, "w") as handle:
        handle.write(dom)
    ranks = read_page(rendered).table("ranks")
    for rank in summary["ranks"]:
        [row] = ranks.by("RANK", str(rank["rank"]))
        assert row[3].us == rank["breakdown_us"]["step_time"]
        assert row[3].text == f"{rank['breakdown_us']['step_time'] / 1000:.3f}"


def test_the_npu_report_of_the_real_samples_renders_with_no_console_message(
        browser, tmp_path, capsys):
    samples.two_ranks(tmp_path / "prof")
    page = str(tmp_path / "npu.html")
    assert run_cli(capsys, "report", tmp_path / "prof", "-o", page)[0] == 0
    dom, console = load(browser, page, tmp_path)
    assert console == []
    step_time = rendered_figures(dom)[_titled(page, "Step time")]
    assert ticks(step_time, "y") == ["rank 0", "rank 1"]
    _, summary = run_cli_json(capsys, "summary", tmp_path / "prof")
    steps = sorted({str(s["step"]) for r in summary["ranks"] for s in r["steps"]})
    assert ticks(step_time, "x") == steps


def test_a_1024_rank_report_renders_its_64_bands(browser, tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=1024)
    page = str(tmp_path / "big.html")
    assert run_cli(capsys, "report", directory, "-o", page)[0] == 0
    dom, console = load(browser, page, tmp_path)
    assert console == []
    labels = ticks(rendered_figures(dom)[_titled(page, "Step time")], "y")
    assert labels[0] == "ranks 0-15" and labels[-1] == "ranks 1008-1023" and len(labels) == 64
