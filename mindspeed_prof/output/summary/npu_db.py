"""The summary of a db export (``--profile-export-type db``): the numbers its text export gives.

Read only when the capture has no text tables: with both (``text,db``) the CSVs are read and
the databases are not, so nothing is counted twice. What comes from where (``read/dbsummary``):

    step breakdown   analysis.db StepTraceTime           = step_trace_time.csv
    top kernels      ascend_pytorch_profiler_{R}.db tasks  = kernel_details.csv
    op types         level1+: its compute tasks by type and core = op_statistic.csv;
                     level0: from the kernels' types, as the text export's summary does
"""

import os
from typing import Dict, Optional

from ..read import dbsummary, profinfo
from ..read.columns import STEP_PARTS
from ..read.errors import CorruptFile
from . import aggregate
from .aggregate import Item

PROFILER_DB_PREFIX = "ascend_pytorch_profiler"
ANALYSIS_DB = "analysis.db"
TEXT_TABLES = ("kernel_details.csv", "step_trace_time.csv", "op_statistic.csv")
LEVELS_WITH_STATISTICS = ("level1", "level2")
BASIS = "analysis.db StepTraceTime"


def database(out: str) -> Optional[str]:
    """The profiler database of an ASCEND_PROFILER_OUTPUT folder (the ranked name first)."""
    try:
        names = sorted(os.listdir(out), key=lambda n: (n == PROFILER_DB_PREFIX + ".db", n))
    except OSError:
        return None
    found = [n for n in names if n.startswith(PROFILER_DB_PREFIX) and n.endswith(".db")]
    return os.path.join(out, found[0]) if found else None


def db_only(out: str) -> bool:
    """A db export: databases, and none of the tables the text export writes."""
    if any(os.path.exists(os.path.join(out, name)) for name in TEXT_TABLES):
        return False
    return database(out) is not None or os.path.isfile(os.path.join(out, ANALYSIS_DB))


def summarise(run, out: str, rank_summary) -> None:
    _steps(run, os.path.join(out, ANALYSIS_DB), rank_summary)
    path = database(out)
    if path is None:
        rank_summary.notes.append(f"{run.rel}: no {PROFILER_DB_PREFIX}_*.db, no kernels")
        return
    name = os.path.basename(path)
    found = dbsummary.read(path)
    if found.error is not None:
        rank_summary.notes.append(f"{run.rel}: {name}: {found.error}")
        return
    totals: Dict[tuple, Item] = {}
    for kernel, kind, _, total_us, count in found.sums:
        _add(totals, (kernel.strip(), kind.strip()), total_us, count)
    aggregate.merge_into(rank_summary.kernels, totals)
    level = _level(run.path)
    if level in LEVELS_WITH_STATISTICS:
        types: Dict[tuple, Item] = {}
        for _, kind, core, total_us, count in found.sums:
            if core != dbsummary.HCCL:  # op_statistic.csv leaves communication out
                _add(types, (kind.strip(), core.strip()), total_us, count)
        rank_summary.op_types_source = f"{name} (its compute tasks by op type and core, " \
                                       f"as op_statistic.csv)"
    else:
        types = aggregate.types_from_kernels(rank_summary.kernels)
        rank_summary.op_types_source = f"{name} kernels (no op statistics at " \
                                       f"{level or 'an unknown level'})"
    aggregate.merge_into(rank_summary.op_types, types)


def _add(totals, key, total_us, count):
    item = totals.get(key)
    if item is None:
        item = totals[key] = Item(key[0], key[1])
    item.total_us += total_us
    item.count += count


def _steps(run, path, rank_summary):
    if not os.path.isfile(path):
        rank_summary.notes.append(f"{run.rel}: no {ANALYSIS_DB}, no step breakdown")
        return
    try:
        rows = dbsummary.step_rows(path)
    except CorruptFile as exc:
        rank_summary.notes.append(f"{ANALYSIS_DB} skipped: {exc}")
        return
    for row in rows:
        parts = [row.get(p) for p in STEP_PARTS]
        row["step_time"] = sum(parts) if None not in parts else None
        rank_summary.steps = [s for s in rank_summary.steps
                              if (s["step"], s.get("device")) != (row["step"], row["device"])]
        rank_summary.steps.append(row)
    rank_summary.basis = rank_summary.basis or BASIS


def _level(capture: str) -> Optional[str]:
    for name in profinfo.info_files(capture):
        try:
            return profinfo.read_profiler_info(os.path.join(capture, name)).level
        except (CorruptFile, OSError, ValueError):
            continue
    return None
