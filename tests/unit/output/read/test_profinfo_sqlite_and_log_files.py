"""profiler_info, SQLite, log and expectation readers on real files and damaged copies."""

import json
import os
import shutil
import sqlite3

import pytest

from mindspeed_prof.output.check import expect
from mindspeed_prof.output.read import logscan, profinfo, sqlitecheck
from mindspeed_prof.output.read.errors import CorruptFile
from output_fixtures import corrupt, samples


def test_old_schema_profiler_info_reads_level_rank_and_options():
    info = profinfo.read_profiler_info(samples.sample_info(0))
    assert (info.rank, info.level, info.export_types) == (0, "level1", ())
    assert info.cpu and info.npu and info.memory and info.shapes and info.stack


def test_current_schema_values_and_string_rank_id(tmp_path):
    with open(samples.sample_info(1)) as handle:
        data = json.load(handle)
    data["rank_id"] = "7"
    data["config"]["experimental_config"].update(_profiler_level="Level_none",
                                                 _export_type=["text", "db"])
    data["config"]["common_config"]["activities"] = ["ProfilerActivity.CPU"]
    path = tmp_path / "profiler_info.json"
    path.write_text(json.dumps(data))
    info = profinfo.read_profiler_info(str(path))
    assert (info.rank_in_name, info.rank_id, info.rank) == (None, 7, 7)
    assert info.level == "level_none" and info.export_types == ("text", "db")
    assert info.cpu and not info.npu


@pytest.mark.parametrize("content, reason", [
    (b"", "empty file"), (b"{\"config\": ", "invalid JSON"), (b"[1, 2]", "not a JSON object"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_unusable_profiler_info_is_corrupt(tmp_path, content, reason):
    path = tmp_path / "profiler_info_0.json"
    path.write_bytes(content)
    with pytest.raises(CorruptFile, match=reason):
        profinfo.read_profiler_info(str(path))


def test_settings_prefer_profiler_info_and_note_what_the_manifest_asked_otherwise():
    info = profinfo.read_profiler_info(samples.sample_info(0))
    settings = expect.settings_for(info, {"profile_level": "level0", "profile_export_type": "db"})
    assert settings.level == "level1" and settings.export_types == ("db",)
    assert any("asked for level level0" in n for n in settings.notes)


def test_deliverables_follow_level_export_type_and_options():
    names = lambda s, rank=None: {e.name for e in expect.deliverables(s, rank) if e.required}
    assert names(expect.Settings(level="level0")) == {"trace_view.json", "kernel_details.csv",
                                                      "operator_details.csv"}
    assert "op_statistic.csv" in names(expect.Settings(level="level1"))
    assert names(expect.Settings(level="level_none", cpu=False)) == {"trace_view.json"}
    assert {"memory_record.csv", "operator_memory.csv"} <= names(expect.Settings(memory=True))
    assert names(expect.Settings(export_types=("db",)), 3) == {"ascend_pytorch_profiler_3.db"}


def test_real_sqlite_files_pass(tmp_path):
    for source in (samples.MSPROF_DB, samples.ANALYSIS_DB):
        info = sqlitecheck.check_sqlite(source)
        assert info.tables and info.page_size >= 512


@pytest.mark.parametrize("damage, reason", [
    (corrupt.zero_bytes, "empty file"),
    (lambda p: corrupt.truncate(p, 0.5), "truncated"),
    (lambda p: corrupt.write_bytes(p, b"not a database at all" * 10), "not an SQLite"),
])
def test_damaged_sqlite_is_corrupt(tmp_path, damage, reason):
    path = str(tmp_path / "ascend_pytorch_profiler_0.db")
    shutil.copy(samples.MSPROF_DB, path)
    damage(path)
    with pytest.raises(CorruptFile, match=reason):
        sqlitecheck.check_sqlite(path)


def test_empty_database_and_leftover_wal_are_reported(tmp_path):
    path = str(tmp_path / "analysis.db")
    sqlite3.connect(path).close()
    with pytest.raises(CorruptFile):
        sqlitecheck.check_sqlite(path)
    shutil.copy(samples.ANALYSIS_DB, path)
    with open(path + "-wal", "wb") as handle:
        handle.write(b"x" * 32)
    assert "never closed" in sqlitecheck.check_sqlite(path).notes[0]
    assert not os.path.exists(path + "-shm")  # checking left nothing behind


def test_error_lines_are_collected_from_parser_logs(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "profiler_1_2_KernelViewParser.log").write_text(
        "[t] [INFO] [P:1] fine\n[t] [ERROR] [P:2] Failed to generate kernel_details.csv\n"
        "Traceback ...\nRuntimeError: ERROR in parser\n")
    (logs / "profiler_1_2_TraceViewParser.log.1").write_bytes(b"[t] [ERROR] \xff bad bytes\n")
    lines, total = logscan.error_lines(str(tmp_path), limit=2)
    assert total == 3 and len(lines) == 2
    assert lines[0].startswith("logs/profiler_1_2_KernelViewParser.log:2: [t] [ERROR]")
