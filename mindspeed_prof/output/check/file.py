"""Check one output file by what its name promises: a trace, a table, a database.

Every failure becomes a ``FileCheck`` with status ``corrupt`` and a reason; nothing a file
contains can raise out of here (that is what lets ``check`` promise a verdict for any input).
"""

import json
import os
import sqlite3
import stat
import zlib
from dataclasses import dataclass, field
from typing import Optional

from .. import cache
from ..deps import MissingDependency, need
from ..read import columns, csvrows, csvtable, dbsummary, kernels, sqlitecheck, tracescan
from ..read.errors import CorruptFile
from ..read.regular import skipped

OK, CORRUPT, MISSING = "ok", "corrupt", "missing"
# Small JSON files (communication*.json) are decoded whole; above this only their ends are checked.
WHOLE_JSON_MAX_BYTES = 32 << 20
TRACE_FILES = ("trace_view.json",)
KERNEL_DETAILS = "kernel_details.csv"
PROFILER_DB = "ascend_pytorch_profiler"
_READ_ERRORS = (CorruptFile, OSError, ValueError, RecursionError, EOFError, sqlite3.Error,
                zlib.error, MemoryError)


@dataclass
class FileCheck:
    name: str
    status: str
    size: Optional[int] = None
    detail: Optional[str] = None
    why: Optional[str] = None  # why the file is expected, when it is
    facts: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data):
        """The inverse of ``as_dict`` (the facts it leaves out stay out)."""
        facts = {k: v for k, v in data.items()
                 if k not in ("name", "status", "size", "detail", "expected_because")}
        return cls(data["name"], data["status"], data.get("size"), data.get("detail"),
                   data.get("expected_because"), facts)

    def as_dict(self):
        data = {"name": self.name, "status": self.status, "size": self.size}
        if self.detail:
            data["detail"] = self.detail
        if self.why:
            data["expected_because"] = self.why
        data.update({k: v for k, v in self.facts.items() if k not in ("header", "scan")})
        return data


def load_parsers():
    """Import what ``check_file`` parses with (before a fork: the workers share it)."""
    for module in ("numpy", "pyarrow.csv", "simdjson"):
        need(module)
    csvrows.setup_pyarrow()  # pyarrow.compute is left out: only odd tables need it


def remembered(path, name=None):
    """Whether checking ``path`` now takes only a look in the cache (no pool for it)."""
    name = name or os.path.basename(path)
    kind = kernels.KIND if name == KERNEL_DETAILS else tracescan.KIND \
        if _is_trace(name) else None
    return kind is not None and cache.worth_caching(path) and cache.load(path, kind) is not None


def _is_trace(name):
    return name in TRACE_FILES or name.endswith(".pt.trace.json") \
        or name.endswith(".pt.trace.json.gz")


def check_file(path, name=None):
    name = name or os.path.basename(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        return FileCheck(name, MISSING, detail=exc.strerror)
    if not stat.S_ISREG(info.st_mode):  # a FIFO would hang the read, /dev/zero never end
        return FileCheck(name, CORRUPT, detail=skipped(info.st_mode))
    size = info.st_size
    result = FileCheck(name, OK, size=size)
    try:
        if size == 0 and name != "analyse.done":
            raise CorruptFile("empty file (0 bytes)")
        if name.endswith(".csv"):
            _csv(path, name, result)
        elif _is_trace(name):
            _trace(path, result)
        elif name.endswith(".json"):
            _json(path, size, result)
        elif name.endswith(".db"):
            info = _db(path, name)
            result.facts["tables"] = len(info.tables)
            result.facts["table_names"] = info.tables
            if info.notes:
                result.detail = "; ".join(info.notes)
    except MissingDependency:
        raise  # not the file's fault: the command stops and names the package
    except _READ_ERRORS as exc:
        result.status, result.detail = CORRUPT, _reason(exc)
    except Exception as exc:  # noqa: BLE001 - a verdict, never a traceback
        result.status = CORRUPT
        result.detail = (f"could not be checked ({type(exc).__name__}: {exc}); "
                         f"this is a mindspeed_prof bug, please report it")
    return result


def _reason(exc):
    if isinstance(exc, MemoryError):
        return "out of memory while reading it"
    if isinstance(exc, OSError):
        return f"unreadable: {exc.strerror or exc}"
    return str(exc) or type(exc).__name__


def _db(path, name):
    """The database's check; a profiler database's kernel sums come from the same connection
    and are remembered for ``summary`` (with no cache, nobody would take them)."""
    if not (name.startswith(PROFILER_DB) and cache.worth_caching(path)):
        return sqlitecheck.check_sqlite(path)
    before = cache.stamp(path)
    info = sqlitecheck.check_sqlite(path, then=dbsummary.kernel_sums)
    if info.then is not None:
        dbsummary.remember(path, before, info.then)
    return info


def _csv(path, name, result):
    # one pass with summary's sums, remembered for it (with no cache, nobody would take them)
    if name == KERNEL_DETAILS and cache.worth_caching(path):
        table = kernels.read(path)
        if table.header is not None:
            result.facts["header"] = table.header
        if table.error is not None:
            raise CorruptFile(table.error)
        result.facts["rows"] = table.rows
        bad, first = table.bad_rows, table.first_bad
    else:
        table = csvtable.CsvTable(path, columns.for_file(name))
        result.facts["header"] = table.header
        result.facts["rows"] = table.count_rows()
        bad, first = table.malformed
    if bad:
        result.facts["malformed_rows"] = bad
        result.detail = f"{bad} row{'s' if bad > 1 else ''} skipped ({first})"


def _trace(path, result):
    scan = tracescan.remembered_scan(path)
    if scan.events == 0:
        raise CorruptFile("no events: an empty trace")
    result.facts["events"] = scan.events
    result.facts["steps"] = sorted(scan.steps)
    result.facts["scan"] = scan
    if scan.unreadable:  # recorded steps whose time is no finite number: said and counted
        result.facts["unreadable_step_times"] = len(scan.unreadable)
        result.detail = scan.unreadable_note()


def _json(path, size, result):
    if size <= WHOLE_JSON_MAX_BYTES:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
        if not data and data != 0:
            raise CorruptFile("holds no data (empty JSON value)")
        return
    with open(path, "rb") as handle:
        head = handle.read(64).lstrip()
        handle.seek(max(0, size - 64))
        tail = handle.read().rstrip()
    pairs = {b"{": b"}", b"[": b"]"}
    if not head[:1] in pairs or not tail.endswith(pairs[head[:1]]):
        raise CorruptFile("truncated JSON: it does not end where it began")
    result.detail = f"{size >> 20} MB: only its ends were checked"
