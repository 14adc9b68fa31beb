"""Read torch_npu / CANN CSV files by column name, fast, in constant memory.

Headers differ between torch_npu and CANN releases (``Block Dim`` / ``Block Num``, with or
without ``Device_id``, ``Step Id`` / ``Step ID``...), so a column is found by any of its names,
compared without case, spaces or underscores (as msprof-analyze does), never by position.

Every row is checked for its width (csvrows.py), which is what catches truncated and damaged
files.
"""

import csv
import math
import os
from dataclasses import dataclass

from .csvrows import RowReader
from .errors import CorruptFile

MAX_HEADER_BYTES = 1 << 20
MISSING = ("", "N/A", "NA", "n/a", "None", "null")
UINT32_MAX = 4294967295


@dataclass(frozen=True)
class Column:
    """A column: its canonical name, the other names it has had, whether a file must have it."""

    name: str
    aliases: tuple = ()
    required: bool = True

    def keys(self):
        return {normalise(n) for n in (self.name, *self.aliases)}


def normalise(name):
    return "".join(ch for ch in name.strip().lstrip("\ufeff").lower() if ch not in " _\t")


def number(text):
    """A float from a CSV value ('12.5\\t' included), or None for N/A, empty or garbage."""
    if text is None:
        return None
    text = text.strip()
    if text in MISSING:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class CsvTable:
    """One CSV file: its header, where each wanted column is, and an iterator over the rows."""

    def __init__(self, path, columns):
        self.path = path
        self.columns = tuple(columns)
        self.size = os.path.getsize(path)
        if self.size == 0:
            raise CorruptFile("empty file (0 bytes)")
        self.header, self._body_start = _read_header(path)
        self.width = len(self.header)
        keys = [normalise(h) for h in self.header]
        self.index = {}
        for column in self.columns:
            wanted = column.keys()
            self.index[column.name] = next((i for i, k in enumerate(keys) if k in wanted), None)
        missing = [c.name for c in self.columns if c.required and self.index[c.name] is None]
        if missing:
            raise CorruptFile(f"no column {', '.join(repr(m) for m in missing)} in the header "
                              f"(it has: {', '.join(self.header[:12])}"
                              f"{', ...' if len(self.header) > 12 else ''})")

    @property
    def body_start(self):
        """Byte offset of the first row."""
        return self._body_start

    def has(self, name):
        return self.index.get(name) is not None

    def header_name(self, name):
        i = self.index.get(name)
        return None if i is None else self.header[i].strip()

    def rows(self):
        """Tuples of the wanted columns' raw values (None where the file lacks the column)."""
        positions = [self.index[c.name] for c in self.columns]
        self._reader = RowReader(self.path, self._body_start, self.width, positions)
        yield from self._reader

    def count_rows(self):
        """Check every row's width (fast: no row is split); returns how many rows there are."""
        self._reader = RowReader(self.path, self._body_start, self.width, [])
        return self._reader.count()

    @property
    def malformed(self):
        """(rows skipped for their width, the first one) after rows() / count_rows()."""
        reader = getattr(self, "_reader", None)
        return (reader.bad_rows, reader.first_bad) if reader else (0, None)


def _read_header(path):
    with open(path, "rb") as handle:
        raw = handle.readline(MAX_HEADER_BYTES)
    if not raw.endswith(b"\n"):
        if len(raw) >= MAX_HEADER_BYTES:
            raise CorruptFile("no line end in the first MB: not a CSV table")
        raise CorruptFile("header only, and cut short (no line end): truncated")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CorruptFile("the header is not UTF-8 text") from None
    if "\x00" in text:
        raise CorruptFile("NUL bytes in the header")
    header = next(csv.reader([text]), [])
    if len(header) < 2 or not any(h.strip() for h in header):
        raise CorruptFile(f"no CSV header (first line: {text.strip()[:80]!r})")
    return [h.strip() for h in header], len(raw)


