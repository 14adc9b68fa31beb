"""Is an ``ascend_pytorch_profiler*.db`` / ``analysis.db`` a whole, readable SQLite file?

The header alone catches most damage (wrong magic, a file shorter than the page count it
declares); then the schema is read, and small files get ``PRAGMA quick_check``. Which tables a
capture's database must hold is the capture's rule (``check/expect.py``), judged on ``tables``.

The file is opened read-only and immutable: checking never writes beside the profile, not even
the ``-wal``/``-shm`` files SQLite makes for a database in WAL mode (torch_npu's is; so is one
that MindStudio Insight has open, which leaves an empty ``-wal`` and a ``-shm`` there). Those
side files are SQLite's, not deliverables (``is_side_file``): an empty one means nothing, a
``-wal`` with pages holds changes the writer never merged into the main file (it is still
running, or was killed), which an immutable read cannot see; the note says so.
"""

import os
import sqlite3
import urllib.parse
from dataclasses import dataclass, field

from .errors import CorruptFile
from .regular import check_regular

MAGIC = b"SQLite format 3\x00"
# quick_check reads every page; above this size it would dominate ``check``'s run time.
QUICK_CHECK_MAX_BYTES = 256 << 20
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


def is_side_file(name):
    """``x.db-wal``, ``x.db-shm``, ``x.db-journal``: SQLite's own files beside a database."""
    return name.endswith(tuple(".db" + s for s in SIDE_SUFFIXES))


@dataclass
class DbInfo:
    tables: list = field(default_factory=list)
    pages: int = 0
    page_size: int = 0
    notes: list = field(default_factory=list)
    then: object = None  # what check_sqlite's ``then`` returned


def connect(path):
    """A read-only, immutable connection: SQLite writes nothing beside the file, not even the
    ``-wal``/``-shm`` of a WAL-mode database. ``CorruptFile`` when it cannot be opened, or is
    no regular file (SQLite would wait on a FIFO's read)."""
    check_regular(path)
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro&immutable=1"
    try:
        return sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise CorruptFile(f"SQLite cannot open it: {exc}") from None


def check_sqlite(path, then=None):
    """A ``DbInfo`` for a usable database; raises ``CorruptFile`` with the reason otherwise.
    ``then(db)``: run on the same connection once the file passed (``info.then`` holds what
    it returned), so what a reader takes from it costs no second open."""
    size = os.path.getsize(path)
    pending = _pending_side_file(path)
    if size == 0:
        raise CorruptFile("empty file (0 bytes)" + (f"; {pending}" if pending else ""))
    with open(path, "rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(MAGIC):
        raise CorruptFile("not an SQLite database (bad header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise CorruptFile(f"damaged header: page size {page_size}")
    info = DbInfo(page_size=page_size)
    pages = int.from_bytes(header[28:32], "big")
    # the in-header page count is trusted only when its version stamp matches the file's
    if pages and header[24:28] == header[92:96]:
        info.pages = pages
        if pages * page_size > size:
            raise CorruptFile(f"truncated: the header says {pages} pages of {page_size} bytes "
                              f"({pages * page_size} bytes), the file has {size}")
    if size % page_size:
        raise CorruptFile(f"truncated: {size} bytes is not a whole number of "
                          f"{page_size}-byte pages")
    if pending:
        info.notes.append(pending)
    db = connect(path)
    try:
        info.tables = sorted(row[0] for row in db.execute(
            "select name from sqlite_master where type = 'table'"))
        if size <= QUICK_CHECK_MAX_BYTES:
            result = [row[0] for row in db.execute("pragma quick_check(5)")]
            if result != ["ok"]:
                raise CorruptFile("SQLite quick_check: " + "; ".join(map(str, result)))
        if then is not None and info.tables:
            info.then = then(db)
    except sqlite3.Error as exc:
        raise CorruptFile(f"SQLite cannot read it: {exc}") from None
    finally:
        db.close()
    if not info.tables and not pending:
        raise CorruptFile("no tables: the database was created but never filled")
    return info


def _pending_side_file(path):
    """Why the main file may lack the writer's last changes, or None."""
    for suffix, what in (("-wal", "its write-ahead log"), ("-journal", "a rollback journal")):
        side = path + suffix
        try:
            size = os.path.getsize(side)
        except OSError:
            continue
        if size > 0:
            return (f"{os.path.basename(side)} ({what}, {size} bytes) is beside it: the writer "
                    f"never closed the database (still running, or killed), so its last "
                    f"changes are not in the main file, which is what was read")
    return None
