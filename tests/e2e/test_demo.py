"""scripts/demo.sh, the README's first set-up command, run as a newcomer runs it: the launch script
adapted, a 2-rank torchrun job profiled, then check, summary, report and timeline on its output."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e]


def test_the_training_demo_ends_with_a_valid_check_a_report_and_a_merged_timeline(tmp_path):
    out = tmp_path / "demo"
    # the venv's console scripts (mindspeed-prof, torchrun) as the README's command has them
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    done = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh"), str(out)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "2 valid" in done.stdout and "exit 0" in done.stdout
    assert "runs wrote into this directory" not in done.stdout + done.stderr
    traces = sorted((out / "profile").glob("rank*.pt.trace.json"))
    assert [t.name.split(".")[0] for t in traces] == ["rank0", "rank1"]
    for trace in traces:
        steps = {e["name"] for e in json.loads(trace.read_text())["traceEvents"]
                 if e.get("name", "").startswith("ProfilerStep#")}
        assert steps == {f"ProfilerStep#{n}" for n in (2, 3, 4, 5)}
    page = (out / "report.html").read_text()
    assert "Rank × iteration heatmaps" in page and "<script" in page
    with gzip.open(out / "timeline.json.gz", "rt") as handle:
        merged = json.load(handle)
    names = {e["args"]["name"] for e in merged["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert len([n for n in names if n.startswith("rank ")]) == 2, names
