"""Totals per kernel (kernel_details.csv) and per op type (op_statistic.csv).

The kernel sums come from ``read/kernels.py``: its one pass over kernel_details.csv also gives
``check`` its verdict on the file, and both are remembered in the cache."""

from dataclasses import dataclass
from typing import Optional

from ..deps import need
from ..read import columns, kernels
from ..read.csvrows import setup_pyarrow
from ..read.csvtable import CsvTable, number
from ..read.errors import CorruptFile


@dataclass
class Item:
    """A kernel, op type or torch operator, aggregated."""

    name: str
    kind: Optional[str] = None  # kernel Type, op Core Type or trace category
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
    """Import what the summary reads with, before a fork: the workers share it
    (pyarrow.compute is left out: only odd tables need it, ``read/kernels.py``)."""
    for module in ("msgspec", "numpy", "pyarrow.csv"):
        need(module)
    setup_pyarrow()


def kernel_totals(path):
    """{(name, type): Item} over every row; raises ``CorruptFile`` for an unusable file.
    The rows are read once for ``check`` and ``summary`` both (``read/kernels.py``)."""
    table = kernels.read(path)
    if table.error is not None:
        raise CorruptFile(table.error)
    totals = {}
    for name, kind, total_us, count in table.sums:  # stripped once per key, not per row
        key = (name.strip(), kind.strip() if kind is not None else None)
        item = totals.get(key)
        if item is None:
            item = totals[key] = Item(key[0], key[1])
        item.total_us += total_us
        item.count += count
    return totals


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
