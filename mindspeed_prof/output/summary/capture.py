"""The numbers of one capture (run in a worker process): an NPU capture's tables, text or db
export, or a torch trace.

NPU captures are summarised from ASCEND_PROFILER_OUTPUT's tables (step_trace_time.csv,
kernel_details.csv, op_statistic.csv), or, from a db export without them, from the same data in
its databases (``read/dbsummary.py``); torch captures from their chrome trace
(``torchtrace.py``). The per-step breakdown keeps step_trace_time.csv's values as they are, so
it equals msprof-analyze's cluster_step_trace_time.csv on the same input. Step time is
Computing + Communication(Not Overlapped) + Free: those three cover the step without overlap.
"""

import os
from dataclasses import dataclass

from ...layout import ASCEND_OUTPUT_DIR
from .. import cache
from ..read import claims, columns, dbsummary, kernels
from ..read.csvtable import CsvTable, number
from ..read.errors import CorruptFile
from ..timeline import clock
from . import aggregate, npu_collectives, npu_db, requests, torchtrace
from .aggregate import Item
from .model import RankSummary

STEP_TRACE_TIME = "step_trace_time.csv"


def read_capture(backend, path, rel, rank):
    """The numbers of one capture, as a RankSummary of its own (run in a worker process)."""
    partial = RankSummary(rank=rank)
    (_npu if backend == "npu" else _torch)(_Capture(path, rel), partial)
    if requests.in_request_folder(rel):
        partial.requests = requests.request_rows(backend, path, rel, partial)
    return partial


@dataclass
class _Capture:
    path: str
    rel: str


def main_file_size(run):
    """The bytes reading this capture costs (0 when the cache holds them: no pool for it)."""
    path, kind = (run.path, torchtrace.KIND) if run.backend == "torch" else (os.path.join(
        run.path, ASCEND_OUTPUT_DIR, "kernel_details.csv"), kernels.KIND)
    if run.backend == "npu" and not os.path.exists(path):
        database = npu_db.database(os.path.join(run.path, ASCEND_OUTPUT_DIR))
        path, kind = (database, dbsummary.KIND) if database else (path, kind)
    if cache.worth_caching(path) and cache.load(path, kind) is not None:
        return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _read(rank_summary, path, spec):
    """Rows of one table, or None with a note when it is absent or unreadable."""
    if not os.path.isfile(path):
        return None
    try:
        table = CsvTable(path, spec)
        return table, list(table.rows())
    except (CorruptFile, OSError, ValueError) as exc:
        rank_summary.notes.append(f"{os.path.basename(path)} skipped: {exc}")
        return None


def _npu(run, rank_summary):
    out = os.path.join(run.path, ASCEND_OUTPUT_DIR)
    if not os.path.isdir(out):
        rank_summary.notes.append(f"{run.rel}: not parsed (no {ASCEND_OUTPUT_DIR}/)")
        return
    rank_summary.backend = rank_summary.backend or "npu"
    rank_summary.sources.append(run.rel)
    if npu_db.db_only(out):  # --profile-export-type db: the same numbers, from its databases
        npu_db.summarise(run, out, rank_summary)
        return
    _steps(rank_summary, os.path.join(out, "step_trace_time.csv"), run.rel)
    rank_summary.collectives.extend(npu_collectives.read(run.path))
    try:
        _kernels(rank_summary, os.path.join(out, "kernel_details.csv"))
        _op_types(rank_summary, os.path.join(out, "op_statistic.csv"))
    except (CorruptFile, OSError) as exc:
        rank_summary.notes.append(f"{run.rel}: {exc}")


