"""``summarize_directory``: step-time breakdown, top kernels and op types, slow ranks.

NPU captures are summarised from ASCEND_PROFILER_OUTPUT's tables (step_trace_time.csv,
kernel_details.csv, op_statistic.csv), torch captures from their chrome trace. The per-step
breakdown keeps step_trace_time.csv's values as they are, so it equals msprof-analyze's
cluster_step_trace_time.csv on the same input. Step time is Computing + Communication(Not
Overlapped) + Free: those three cover the step without overlap.
"""

import os
import statistics
from dataclasses import dataclass, field
from typing import Optional, Set

from ...errors import ConfigError
from ...layout import ASCEND_OUTPUT_DIR
from .. import cache, parallel
from ..progress import Progress
from ..read import columns, jobruns, kernels
from ..read.csvtable import CsvTable, number
from ..read.discover import discover
from ..read.errors import CorruptFile
from ..read.windows import manifest_window  # one rule, check's too, for the window of a capture
from . import aggregate, engine_steps, requests, torchtrace
from .aggregate import Item

@dataclass
class RankSummary:
    rank: int
    backend: Optional[str] = None
    sources: list = field(default_factory=list)
    steps: list = field(default_factory=list)  # {"step", "device", components..., "step_time"}
    kernels: dict = field(default_factory=dict)  # (name, type) -> Item
    op_types: dict = field(default_factory=dict)
    op_types_source: Optional[str] = None
    ops: dict = field(default_factory=dict)  # torch operators by self time
    requests: list = field(default_factory=list)  # inference: one row per request (requests.py)
    engine_windows: list = field(default_factory=list)  # dynamic engine (engine_steps.py)
    notes: list = field(default_factory=list)

    def breakdown(self):
        """Mean of each component over the profiled steps."""
        keys = [k for k in (*columns.STEP_COMPONENTS, "step_time")
                if any(s.get(k) is not None for s in self.steps)]
        return {k: statistics.fmean([s[k] for s in self.steps if s.get(k) is not None])
                for k in keys}

    @property
    def step_time(self):
        return self.breakdown().get("step_time")

    @property
    def has_numbers(self):
        """True when any of this rank's captures could be read into a number."""
        return bool(self.steps or self.kernels or self.ops or self.op_types or self.requests)


@dataclass
class Summary:
    directory: str
    top: int = 10
    ranks: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    run: Optional[str] = None  # the run summarised, when manifests name one (read/jobruns.py)

    def rank(self, rank):
        return next((r for r in self.ranks if r.rank == rank), None)

    @property
    def summarised(self):
        """The ranks with numbers: ``summary`` exits 0 only when there is one."""
        return [r for r in self.ranks if r.has_numbers]


def summarize_directory(path: "str | os.PathLike[str]", top: int = 10,
                        only: Optional[Set[int]] = None,
                        takes_unranked: bool = True,
                        run: Optional[str] = None) -> "Summary":
    """Summarise every rank under ``path``; ``only`` (a set of ranks): just those, for a
    node's share of the job (``job/``), whose notes about the whole folder are left to the
    merge, as are the unranked captures unless ``takes_unranked``. ``run`` (``--run``): that
    run instead of the newest (``read/jobruns.py``; ``ConfigError`` when there is none)."""
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise ConfigError(f"DIR {path} {what}; give the --profile-save-path of the profiled run "
                          f"(e.g. ./profile_dir), or one *_ascend_pt folder.")
    if top < 1:
        raise ConfigError(f"--top {top} must be >= 1.")
    found = discover(path)
    summary = Summary(directory=found.root, top=top)
    runs = jobruns.choose(found.manifests, run)
    summary.run = runs.judged.label if runs.judged else None
    if runs.left_out:  # two jobs in one save path: one run judged, the others named
        summary.notes.append(runs.note())
        found.runs = jobruns.keep_runs(found.runs, runs)
    manifests = runs.chosen
    by_rank: dict = {}
    for run in found.runs:
        if run.rank is None:
            if takes_unranked:
                summary.notes.append(f"{run.rel}: rank unknown, left out")
            continue
        if only is None or run.rank in only:
            by_rank.setdefault(run.rank, []).append(run)
    # oldest first, so the newest capture's row wins when two captures share a step
    runs = [r for rank in sorted(by_rank)
            for r in sorted(by_rank[rank], key=lambda r: (r.timestamp or "", r.rel))]
    sizes = [_main_file_size(r) for r in runs]
    calls = [(r.backend, r.path, r.rel, r.rank) for r in runs]
    with Progress("summary", sum(sizes)) as bar:
        partials = parallel.run(read_capture, calls,
                                parallel.workers_for(sum(sizes), len(calls)),
                                warm=aggregate.load_parsers, done=lambda i: bar.advance(sizes[i]))
    for run, partial in zip(runs, partials):
        _leave_out_never_ran(partial, run, manifests.get(run.rank))
    for rank in sorted(by_rank):
        rank_summary = RankSummary(rank=rank)
        for partial in (p for p in partials if p.rank == rank):
            _absorb(rank_summary, partial)
        rank_summary.steps.sort(key=lambda s: (s["step"] is None, s["step"] or 0,
                                               s.get("device") or 0))
        rank_summary.requests.sort(key=lambda r: (r["request"], r.get("device") or 0))
        rank_summary.engine_windows = engine_steps.engine_windows(
            manifests.get(rank), [(r, p) for r, p in zip(runs, partials) if p.rank == rank])
        summary.ranks.append(rank_summary)
    if only is None:
        summary.notes.extend(closing_notes(summary, path))
    return summary


