"""``mindspeed-prof whatif``: the paper's what-if analysis on per-op tables of a simulated 1F1B
job (2 stages x 2 DP replicas, played op by op so a slow worker holds everyone back), read back
from Parquet files through the command as users run it."""

import json
import math

import pytest

from helpers.cli import run_cli
from mindspeed_prof.output.whatif import analysis, schema
from mindspeed_prof.output.whatif.table import read_parquet, write_parquet
from output_fixtures import whatif_job

META = schema.JobMeta(trial_name="toy", dp_size=2, pp_size=2, world_size=4)


def analysed(**slow):
    return analysis.analyse(whatif_job.as_table(whatif_job.play(jitter=0.02, **slow)), META,
                            "toy")


def written(tmp_path, ops, name="toy"):
    path = tmp_path / f"trace-{name}.parquet"
    write_parquet(whatif_job.as_table(ops), str(path))
    return path


def test_a_slowed_last_stage_is_blamed_and_stage_imbalance_is_high():
    result = analysed(slow_stage=(1, 1.6))
    assert result.slowdown > 1.1
    assert result.by_stage[0].name == "1"
    assert result.by_stage[0].slowdown > result.by_stage[1].slowdown + 0.1
    assert result.m_s.value > 0.9
    assert result.m_w.value < 0.3


def test_one_slowed_worker_is_blamed_by_dp_rank_and_worker_imbalance_is_high():
    result = analysed(slow_worker=(1, 0, 1.8))
    assert result.slowdown > 1.1
    assert [e.name for e in result.by_dp_rank] == ["1", "0"]
    assert result.by_dp_rank[0].slowdown == pytest.approx(result.slowdown, rel=0.01)
    assert result.by_dp_rank[1].slowdown < 1.01
    assert result.m_w.value > 0.9
    assert result.m_w.selected == ["rank 1 (DP rank 1, stage 0)"]


def test_a_calm_job_blames_nothing_much():
    result = analysed()
    assert 1.0 <= result.slowdown < 1.03
    assert all(e.slowdown < 1.02 for e in result.by_stage + result.by_dp_rank + result.by_optype)
    assert all(e.saving < 0.01 for e in result.by_stage + result.by_dp_rank)


def test_the_slow_worker_makes_every_rank_s_step_equally_long_in_the_fixture():
    ops = whatif_job.play(slow_worker=(1, 0, 1.8))
    ends = {}
    for op in ops:
        if op.timer == "optimizer":
            ends.setdefault(op.step, set()).add(round(op.start + op.dur, 9))
    assert all(len(e) == 1 for e in ends.values())


def test_the_simulation_of_the_recorded_durations_reproduces_the_recorded_step():
    result = analysed(slow_stage=(1, 1.6))
    for recorded, simulated in zip(result.recorded_s, result.simulated_s):
        assert simulated <= recorded + 1e-6
        assert simulated == pytest.approx(recorded, rel=0.02)


def test_the_table_round_trips_through_parquet_with_the_artifact_s_column_types(tmp_path):
    import pyarrow.parquet as pq

    path = written(tmp_path, whatif_job.play())
    types = {f.name: str(f.type) for f in pq.read_schema(str(path))}
    assert types == dict(schema.COLUMNS)
    table = read_parquet(str(path))
    assert len(table) == len(whatif_job.play())
    assert set(table.optypes) >= {"forward-compute", "backward-recv", "optimizer"}


def test_whatif_on_a_table_says_which_stage_to_fix_in_words(tmp_path, capsys):
    path = written(tmp_path, whatif_job.play(slow_stage=(1, 1.6), jitter=0.02))
    code, out, err = run_cli(capsys, "whatif", path)
    assert code == 0, err
    assert "If stage 1 ran like the others, a step would take" in out
    assert "M_S = " in out and "unevenly partitioned" in out
    assert "DP 2 x PP 2" in out  # read off the table: no meta beside it


