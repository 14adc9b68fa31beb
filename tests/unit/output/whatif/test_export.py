"""``mindspeed-prof export DIR --format straggler-analysis -o OUT/``: a simulated 2 x 2 pipeline
job's torch traces with the schedule marks (``config/schedule_marks``) and manifests, exported
to the paper's table and metadata and read back; ``whatif`` on the capture agrees with it."""

import json

import pytest
import yaml

from helpers.cli import run_cli
from mindspeed_prof.config import schedule_marks as sm
from mindspeed_prof.output.whatif import rows as whatif_rows
from mindspeed_prof.output.whatif import schema
from output_fixtures import whatif_job


@pytest.fixture
def slow_stage_capture(tmp_path):
    ops = whatif_job.play(slow_stage=(1, 1.6), jitter=0.02)
    return whatif_job.write_capture(tmp_path / "save", ops), ops


def exported(capsys, save, out):
    code, stdout, err = run_cli(capsys, "export", save, "--format", "straggler-analysis",
                                "-o", out)
    assert code == 0, err
    return stdout


def test_export_writes_the_artifact_s_table_and_metadata(tmp_path, capsys, slow_stage_capture):
    import pyarrow.parquet as pq

    save, ops = slow_stage_capture
    stdout = exported(capsys, save, tmp_path / "out")
    (trace,) = (tmp_path / "out").glob("trace-*.parquet")
    (meta,) = (tmp_path / "out").glob("meta-*.yaml")
    assert "written to" in stdout
    assert {f.name: str(f.type) for f in pq.read_schema(str(trace))} == dict(schema.COLUMNS)
    data = yaml.safe_load(meta.read_text())
    assert list(data) == list(schema.META_KEYS)
    assert (data["dp_size"], data["pp_size"], data["tp_size"], data["world_size"]) == (2, 2, 1, 4)
    table = pq.read_table(str(trace)).to_pydict()
    marked = [op for op in ops if op.timer != "forward-backward"]
    types = table["optype"]
    assert types.count("forward-compute") == sum(op.timer == "forward-compute" for op in marked)
    assert types.count("backward-recv") == sum(op.timer == "backward-recv" for op in marked)
    assert sorted(set(table["step"])) == [3, 4, 5, 6]
    forward = [i for i, t in enumerate(types) if t == "forward-compute"]
    assert {table["mb_id"][i] for i in forward} == {0, 1, 2, 3}
    assert {(table["stage"][i], table["gmc"][i]) for i in forward} == {(0, 0), (1, 1)}
    assert min(table["start_ts"]) == 0.0
    assert set(types) >= {"gc", "optimizer-clip-main-grad", "embedding-grads-all-reduce"}
    assert "zero-length rows" in stdout


def test_whatif_on_the_capture_and_on_its_export_agree(tmp_path, capsys, slow_stage_capture):
    save, _ = slow_stage_capture
    exported(capsys, save, tmp_path / "out")
    code, direct, err = run_cli(capsys, "whatif", save, "--json")
    assert code == 0, err
    code, via_table, err = run_cli(capsys, "whatif", tmp_path / "out", "--json")
    assert code == 0, err
    direct, via_table = json.loads(direct), json.loads(via_table)
    assert direct["slowdown"] == pytest.approx(via_table["slowdown"], rel=1e-5)
    assert direct["by_stage"][0]["name"] == via_table["by_stage"][0]["name"] == "1"
    assert direct["m_s"]["value"] > 0.9


def test_a_capture_without_schedule_marks_exits_2_saying_how_to_get_them(tmp_path, capsys):
    save = whatif_job.write_capture(tmp_path / "save", whatif_job.play(), marks=False)
    for command in (["export", save, "--format", "straggler-analysis", "-o", tmp_path / "o"],
                    ["whatif", save]):
        code, out, err = run_cli(capsys, *command)
        assert code == 2 and out == ""
        assert "has no microbatch marks" in err
        assert "record a window with mindspeed_prof at this version" in err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_export_to_a_file_exits_2(tmp_path, capsys, slow_stage_capture):
    save, _ = slow_stage_capture
    (tmp_path / "file").write_text("x")
    code, _, err = run_cli(capsys, "export", save, "--format", "straggler-analysis", "-o",
                           tmp_path / "file")
    assert code == 2 and "-o" in err and "is a file" in err


def test_without_data_parallelism_the_gradient_marks_are_left_out_and_said(tmp_path, capsys):
    ops = whatif_job.play(dp=1, slow_stage=(1, 1.5), jitter=0.02)
    ops.append(whatif_job.Op(0, 0, 0, 3, "grads-all-reduce", ops[-1].start, 0.001))
    save = whatif_job.write_capture(tmp_path / "save", ops, dp=1)
    stdout = exported(capsys, save, tmp_path / "out")
    assert "1 gradient/parameter synchronisation marks left out" in stdout
    code, out, err = run_cli(capsys, "whatif", tmp_path / "out", "--json")
    assert code == 0, err
    assert json.loads(out)["by_stage"][0]["name"] == "1"


def test_a_combined_exchange_becomes_one_row_per_direction_spanning_the_call():
    marks = {(0, 0, 0): [whatif_rows.Mark(1, sm.FORWARD_COMPUTE, 0.0, 1.0, 0, 0),
                         whatif_rows.Mark(1, sm.FORWARD_SEND_BACKWARD_RECV, 1.0, 1.5),
                         whatif_rows.Mark(1, sm.BACKWARD_COMPUTE, 1.5, 3.0, 0, 0)]}
    rows, _ = whatif_rows.rows_of(marks, pp=2, use_dp=False)
    p2p = sorted((r.optype, r.start, r.end) for r in rows if "send" in r.optype
                 or "recv" in r.optype)
    assert p2p == [("backward-recv", 1.0, 1.5), ("forward-send", 1.0, 1.5)]


def test_a_save_path_of_two_windows_exits_2_naming_a_window_folder(tmp_path, capsys):
    for window, steps in (("iter_3-4", (3, 4)), ("iter_7-8", (7, 8))):
        whatif_job.write_capture(tmp_path / "save" / window, whatif_job.play(steps=steps))
    for command in (["export", tmp_path / "save", "--format", "straggler-analysis", "-o",
                     tmp_path / "o"], ["whatif", tmp_path / "save"]):
        code, out, err = run_cli(capsys, *command)
        assert code == 2 and out == ""
        assert "holds 2 windows (iter_3-4, iter_7-8)" in err and "give its folder" in err
    code, out, err = run_cli(capsys, "whatif", tmp_path / "save" / "iter_7-8", "--json")
    assert code == 0, err
    assert json.loads(out)["steps"] == [7, 8]