def closing_notes(summary, path):
    """What a summary with no numbers says about its whole folder (a merge says it once)."""
    if not summary.ranks:
        return [f"nothing to summarise under {summary.directory}: no rank's capture found (run "
                f"`mindspeed-prof check {path}`)"]
    if not summary.summarised:
        why = "; ".join(n for r in summary.ranks for n in r.notes[:1])
        return [f"nothing could be summarised under {summary.directory}: no capture of rank(s) "
                f"{', '.join(str(r.rank) for r in summary.ranks)} could be read "
                f"({why or 'no numbers in them'}); run `mindspeed-prof check {path}` to see why"]
    return []


def _leave_out_never_ran(partial, run, manifest):
    """Drop the step the manifest names ``never_ran``, as ``check`` does: the profiler opened it
    for an iteration that never ran. A torch trace no longer holds it; torch_npu parses the
    capture later, so its step_trace_time.csv still does."""
    never_ran = (manifest_window(run, manifest) or {}).get("never_ran")
    if not isinstance(never_ran, int) or isinstance(never_ran, bool):
        return
    kept = [s for s in partial.steps if s["step"] != never_ran]
    if len(kept) != len(partial.steps):
        partial.steps = kept
        partial.notes.append(f"{run.rel}: step {never_ran} left out of step times: the manifest "
                             f"says iteration {never_ran} never ran (its ProfilerStep was opened "
                             f"as the loop ended)")


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


def _main_file_size(run):
    """The bytes reading this capture costs (0 when the cache holds them: no pool for it)."""
    path = run.path if run.backend == "torch" else os.path.join(
        run.path, ASCEND_OUTPUT_DIR, "kernel_details.csv")
    kind = torchtrace.KIND if run.backend == "torch" else kernels.KIND
    if cache.worth_caching(path) and cache.load(path, kind) is not None:
        return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _absorb(target, partial):
    """Add one capture's numbers to its rank's; a later capture's step replaces an earlier."""
    target.backend = target.backend or partial.backend
    target.sources.extend(partial.sources)
    target.notes.extend(partial.notes)
    replaced = {(s["step"], s.get("device")) for s in partial.steps}
    target.steps = [s for s in target.steps if (s["step"], s.get("device")) not in replaced]
    target.steps.extend(partial.steps)
    target.requests.extend(partial.requests)
    aggregate.merge_into(target.kernels, partial.kernels)
    aggregate.merge_into(target.ops, partial.ops)
    real = "op_statistic.csv"
    if partial.op_types_source == real and target.op_types_source != real:
        target.op_types = {}  # real statistics replace any kernel-derived ones
    if partial.op_types_source and (partial.op_types_source == real
                                    or target.op_types_source != real):
        target.op_types_source = partial.op_types_source
        aggregate.merge_into(target.op_types, partial.op_types)


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
    _steps(rank_summary, os.path.join(out, "step_trace_time.csv"), run.rel)
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
    for row in rows:
        step_text, device = row[0], number(row[1])
        step = int(number(step_text)) if number(step_text) is not None else None
        values = {name: number(row[2 + columns.STEP_COMPONENTS.index(name)]) for name in present}
        entry = {"step": step, "device": int(device) if device is not None else None, **values}
        parts = [values.get(p) for p in columns.STEP_PARTS]
        entry["step_time"] = sum(parts) if None not in parts else None
        key = (step, entry["device"])
        if key in known:
            rank_summary.steps = [s for s in rank_summary.steps
                                  if (s["step"], s.get("device")) != key]
        rank_summary.steps.append(entry)


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
    known = {s["step"] for s in rank_summary.steps}
    for step, dur in sorted(trace.steps.items()):
        if step in known:
            rank_summary.steps = [s for s in rank_summary.steps if s["step"] != step]
        rank_summary.steps.append({"step": step, "device": None, "step_time": dur})
    if not trace.steps:
        rank_summary.notes.append(f"{run.rel}: no ProfilerStep#N events, no step times")
    for name, (self_us, count, category) in trace.ops.items():
        item = rank_summary.ops.get(name)
        if item is None:
            item = rank_summary.ops[name] = Item(name, category)
        item.total_us += self_us
        item.count += count