def test_whatif_json_is_strict_and_reads_the_meta_beside_the_table(tmp_path, capsys):
    path = written(tmp_path, whatif_job.play(slow_worker=(1, 0, 1.8), jitter=0.02), "job")
    (tmp_path / "meta-job.yaml").write_text(
        "trial_name: job\nrun_id: 0\ndp_size: 2\ndsp_size: 1\npp_size: 2\ntp_size: 2\n"
        "vpp_size: 1\nworld_size: 8\n")
    code, out, err = run_cli(capsys, "whatif", path, "--json")
    assert code == 0, err
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert data["job"]["tp_size"] == 2 and data["job"]["trial_name"] == "job"
    assert data["by_dp_rank"][0]["name"] == "1"
    assert data["m_w"]["value"] > 0.9
    assert data["steps"] == [3, 4, 5, 6] and len(data["per_step"]) == 4
    assert any("DP rank 1 ran like the others" in line for line in data["verdict"])


def test_whatif_on_a_folder_with_one_exported_table_reads_that_table(tmp_path, capsys):
    written(tmp_path, whatif_job.play(slow_stage=(1, 1.6)), "exported")
    code, out, err = run_cli(capsys, "whatif", tmp_path, "--json")
    assert code == 0, err
    assert json.loads(out)["by_stage"][0]["name"] == "1"


@pytest.mark.parametrize("content, expected", [
    (b"not parquet at all", "not a readable Parquet file"),
    (None, "does not exist"),
])
def test_whatif_on_a_bad_table_exits_2_with_one_line(tmp_path, capsys, content, expected):
    path = tmp_path / "trace-x.parquet"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run_cli(capsys, "whatif", path)
    assert code == 2 and out == ""
    assert expected in err and len(err.strip().splitlines()) == 1


def test_whatif_names_a_missing_column(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"dp_rank": [0], "stage": [0]}), str(path))
    code, _, err = run_cli(capsys, "whatif", path)
    assert code == 2 and "no column 'rank'" in err


def test_a_bad_meta_file_exits_2_naming_the_key(tmp_path, capsys):
    path = written(tmp_path, whatif_job.play())
    meta = tmp_path / "m.yaml"
    meta.write_text("trial_name: x\ndp_size: zero\n")
    code, _, err = run_cli(capsys, "whatif", path, "--meta", meta)
    assert code == 2 and "--meta" in err and "dp_size" in err


def test_a_table_with_a_step_missing_an_op_leaves_that_step_out_and_says_so(tmp_path, capsys):
    ops = [op for op in whatif_job.play(slow_stage=(1, 1.6))
           if not (op.step == 4 and op.rank == 3 and op.timer == "optimizer")]
    code, out, err = run_cli(capsys, "whatif", written(tmp_path, ops), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["steps"] == [3, 5, 6]
    assert any("1 of 4 steps left out" in note for note in data["notes"])


def test_no_nan_reaches_the_json_when_no_step_is_slowed(tmp_path, capsys):
    ops = whatif_job.play()  # no jitter: ideal == recorded, the shares are undefined
    code, out, _ = run_cli(capsys, "whatif", written(tmp_path, ops), "--json")
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert code == 0
    assert data["m_w"]["value"] is None or math.isfinite(data["m_w"]["value"])


def test_with_one_dp_replica_no_worker_problem_is_claimed(tmp_path):
    from mindspeed_prof.output.whatif import render

    ops = whatif_job.play(dp=1, slow_stage=(1, 1.6), jitter=0.02)
    meta = schema.JobMeta(trial_name="toy", dp_size=1, pp_size=2, world_size=2)
    result = analysis.analyse(whatif_job.as_table(ops), meta, "toy")
    assert result.m_w.value > 0.5  # the worst rank is the whole last stage
    lines = render.verdict(result)
    assert not any("worker problem" in line for line in lines)
    assert any("unevenly partitioned" in line for line in lines)


def test_a_small_slowdown_names_no_cause_from_m_w_or_m_s():
    from mindspeed_prof.output.whatif import render

    result = analysed(slow_stage=(1, 1.2))
    assert 1.03 <= result.slowdown < render.CLASSIFIED
    lines = render.verdict(result)
    assert any("If stage 1 ran like the others" in line for line in lines)
    assert not any("M_W" in line or "M_S" in line for line in lines)
