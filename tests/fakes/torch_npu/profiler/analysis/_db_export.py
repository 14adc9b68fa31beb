"""ascend_pytorch_profiler[_<rank>].db and analysis.db for export_type db.

A small but real subset of the tables msprof-analyze reads. Strings are interned
through STRING_IDS and times are epoch ns integers, as in the real files.
"""

import contextlib
import json
import os
import sqlite3

from torch_npu import npu
from .. import _constants as C
from ._run_data import RunData
from ._timeline import step_breakdown

_API_TYPES = {"acl": 20000, "model": 15000, "node": 10000, "communication": 5500, "runtime": 5000, "op": 50001,
              "queue": 50002, "trace": 50003, "mstx": 50004}


@contextlib.contextmanager
def _database(path: str):
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    try:
        yield db
        db.commit()
    finally:
        db.close()


class _Strings:
    def __init__(self):
        self.ids = {}

    def __call__(self, text) -> int:
        return self.ids.setdefault(str(text), len(self.ids))


def _db_name(rank) -> str:
    return "ascend_pytorch_profiler.db" if rank is None else f"ascend_pytorch_profiler_{rank}.db"


def _metadata_rows(data: RunData) -> list:
    path = os.path.join(data.run_dir, C.PROFILER_METADATA)
    metadata = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            metadata = json.load(handle)
    rows = [("SCHEMA_VERSION", "1.1.0"), ("SCHEMA_VERSION_MAJOR", "1"), ("SCHEMA_VERSION_MINOR", "1"),
            ("SCHEMA_VERSION_MICRO", "0")]
    return rows + [(key, json.dumps(value)) for key, value in metadata.items()]


def write_profiler_db(data: RunData, output_dir: str) -> None:
    os.makedirs(output_dir, exist_ok=True)
    sid = _Strings()
    with _database(os.path.join(output_dir, _db_name(data.config.rank))) as db:
        db.executescript("""
            CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
            CREATE TABLE ENUM_API_TYPE (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE META_DATA (name TEXT, value TEXT);
            CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
            CREATE TABLE NPU_INFO (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER, endTimeNs INTEGER);
            CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
                globalTaskId INTEGER PRIMARY KEY, globalPid INTEGER, taskType INTEGER, contextId INTEGER,
                streamId INTEGER, taskId INTEGER, modelId INTEGER);
            CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockNum INTEGER,
                mixBlockNum INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER,
                inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER,
                outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER);
            CREATE TABLE CANN_API (startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER,
                connectionId INTEGER, name INTEGER);
            CREATE TABLE PYTORCH_API (startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER,
                name INTEGER, sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER,
                inputShapes INTEGER, callchainId INTEGER, type INTEGER);
            CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
        """)
        db.executemany("INSERT INTO ENUM_API_TYPE VALUES (?, ?)", [(v, k) for k, v in _API_TYPES.items()])
        db.executemany("INSERT INTO META_DATA VALUES (?, ?)", _metadata_rows(data))
        rank = data.config.rank
        db.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?, ?)", (int(rank) if rank is not None else -1,
                                                                 data.device_id))
        if data.device_id >= 0:
            db.execute("INSERT INTO NPU_INFO VALUES (?, ?)", (data.device_id, npu.DEVICE_NAME))
        spans = [(op["ts_ns"], op["ts_ns"] + op["dur_ns"]) for op in data.ops] + [
            (k["start_ns"], k["start_ns"] + k["dur_ns"]) for k in data.kernels]
        if spans:
            db.execute("INSERT INTO SESSION_TIME_INFO VALUES (?, ?)",
                       (min(s for s, _ in spans), max(e for _, e in spans)))
        global_pid = (data.pid << 32) | max(data.device_id, 0)
        for task_id, kernel in enumerate(sorted(data.kernels, key=lambda k: k["start_ns"])):
            db.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
                kernel["start_ns"], kernel["start_ns"] + kernel["dur_ns"], data.device_id, kernel["cid"], task_id,
                global_pid, sid(kernel["task_type"]), 4294967295, kernel["stream_id"], kernel["task_id"],
                4294967295))
            db.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                sid(kernel["name"]), task_id, kernel["block_dim"], 0, sid(kernel["task_type"]),
                sid(kernel["op_type"]), sid(kernel["input_formats"]), sid(kernel["input_dtypes"]),
                sid(kernel["input_shapes"]), sid(kernel["output_formats"]), sid(kernel["output_dtypes"]),
                sid(kernel["output_shapes"]), sid(""), sid("dynamic"), sid("NO")))
        for api in data.apis:
            db.execute("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)", (
                api["start_ns"], api["end_ns"], _API_TYPES.get(api["level"], 20000),
                (data.pid << 32) | api["tid"], api["cid"], sid(api["name"])))
        for op in data.ops:
            db.execute("INSERT INTO PYTORCH_API VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
                str(op["ts_ns"]), str(op["ts_ns"] + op["dur_ns"]), (data.pid << 32) | op["tid"], op["cid"],
                sid(op["name"]), op.get("seq", -1), op.get("fwd_tid", 0), None, None, None, 50001))
        db.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?)", data.steps)
        db.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(i, s) for s, i in sid.ids.items()])
    _write_analysis_db(data, output_dir)


def _write_analysis_db(data: RunData, output_dir: str) -> None:
    """Created only when there are step-trace rows, like the lazily created real file."""
    if not data.kernels or data.config.level == C.LEVEL_NONE:
        return
    windows = data.steps or [(None, None, None)]
    rows = []
    for step_id, start, end in windows:
        inside = [k for k in data.kernels if start is None or start <= k["start_ns"] <= end]
        if inside:
            f = step_breakdown(inside, start)
            rows.append((data.device_id, None if step_id is None else str(step_id), f["computing"], 0.0, 0.0, 0.0,
                         f["free"], f["stage"], 0.0, 0.0, f["preparing"]))
    if not rows:
        return
    with _database(os.path.join(output_dir, "analysis.db")) as db:
        db.execute("""CREATE TABLE StepTraceTime (deviceId INTEGER, step TEXT, computing NUMERIC,
            communication_not_overlapped NUMERIC, overlapped NUMERIC, communication NUMERIC, free NUMERIC,
            stage NUMERIC, bubble NUMERIC, communication_not_overlapped_and_exclude_receive NUMERIC,
            preparing NUMERIC)""")
        db.executemany("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
