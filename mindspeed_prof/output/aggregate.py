"""Totals per kernel (kernel_details.csv) and per op type (op_statistic.csv).

kernel_details.csv can hold millions of rows; a large one is cut into byte ranges at line
starts and summed by several processes (its fields never span lines, so any line start is a
record start). Should a range meet anything odd, the file is read again in one pass, which
is the one that reports exact line numbers.
"""

import math
import os
from dataclasses import dataclass

from . import columns, parallel
from .csvrows import RowReader
from .csvtable import CsvTable, number
from .errors import CorruptFile

RANGE_BYTES = 64 << 20


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


def kernel_totals(path):
    """{(name, type): Item} over every row; raises ``CorruptFile`` for an unusable file."""
    table = CsvTable(path, columns.KERNEL_SUMMARY)
    positions = [table.index[c.name] for c in table.columns]
    size = os.path.getsize(path)
    ranges = _ranges(path, table.body_start, size)
    workers = parallel.workers_for(size, len(ranges))
    raw = None
    if workers > 1:
        calls = [(path, start, end, table.width, positions) for start, end in ranges]
        try:
            parts = parallel.run(_range_totals, calls, workers)
        except CorruptFile:
            parts = None
        if parts and all(bad == 0 for _, bad, _ in parts) and sum(n for _, _, n in parts):
            raw = {}
            for part, _, _ in parts:
                for key, (total, count) in part.items():
                    agg = raw.setdefault(key, [0.0, 0])
                    agg[0] += total
                    agg[1] += count
    if raw is None:
        raw = _sum_rows(table.rows())
    kernels = {}
    for (name, kind), (total_us, count) in raw.items():
        key = (name.strip(), kind.strip() if kind is not None else None)
        item = kernels.get(key)
        if item is None:
            item = kernels[key] = Item(key[0], key[1])
        item.total_us += total_us
        item.count += count
    return kernels


def _sum_rows(rows):
    raw = {}  # keyed by the row's own (name, type) tuple: no per-row strip or tuple building
    for row in rows:
        try:
            value = float(row[2])  # float() itself ignores the TAB some CANN versions append
        except ValueError:
            continue  # N/A
        if not math.isfinite(value):
            continue
        key = row[:2]
        total = raw.get(key)
        if total is None:
            raw[key] = [value, 1]
        else:
            total[0] += value
            total[1] += 1
    return raw


def _range_totals(path, start, end, width, positions):
    reader = RowReader(path, start, width, positions, end=end)
    raw = _sum_rows(reader)
    return raw, reader.bad_rows, reader.rows


def _ranges(path, body_start, size):
    """[start, end) byte ranges of about RANGE_BYTES, each starting at a line start."""
    count = max(1, (size - body_start) // RANGE_BYTES)
    cuts = [body_start]
    with open(path, "rb") as handle:
        for i in range(1, count):
            handle.seek(body_start + i * (size - body_start) // count)
            handle.readline()  # to the next line start
            cut = handle.tell()
            if cut > cuts[-1] and cut < size:
                cuts.append(cut)
    cuts.append(None)
    return list(zip(cuts[:-1], cuts[1:]))


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
