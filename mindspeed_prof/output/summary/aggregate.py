"""Totals per kernel (kernel_details.csv) and per op type (op_statistic.csv).

kernel_details.csv can hold millions of rows: pyarrow parses it in blocks (csvrows.py),
dictionary-encoding names and types itself (18 % less CPU than text encoded afterwards), and
each block is summed by (name, type) with ``numpy.bincount`` over the two columns' codes (in
row order, so a small table sums exactly as a Python loop would); only one value per kernel
per block reaches Python. Acero's ``group_by`` did the same at +45 MB per process. Durations
are parsed as ``float()`` would: a block whose text pyarrow's cast refuses (a TAB some CANN
versions append is trimmed first; N/A, garbage) is converted value by value in Python, and
what is not a finite number is left out."""

import math
from dataclasses import dataclass

from ..read import columns
from ..read.csvrows import RowReader, setup_pyarrow
from ..read.csvtable import CsvTable, number


@dataclass
class Item:
    """A kernel, op type or torch operator, aggregated."""

    name: str
    kind: str = None  # kernel Type, op Core Type or trace category
    total_us: float = 0.0
    count: int = 0

    def as_dict(self, whole):
        return {"name": self.name, "type": self.kind, "total_us": self.total_us,
                "count": self.count, "mean_us": self.total_us / self.count if self.count else 0.0,
                "share_pct": 100.0 * self.total_us / whole if whole else 0.0}


def merge_into(target, items):
    for key, item in items.items():
        agg = target.get(key)
        if agg is None:
            target[key] = Item(item.name, item.kind, item.total_us, item.count)
        else:
            agg.total_us += item.total_us
            agg.count += item.count


def load_parsers():
    """Import what the summary reads with and set up pyarrow's compute functions (~45 MB the
    first time one runs), before a fork: the workers share it."""
    import msgspec  # noqa: F401
    import numpy  # noqa: F401
    import pyarrow.compute as pc
    import pyarrow.csv  # noqa: F401

    pa = setup_pyarrow()
    pc.dictionary_encode(pa.array(["a"]))


def kernel_totals(path):
    """{(name, type): Item} over every row; raises ``CorruptFile`` for an unusable file."""
    import numpy
    import pyarrow.compute as pc

    table = CsvTable(path, columns.KERNEL_SUMMARY)
    name_at, type_at, duration_at = (table.index[c.name] for c in table.columns)
    wanted = [p for p in (name_at, type_at, duration_at) if p is not None]
    reader = RowReader(path, table.body_start, table.width, wanted)
    raw = {}  # keyed by the file's own (name, type): stripped once per key, not per row
    coded = [p for p in (name_at, type_at) if p is not None]
    for batch in reader.batches(wanted, coded):
        durations = _durations(batch.column(str(duration_at)))
        keep = _finite(durations)
        names = _coded(pc.filter(batch.column(str(name_at)), keep))
        kinds = _coded(pc.filter(batch.column(str(type_at)), keep)) \
            if type_at is not None else None
        values = pc.filter(durations, keep).to_numpy(zero_copy_only=False)
        # one bin per (name, type) code: bincount adds in row order, as a loop would
        width = len(kinds.dictionary) if kinds is not None else 1
        codes = names.indices.to_numpy(zero_copy_only=False).astype(numpy.int64) * width
        if kinds is not None:
            codes += kinds.indices.to_numpy(zero_copy_only=False)
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
    kernels = {}
    for (name, kind), (total_us, count) in raw.items():
        key = (name.strip(), kind.strip() if kind is not None else None)
        item = kernels.get(key)
        if item is None:
            item = kernels[key] = Item(key[0], key[1])
        item.total_us += total_us
        item.count += count
    return kernels


def _coded(column):
    """The column as dictionary codes (the parser encodes it; the exact pass gives text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)


def _durations(text):
    """Float64 durations from their text; null where ``float()`` would fail or not be finite."""
    import pyarrow as pa
    import pyarrow.compute as pc

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


def _finite(values):
    import pyarrow.compute as pc

    return pc.fill_null(pc.is_finite(values), False)


def op_type_totals(path):
    types = {}
    for op_type, core, count, total, *_ in CsvTable(path, columns.OP_STATISTIC).rows():
        total_us, calls = number(total), number(count)
        if total_us is None:
            continue
        key = (op_type.strip(), core.strip() if core is not None else None)
        item = types.get(key)
        if item is None:
            item = types[key] = Item(key[0], key[1])
        item.total_us += total_us
        item.count += int(calls or 0)
    return types


def types_from_kernels(kernels):
    types = {}
    for item in kernels.values():
        if item.kind and item.kind != "N/A":
            agg = types.setdefault((item.kind, None), Item(item.kind))
            agg.total_us += item.total_us
            agg.count += item.count
    return types
