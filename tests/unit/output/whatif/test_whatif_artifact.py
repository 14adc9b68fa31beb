"""``whatif`` side by side with the paper's published artifact (ByteDance-Seed/StragglerAnalysis).

Runs where a checkout of it is named by STRAGGLER_ANALYSIS_PATH (skipped, saying so, elsewhere):
on its three traces (data/trace-{SE,ST,AR}.parquet) S is within 1 % of its expected result
(data/result-*.json), the top op type, DP rank and stage are the same with values within 2 %,
and M_W / M_S match its data/mw-*.json and data/ms-*.json. With STRAGGLER_ANALYSIS_PYTHON (a
Python where its analyzer runs: pandas<2.2, numpy<2, pyarrow<16), its analyzer also runs,
unchanged, on our export of a simulated capture and agrees with ``whatif``, and on the
hand-timed interleaved table gives the step times worked out by hand.
"""

import json
import os

import pytest

from helpers.cli import run_cli
from helpers.straggler_artifact import CHECKOUT, PYTHON, their_result
from output_fixtures import interleaved_job, whatif_job

needs_checkout = pytest.mark.skipif(
    not CHECKOUT or not os.path.isdir(os.path.join(CHECKOUT or "", "data")),
    reason="STRAGGLER_ANALYSIS_PATH does not name a checkout of ByteDance-Seed/StragglerAnalysis")


def artifact(name):
    with open(os.path.join(CHECKOUT, "data", name)) as handle:
        return json.load(handle)


def top(entries):
    return entries[0]["name"], entries[0]["slowdown"]


@needs_checkout
@pytest.mark.parametrize("trace", ["SE", "ST", "AR"])
def test_whatif_reproduces_the_artifact_s_results_on_its_traces(trace, capsys):
    code, out, err = run_cli(capsys, "whatif",
                             os.path.join(CHECKOUT, "data", f"trace-{trace}.parquet"), "--json")
    assert code == 0, err
    ours, theirs = json.loads(out), artifact(f"result-{trace}.json")
    assert ours["slowdown"] == pytest.approx(theirs["blocking_slowdown"], rel=0.01)
    for dim in ("optype", "dp_rank", "stage"):
        expected = theirs[f"blocking_decompose_by_{dim}"]
        best = max(expected, key=expected.get)
        name, value = top(ours[f"by_{dim}"])
        assert name == best, dim
        assert value == pytest.approx(expected[best], rel=0.02), dim
    assert ours["m_w"]["value"] == pytest.approx(artifact(f"mw-{trace}.json")["Mw"], abs=0.02)
    assert ours["m_s"]["value"] == pytest.approx(artifact(f"ms-{trace}.json")["Ms"], abs=0.02)


@pytest.mark.slow  # the artifact's analyzer in its own interpreter
@needs_checkout
@pytest.mark.skipif(not PYTHON, reason="STRAGGLER_ANALYSIS_PYTHON names no Python where the "
                                       "artifact's analyzer runs (pandas<2.2, numpy<2, pyarrow<16)")
def test_the_artifact_s_analyzer_runs_unchanged_on_our_export_and_agrees(tmp_path, capsys):
    save = whatif_job.write_capture(tmp_path / "save", whatif_job.play(
        slow_worker=(1, 0, 1.8), jitter=0.02))
    code, _, err = run_cli(capsys, "export", save, "--format", "straggler-analysis", "-o",
                           tmp_path / "out")
    assert code == 0, err
    theirs = their_result(tmp_path / "out", tmp_path / "theirs")
    code, out, err = run_cli(capsys, "whatif", tmp_path / "out", "--json")
    ours = json.loads(out)
    assert ours["slowdown"] == pytest.approx(theirs["blocking_slowdown"], rel=0.01)
    expected = theirs["blocking_decompose_by_dp_rank"]
    assert top(ours["by_dp_rank"])[0] == max(expected, key=expected.get) == "1"


@pytest.mark.slow  # the artifact's analyzer in its own interpreter
@needs_checkout
@pytest.mark.skipif(not PYTHON, reason="STRAGGLER_ANALYSIS_PYTHON names no Python where the "
                                       "artifact's analyzer runs (pandas<2.2, numpy<2, pyarrow<16)")
def test_the_artifact_s_analyzer_replays_the_hand_timed_interleaved_job_as_worked_out(tmp_path):
    from mindspeed_prof.output.whatif.table import write_parquet

    (tmp_path / "table").mkdir()
    write_parquet(whatif_job.as_table(interleaved_job.ops(whole_step=True)),
                  str(tmp_path / "table" / "trace-interleaved.parquet"))
    (tmp_path / "table" / "meta-interleaved.yaml").write_text(interleaved_job.META_YAML)
    theirs = their_result(tmp_path / "table", tmp_path / "theirs")
    # tests/unit/output/whatif/test_model.py: 27 s as recorded, 22.5 s every op typical; with
    # only stage 1 as recorded 28.5 s, only stage 0 21 s
    assert theirs["blocking_slowdown"] == pytest.approx(27 / 22.5)
    assert theirs["blocking_decompose_by_stage"] == pytest.approx({"1": 28.5 / 22.5,
                                                                   "0": 21 / 22.5})
