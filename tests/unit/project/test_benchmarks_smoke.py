"""The benchmark command works: `python benchmarks/run.py --quick` runs every figure and prints
a row for each. This does NOT check the targets: quick mode's sizes are far too small for its
numbers to mean anything (BENCHMARKS.md holds a full run). About 15 s on 2 idle cores."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUN = os.path.join(REPO, "benchmarks", "run.py")

# Every figure in quick mode starts processes and models (~45 s on a loaded machine): part of the
# full suite, outside a developer's fast `pytest -m "not e2e"` loop.
pytestmark = pytest.mark.e2e


def benchmark(*args, timeout=300):
    return subprocess.run([sys.executable, RUN, *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_quick_mode_runs_every_figure_and_prints_each_row(tmp_path):
    done = benchmark("--quick", "--jobs", "2", "--json", tmp_path / "rows.json")
    # 1 = ran, some target missed: expected at quick mode's sizes
    assert done.returncode in (0, 1), done.stdout + done.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert sorted({row["figure"].split()[0] for row in rows}, key=int) == [str(n) for n in range(1, 13)]
    assert not [row for row in rows if row["failed"]], done.stdout
    assert "NOT comparable with the targets" in done.stdout
    table = done.stdout.splitlines()
    for row in rows:
        [line] = [line for line in table if row["figure"] in line and row["compared"] in line]
        assert line.split()[-1] in ("pass", "MISS", "info")


@pytest.mark.parametrize("only", ["0", "99", "1,x", ""])
def test_only_rejects_figures_that_do_not_exist(only):
    done = benchmark("--only", only, timeout=60)
    assert done.returncode == 2 and "--only" in done.stderr and "1-12" in done.stderr


def test_jobs_is_refused_outside_quick_mode():
    done = benchmark("--jobs", "2", timeout=60)
    assert done.returncode == 2 and "--jobs applies to --quick only" in done.stderr
