"""`summary` of db exports (`--profile-export-type db`): the step breakdown, top kernels and op
types of the text export of the same capture, read from its SQLite files."""

import glob
import os
import shutil
import sys

import pytest
import torch

from helpers.cli import run_cli_json
from mindspeed_prof import ProfilerConfig, profile
from mindspeed_prof.output import cache, summarize_directory
from mindspeed_prof.output.read import dbsummary
from output_fixtures import samples

OUT = samples.OUTPUT
TEXT_TABLES = ("kernel_details.csv", "op_statistic.csv", "step_trace_time.csv")


@pytest.fixture
def fake_npu(monkeypatch):
    from fakes.loader import FAKES_DIR, load_fake_torch_npu, unload_fake_torch_npu

    monkeypatch.setenv("RANK", "0")  # torch_npu names profiler_info_{RANK}.json after it
    yield load_fake_torch_npu("2.7.1")
    sys.modules["torch_npu.profiler.analysis"].wait_for_async_parses(timeout=60)
    unload_fake_torch_npu()
    while FAKES_DIR in sys.path:
        sys.path.remove(FAKES_DIR)
    os.environ.pop("FAKE_TORCH_NPU_VERSION", None)


def both_exports(tmp_path, level):
    """One capture of the torch_npu double with export type text,db, split into a text-only
    and a db-only copy of the same folder."""
    save = tmp_path / "prof"
    config = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=6,
                            profile_backend="npu", profile_save_path=str(save),
                            profile_analyse="sync", profile_level=level,
                            profile_export_type="text,db", profile_with_cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    with profile(config, train_iters=7, rank=0, world_size=1) as prof:
        for _ in range(7):
            model(torch.randn(4, 32)).sum().backward()
            prof.step()
    (capture,) = glob.glob(str(save / "*_ascend_pt"))
    copies = {}
    for kind in ("text", "db"):
        target = tmp_path / kind / os.path.basename(capture)
        shutil.copytree(capture, target)
        for name in os.listdir(target / OUT):
            if name.endswith(".db" if kind == "text" else (".csv", ".json")):
                os.remove(target / OUT / name)
        copies[kind] = tmp_path / kind
    assert sorted(os.listdir(copies["db"] / os.path.basename(capture) / OUT)) == [
        "analysis.db", "ascend_pytorch_profiler_0.db"]
    return copies


def numbers(rank_summary):
    items = lambda d: {k: (v.count, pytest.approx(v.total_us, rel=1e-9)) for k, v in d.items()}
    return rank_summary.steps, items(rank_summary.kernels), items(rank_summary.op_types)


@pytest.mark.parametrize("level", ["level0", "level1"])
def test_a_db_export_summarises_to_the_text_exports_numbers_of_the_same_capture(
        tmp_path, fake_npu, level):
    copies = both_exports(tmp_path, level)
    text = summarize_directory(str(copies["text"])).rank(0)
    db = summarize_directory(str(copies["db"])).rank(0)
    assert text.kernels and text.op_types and text.steps  # something to compare
    steps, kernels, types = numbers(text)
    assert [s["step"] for s in db.steps] == [s["step"] for s in steps] == [3, 4, 5]
    for ours, theirs in zip(db.steps, steps):
        assert ours.keys() == theirs.keys()
        assert ours == {k: pytest.approx(v) if isinstance(v, float) else v
                        for k, v in theirs.items()}
    assert numbers(db)[1] == kernels and numbers(db)[2] == types
    assert text.op_types_source == ("op_statistic.csv" if level == "level1"
                                    else "kernel_details.csv (no op_statistic.csv)")
    assert db.op_types_source.startswith("ascend_pytorch_profiler_0.db")
    assert db.basis == "analysis.db StepTraceTime" and text.basis == "step_trace_time.csv"


def test_a_text_and_db_export_is_read_from_its_tables_once(tmp_path, fake_npu, capsys):
    copies = both_exports(tmp_path, "level1")
    both = tmp_path / "both"
    shutil.copytree(copies["text"], both)
    for capture in os.listdir(copies["db"]):
        for name in os.listdir(copies["db"] / capture / OUT):
            shutil.copy(copies["db"] / capture / OUT / name, both / capture / OUT / name)
    text = summarize_directory(str(copies["text"])).rank(0)
    mixed = summarize_directory(str(both)).rank(0)
    assert numbers(mixed) == numbers(text)  # not counted twice


def test_the_real_db_export_gives_its_jobs_kernels_and_op_types_beside_its_text_run(tmp_path):
    # msinsight's test data: one job profiled twice, once per export type (not one capture)
    samples.db_capture(tmp_path / "db", 0)
    samples.text_capture_of_the_db_job(tmp_path / "text")
    db = summarize_directory(str(tmp_path / "db"), top=100).rank(0)
    text = summarize_directory(str(tmp_path / "text"), top=100).rank(0)
    [step] = db.steps
    assert step["step"] == 50 and step["device"] is None
    assert step["step_time"] == pytest.approx(step["Computing"]
                                              + step["Communication(Not Overlapped)"]
                                              + step["Free"])
    assert step["step_time"] == pytest.approx(text.steps[0]["step_time"], rel=0.05)
    # 187 compute tasks and 4 HCCL ops: the text run's 191 kernel_details.csv rows
    assert sum(k.count for k in db.kernels.values()) == 191
    hccl = {k for k in db.kernels if k[1] == "hcom_allReduce_"}
    assert len(hccl) == 4 and sum(db.kernels[k].count for k in hccl) == 4
    named = lambda s: {k for k in s.kernels if k[1] != "hcom_allReduce_"}  # ids differ per run
    assert named(db) == named(text)
    assert {k: v.count for k, v in db.op_types.items()} == \
        {k: v.count for k, v in text.op_types.items()}
    total = lambda d: sum(i.total_us for i in d.values())
    assert total(db.op_types) == pytest.approx(total(text.op_types), rel=0.05)
    top = sorted(text.op_types.values(), key=lambda i: -i.total_us)[:5]  # two runs: close
    for item in top:
        assert db.op_types[(item.name, item.kind)].total_us == pytest.approx(item.total_us,
                                                                             rel=0.1)
    assert all(core != "HCCL" for _, core in db.op_types)  # op_statistic.csv leaves them out


def test_summary_after_check_reads_no_database(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 1)  # the sample is 0.8 MB; the real floor is 1 MiB
    monkeypatch.setattr(cache, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(cache, "_disabled", False)
    samples.db_capture(tmp_path / "save", 0)
    code, _ = run_cli_json(capsys, "check", tmp_path / "save")
    assert code == 0
    monkeypatch.setattr(dbsummary, "kernel_sums", None)  # a second read would fail
    code, data = run_cli_json(capsys, "summary", tmp_path / "save")
    assert code == 0 and data["ranks"][0]["kernel_total_us"] == pytest.approx(111011.531)
    assert data["ranks"][0]["breakdown_basis"] == "analysis.db StepTraceTime"
