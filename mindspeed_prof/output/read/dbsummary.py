"""A db export's numbers: what the text export's tables would say, read from its SQLite files.

``--profile-export-type db`` leaves ``ascend_pytorch_profiler_{R}.db`` and ``analysis.db``
instead of CSVs (shared/reference/ascend_output_formats.md §5.12-5.13). They hold the same
data the text export is made from, so the same numbers come out:

- kernel_details.csv = CANN's tasks: ``COMPUTE_TASK_INFO`` joined to ``TASK`` on
  ``globalTaskId`` (name, op type and core through ``STRING_IDS``; duration ``endNs -
  startNs``, ns), plus one row per ``COMMUNICATION_OP`` (core ``HCCL``), as msprof-analyze's
  own db readers join them (``compare_tools/.../npu_profiling_db_parser.py``);
- op_statistic.csv (level1+) = those compute tasks summed by op type and core, HCCL left out
  (checked on the real samples of one job: every row of its op_statistic.csv is that sum);
- step_trace_time.csv = ``analysis.db``'s ``StepTraceTime`` (µs, as the CSV).

Sums are made by SQLite, one row per (name, type, core): a database of millions of tasks costs
no Python per task. Opened read-only and immutable (``sqlitecheck.connect``): nothing is ever
written beside the profile. ``check`` computes the kernel sums on the connection it validated
the file with and the cache remembers them, so ``summary`` after ``check`` reads no database.
"""

import sqlite3
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import cache
from . import sqlitecheck
from .errors import CorruptFile

KIND = "db_summary"
HCCL = "HCCL"
UNKNOWN = "N/A"  # a string id STRING_IDS lacks: what the CSVs write for an unknown value

_GROUPED = """
    SELECT n.value, o.value, c.value, g.core, g.count, g.total FROM ({inner}) AS g
    LEFT JOIN STRING_IDS AS n ON n.id = g.name
    LEFT JOIN STRING_IDS AS o ON o.id = g.op
    LEFT JOIN STRING_IDS AS c ON c.id = g.core
    ORDER BY g.first"""
_COMPUTE = """
    SELECT k.name AS name, k.opType AS op, k.taskType AS core, count(*) AS count,
           sum(t.endNs - t.startNs) AS total, min(t.startNs) AS first
    FROM COMPUTE_TASK_INFO AS k JOIN TASK AS t ON t.globalTaskId = k.globalTaskId
    GROUP BY k.name, k.opType, k.taskType"""
_COMMUNICATION = """
    SELECT opName AS name, opType AS op, -1 AS core, count(*) AS count,
           sum(endNs - startNs) AS total, min(startNs) AS first
    FROM COMMUNICATION_OP GROUP BY opName, opType"""
STEP_COLUMNS: Tuple[Tuple[str, Optional[str]], ...] = (("step", None), ("computing", "Computing"),
                ("communication_not_overlapped", "Communication(Not Overlapped)"),
                ("overlapped", "Overlapped"), ("communication", "Communication"),
                ("free", "Free"), ("stage", "Stage"), ("bubble", "Bubble"),
                ("communication_not_overlapped_and_exclude_receive",
                 "Communication(Not Overlapped and Exclude Receive)"),
                ("preparing", "Preparing"))


@dataclass
class DbKernels:
    """``sums``: [name, type, core, total_us, count] per kernel, in order of first start;
    ``error``: why the database cannot give them (``CorruptFile``'s text)."""

    sums: List[list] = field(default_factory=list)
    error: Optional[str] = None

    def as_cached(self):
        return {"sums": self.sums, "error": self.error}

    @classmethod
    def from_cached(cls, data):
        return cls(sums=[[str(n), str(t), str(c), float(us), int(count)]
                         for n, t, c, us, count in data["sums"]], error=data["error"])


def kernel_sums(db: sqlite3.Connection) -> DbKernels:
    """The kernels of an open profiler database (``check`` calls it on its own connection)."""
    tables = {row[0] for row in db.execute("select name from sqlite_master where type='table'")}
    wanted = {"STRING_IDS", "TASK", "COMPUTE_TASK_INFO"}
    if not wanted <= tables:
        return DbKernels(error=f"no kernels: it lacks {', '.join(sorted(wanted - tables))}")
    inner = _COMPUTE + (f" UNION ALL {_COMMUNICATION}" if "COMMUNICATION_OP" in tables else "")
    sums: Dict[tuple, list] = {}
    try:
        for name, op, core, core_id, count, total in db.execute(_GROUPED.format(inner=inner)):
            key = (_text(name), _text(op), HCCL if core_id == -1 else _text(core))
            entry = sums.get(key)
            if entry is None:
                sums[key] = [*key, (total or 0) / 1000.0, int(count)]
            else:
                entry[3] += (total or 0) / 1000.0
                entry[4] += int(count)
    except sqlite3.Error as exc:
        return DbKernels(error=f"its kernels cannot be read: {exc}")
    return DbKernels(sums=list(sums.values()))


def read(path: str) -> DbKernels:
    """The kernel sums of ``path``, from the cache when it holds them."""
    before = cache.stamp(path) if cache.worth_caching(path) else None
    if before is not None:
        hit = cache.load(path, KIND)
        if isinstance(hit, dict):
            try:
                return DbKernels.from_cached(hit)
            except (KeyError, TypeError, ValueError):
                pass  # an entry of another shape: read the file
    try:
        db = sqlitecheck.connect(path)
    except CorruptFile as exc:
        return DbKernels(error=str(exc))
    try:
        result = kernel_sums(db)
    finally:
        db.close()
    cache.store(path, before, {KIND: result.as_cached()})
    return result


def remember(path: str, before, result: DbKernels) -> None:
    """What ``check`` found on its connection, for ``summary``."""
    cache.store(path, before, {KIND: result.as_cached()})


def step_rows(path: str) -> List[dict]:
    """``analysis.db``'s StepTraceTime as step_trace_time.csv's rows: {"step", "device",
    component: us}; raises ``CorruptFile`` when it cannot be read."""
    db = sqlitecheck.connect(path)
    try:
        columns = {row[1] for row in db.execute("pragma table_info(StepTraceTime)")}
        if not columns:
            raise CorruptFile("no StepTraceTime table")
        present = [(column, name) for column, name in STEP_COLUMNS if column in columns]
        device = ", deviceId" if "deviceId" in columns else ""
        select = ", ".join(column for column, _ in present)
        rows = db.execute(f"select {select}{device} from StepTraceTime").fetchall()
    except sqlite3.Error as exc:
        raise CorruptFile(f"StepTraceTime cannot be read: {exc}") from None
    finally:
        db.close()
    result = []
    for row in rows:
        entry = {"step": None, "device": _int(row[-1]) if device else None}
        for (column, name), value in zip(present, row):
            if name is None:  # the step column
                entry["step"] = _int(value)
            else:
                entry[name] = _float(value)
        result.append(entry)
    return result


def _text(value):
    return UNKNOWN if value is None else str(value)


def _int(value):
    number = _float(value)
    return int(number) if number is not None else None


def _float(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None
