"""kernel_details.csv, read once for both commands: every row's width checked (``check``) and
the durations summed per (name, type) (``summary``), the result remembered in the cache.

kernel_details.csv is a quarter of a save path's bytes and the only large table either command
reads; reading it twice (once to count its rows, once to sum them) was half of ``summary``.

It can hold millions of rows: pyarrow parses it in blocks (csvrows.py), dictionary-encoding
names and types itself (18 % less CPU than text encoded afterwards), and each block is summed
by (name, type) with ``numpy.bincount`` over the two columns' codes (in row order, so a small
table sums exactly as a Python loop would); only one value per kernel per block reaches Python.
Acero's ``group_by`` did the same at +45 MB per process. Durations are parsed as ``float()``
would: a block whose text pyarrow's cast refuses (a TAB some CANN versions append is trimmed
first; N/A, garbage) is converted value by value in Python, and what is not a finite number is
left out. The header is judged with ``check``'s columns for the file, whose required ones are
the summary's too, so a refused header reads the same to both.
"""

import math
from dataclasses import dataclass, field
from typing import List, Optional

from .. import cache
from ..deps import need
from . import columns
from .csvrows import NotNumeric, RowReader
from .csvtable import CsvTable
from .errors import CorruptFile
from .numbers import TIME_BOUND_US

KIND = "kernel_details"


@dataclass
class KernelTable:
    """What the pass found. ``error``: why the file cannot be used (``CorruptFile``'s text);
    ``header`` is known when the error came after it."""

    header: Optional[List[str]] = None
    rows: int = 0
    bad_rows: int = 0
    first_bad: Optional[str] = None
    sums: list = field(default_factory=list)  # [name, type, total_us, count], names as written
    error: Optional[str] = None

    def as_cached(self):
        return {"header": self.header, "rows": self.rows, "bad_rows": self.bad_rows,
                "first_bad": self.first_bad, "sums": self.sums, "error": self.error}

    @classmethod
    def from_cached(cls, data):
        table = cls(**data)
        table.sums = [[str(n), None if k is None else str(k), float(t), int(c)]
                      for n, k, t, c in table.sums]
        return table


def read(path) -> KernelTable:
    """The pass's result for ``path``, from the cache when it holds it. OSError and anything
    not ``CorruptFile`` propagate (and are not remembered)."""
    return cache.remembered(path, KIND, _read, KernelTable.as_cached, KernelTable.from_cached)


def _read(path):
    result = KernelTable()
    try:
        table = CsvTable(path, columns.KERNEL_DETAILS)
        result.header = table.header
        reader = RowReader(path, table.body_start, table.width, [])
        try:
            raw = _sums(reader, table, numeric=True)
        except NotNumeric:
            reader = RowReader(path, table.body_start, table.width, [])
            raw = _sums(reader, table, numeric=False)
    except CorruptFile as exc:
        result.error = str(exc)
        return result
    result.rows, result.bad_rows, result.first_bad = reader.rows, reader.bad_rows, \
        reader.first_bad
    result.sums = [[name, kind, total, count] for (name, kind), (total, count) in raw.items()]
    return result


def _sums(reader, table, numeric):
    """{(name, type) as written: [total_us, count]}, in first-seen order. ``numeric``: the
    parser reads the durations as numbers (``NotNumeric`` when one is not); else as text,
    converted here as ``float()`` would. The parser's route needs numpy only: pyarrow.compute
    (85 ms to import, a third of a check's start) is for the text the exact pass gives."""
    numpy, pa = need("numpy"), need("pyarrow")

    name_at, type_at, duration_at = (table.index[name] for name in
                                     ("Name", "Type", "Duration(us)"))
    wanted = [p for p in (name_at, type_at, duration_at) if p is not None]
    coded = [p for p in (name_at, type_at) if p is not None]
    raw = {}
    for batch in reader.batches(wanted, coded, [duration_at] if numeric else []):
        durations = batch.column(str(duration_at))
        # float64, NaN where there is no value: only readable durations are summed (finite
        # and within read/numbers.py's bound: a 1e308 would make the sum infinite)
        values = (durations if numeric else _durations(durations)).to_numpy(
            zero_copy_only=False)
        with numpy.errstate(invalid="ignore"):
            finite = numpy.abs(values) <= TIME_BOUND_US  # NaN and infinity: False
        finite = None if finite.all() else finite
        names, kinds = batch.column(str(name_at)), \
            batch.column(str(type_at)) if type_at is not None else None
        if finite is not None and not pa.types.is_dictionary(names.type):
            # text from the exact pass: the kept rows are encoded (first seen among them)
            keep = pa.array(finite)
            names, values = names.filter(keep), values[finite]
            kinds = kinds.filter(keep) if kinds is not None else None
            finite = None
        names = _coded(names)
        kinds = _coded(kinds) if kinds is not None else None
        # one bin per (name, type) code: bincount adds in row order, as a loop would
        width = len(kinds.dictionary) if kinds is not None else 1
        codes = names.indices.to_numpy(zero_copy_only=False).astype(numpy.int64) * width
        if kinds is not None:
            codes += kinds.indices.to_numpy(zero_copy_only=False)
        if finite is not None:
            values, codes = values[finite], codes[finite]
        sums = numpy.bincount(codes, weights=values)
        counts = numpy.bincount(codes)
        name_text = names.dictionary.to_pylist()
        kind_text = kinds.dictionary.to_pylist() if kinds is not None else [None]
        for code in numpy.flatnonzero(counts).tolist():
            key = (name_text[code // width], kind_text[code % width])
            total = raw.get(key)
            if total is None:
                raw[key] = [float(sums[code]), int(counts[code])]
            else:
                total[0] += float(sums[code])
                total[1] += int(counts[code])
    return raw


def _coded(column):
    """The column as dictionary codes (the parser encodes it; the exact pass gives text)."""
    pa = need("pyarrow")

    if pa.types.is_dictionary(column.type):
        return column
    return need("pyarrow.compute").dictionary_encode(column)


def _durations(text):
    """Float64 durations from their text; null where ``float()`` would fail or not be finite."""
    pa, pc = need("pyarrow"), need("pyarrow.compute")

    try:
        return pc.cast(pc.utf8_trim_whitespace(text), pa.float64())
    except pa.ArrowInvalid:
        return pa.array([_float(v) for v in text.to_pylist()], pa.float64())


def _float(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
