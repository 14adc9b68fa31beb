"""`check` on db exports: a database another process has open is fine, one that lost the tables
its export type must hold is not, and checking never writes beside the profile."""

import hashlib
import os
import sqlite3
import subprocess
import sys

from helpers.cli import rank_entry, run_cli_json
from output_fixtures import samples

OUT = samples.OUTPUT


def database(capture):
    return os.path.join(capture, OUT, "ascend_pytorch_profiler_0.db")


def problems(entry):
    return " | ".join(entry["problems"] + [p for r in entry["runs"] for p in r["problems"]])


def snapshot(folder):
    return {n: hashlib.sha256(open(os.path.join(folder, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(folder))}


def test_the_real_db_export_is_a_wal_mode_database_and_valid(tmp_path, capsys):
    capture = samples.db_capture(tmp_path, 0)
    with open(database(capture), "rb") as handle:
        assert handle.read(20)[18:20] == b"\x02\x02"  # torch_npu writes it in WAL mode
    code, report = run_cli_json(capsys, "check", tmp_path)
    assert code == 0 and rank_entry(report, 0)["verdict"] == "valid"


def test_a_database_another_process_has_open_is_valid_and_left_as_it_was(tmp_path, capsys):
    # MindStudio Insight (or any reader) holding it open leaves an empty -wal and a -shm
    capture = samples.db_capture(tmp_path, 0)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "db = sqlite3.connect(sys.argv[1]); db.execute('select count(*) from TASK').fetchall()\n"
         "print('open', flush=True); time.sleep(120)\n", database(capture)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        out = os.path.join(capture, OUT)
        assert os.path.getsize(database(capture) + "-wal") == 0
        assert os.path.exists(database(capture) + "-shm")
        before = snapshot(out)
        code, report = run_cli_json(capsys, "check", tmp_path)
        entry = rank_entry(report, 0)
        assert code == 0 and entry["verdict"] == "valid", problems(entry)
        checked = [f["name"] for f in entry["runs"][0]["files"]]
        assert not any(n.endswith(("-wal", "-shm")) for n in checked)  # SQLite's, not ours
        assert snapshot(out) == before
    finally:
        holder.kill()
        holder.wait()


def test_a_database_whose_core_tables_were_dropped_is_incomplete(tmp_path, capsys):
    capture = samples.db_capture(tmp_path, 0)
    db = sqlite3.connect(database(capture))
    db.executescript("DROP TABLE TASK; DROP TABLE META_DATA; DROP TABLE PYTORCH_API;")
    db.close()
    code, report = run_cli_json(capsys, "check", tmp_path)
    entry = rank_entry(report, 0)
    text = problems(entry)
    assert code == 1 and entry["verdict"] == "incomplete"
    assert "lacks tables it must hold: META_DATA (torch_npu writes it into every db export)" \
        in text
    assert "TASK (NPU activity at level1: the kernels)" in text
    assert "PYTORCH_API (CPU activity: the torch operators)" in text


def test_a_level_none_db_without_kernels_is_not_asked_for_them(tmp_path, capsys):
    capture = samples.db_capture(tmp_path, 0)
    info = os.path.join(capture, "profiler_info_0.json")
    with open(info) as handle:
        text = handle.read().replace('"Level1"', '"Level_none"')
    with open(info, "w") as handle:
        handle.write(text)
    db = sqlite3.connect(database(capture))
    db.executescript("DROP TABLE TASK; DROP TABLE COMPUTE_TASK_INFO;")
    db.close()
    code, report = run_cli_json(capsys, "check", tmp_path)
    assert code == 0, problems(rank_entry(report, 0))


def test_a_writer_killed_before_merging_its_wal_is_said_and_its_tables_judged(tmp_path, capsys):
    capture = samples.db_capture(tmp_path, 0)
    path = database(capture)
    os.remove(path)
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "db = sqlite3.connect(sys.argv[1]); db.execute('pragma journal_mode=wal')\n"
         "db.execute('create table META_DATA (name, value)'); db.commit()\n"
         "print('written', flush=True); time.sleep(120)\n", path],
        stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "written"
    writer.kill()  # as SIGKILL would: its table is in the -wal only
    writer.wait()
    code, report = run_cli_json(capsys, "check", tmp_path)
    text = problems(rank_entry(report, 0))
    assert code == 1 and rank_entry(report, 0)["verdict"] == "incomplete"
    assert "ascend_pytorch_profiler_0.db-wal (its write-ahead log" in text
    assert "never closed the database" in text and "lacks tables" in text