def _steps(rank_summary, path, rel):
    read = _read(rank_summary, path, columns.STEP_TRACE_TIME)
    if read is None:
        rank_summary.notes.append(f"{rel}: no readable step_trace_time.csv, no step breakdown")
        return
    table, rows = read
    present = [n for n in columns.STEP_COMPONENTS if table.has(n)]
    known = {(s["step"], s.get("device")) for s in rank_summary.steps}
    window_us = []  # rows without a step id: the whole window, never one step
    for row in rows:
        step_text, device = row[0], number(row[1])
        step = int(number(step_text)) if number(step_text) is not None else None
        values = {name: number(row[2 + columns.STEP_COMPONENTS.index(name)]) for name in present}
        entry = {"step": step, "device": int(device) if device is not None else None, **values}
        parts = [values.get(p) for p in columns.STEP_PARTS]
        entry["step_time"] = sum(parts) if None not in parts else None
        if step is None:
            window_us.append(entry["step_time"])
            continue
        key = (step, entry["device"])
        if key in known:
            rank_summary.steps = [s for s in rank_summary.steps
                                  if (s["step"], s.get("device")) != key]
        rank_summary.steps.append(entry)
    if window_us:
        took = [t for t in window_us if t is not None]
        rank_summary.notes.append(
            f"{rel}: steps unknown: step_trace_time.csv has no step ids (torch_npu marks steps "
            f"from host activity; this capture has none: --profile-with-cpu was off), so its "
            f"window is not split into steps and no step time is given"
            + (f" (the whole window: {max(took):.1f} us)" if took else ""))
    rank_summary.basis = rank_summary.basis or STEP_TRACE_TIME


def _kernels(rank_summary, path):
    if os.path.isfile(path):
        aggregate.merge_into(rank_summary.kernels, aggregate.kernel_totals(path))


def _op_types(rank_summary, path):
    if not os.path.isfile(path):
        if rank_summary.kernels and rank_summary.op_types_source is None:
            rank_summary.op_types_source = "kernel_details.csv (no op_statistic.csv)"
            rank_summary.op_types = aggregate.types_from_kernels(rank_summary.kernels)
        return
    types = aggregate.op_type_totals(path)
    if rank_summary.op_types_source != "op_statistic.csv":
        rank_summary.op_types.clear()  # real statistics replace any kernel-derived ones
    rank_summary.op_types_source = "op_statistic.csv"
    aggregate.merge_into(rank_summary.op_types, types)


def _torch(run, rank_summary):
    try:
        trace = torchtrace.remembered_summary(run.path)
    except (CorruptFile, OSError, ValueError, RecursionError, EOFError) as exc:
        rank_summary.notes.append(f"{run.rel} skipped: {exc}")
        return
    rank_summary.backend = rank_summary.backend or "torch"
    rank_summary.sources.append(run.rel)
    for where, rank in claims.torch_trace(run.path, distributed=False):
        if rank != rank_summary.rank:  # check calls it corrupt; the numbers are shown, named
            rank_summary.notes.append(f"{run.rel} holds rank {rank}'s capture ({where} says "
                                      f"{rank}): these numbers are rank {rank}'s, copied over "
                                      f"rank {rank_summary.rank}'s")
    rank_summary.basis = rank_summary.basis or trace.basis or None
    known = {s["step"] for s in rank_summary.steps}
    for step, dur in sorted(trace.steps.items()):
        if step in known:
            rank_summary.steps = [s for s in rank_summary.steps if s["step"] != step]
        parts = dict(trace.breakdown.get(step, {}))
        # the step on the device, when its kernels are what the breakdown counts
        time = parts.pop("step_time", dur)
        rank_summary.steps.append({"step": step, "device": None, **parts, "step_time": time})
    if not trace.steps:
        rank_summary.notes.append(f"{run.rel}: no ProfilerStep#N events, no step times")
    if trace.unreadable:
        rank_summary.notes.append(f"{run.rel}: {trace.unreadable:,} event(s) whose ts or dur is "
                                  f"not a finite number, left out of the times")
    mine = {c[0] for c in trace.collectives}
    rank_summary.collectives = [c for c in rank_summary.collectives if c[0] not in mine]
    if trace.collectives or trace.spans:  # the rank's clock: ts + torch's base (clock.py)
        base_us = clock.trace_clock(run.path)[0] / 1000.0
        rank_summary.collectives.extend([*c[:4], c[4] + base_us, c[5] + base_us]
                                        for c in trace.collectives)
        rank_summary.spans.update({n: (a + base_us, b + base_us)
                                   for n, (a, b) in trace.spans.items()})
    for name, (self_us, count, category) in trace.ops.items():
        item = rank_summary.ops.get(name)
        if item is None:
            item = rank_summary.ops[name] = Item(name, category)
        item.total_us += self_us
        item.count += count
