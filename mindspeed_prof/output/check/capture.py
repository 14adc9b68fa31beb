"""The verdict on one capture: an ``*_ascend_pt`` folder or a torch chrome trace."""

import os
from dataclasses import dataclass
from typing import Optional, Tuple

from ...layout import ASCEND_OUTPUT_DIR
from ...config.units import ITERATION, Unit
from ..read import claims, logscan, sqlitecheck
from ..read.csvtable import normalise
from . import expect
from . import file as filecheck
from .report import CORRUPT, CUT, INCOMPLETE, NOT_STOPPED, UNPARSED, RunReport


@dataclass(frozen=True)
class Kept:
    """What the manifest says a window kept, so the trace is judged against what really ran."""

    recorded: Tuple[int, ...]  # the iterations that ran to their end inside the window
    in_progress: Optional[int] = None  # begun, not ended, when the window was cut (partial step)
    never_ran: Optional[int] = None  # a step the profiler opened for an iteration that never ran
    cut: Optional[str] = None  # how the run ended inside the window, when it did
    unit: Unit = ITERATION  # what the window counted (requests, RL steps...): the verdict's words

RAW_DIRS = ("FRAMEWORK",)
MAX_WINDOW_SPAN = 1 << 20  # units one window's step ids may span (a profiled window is short)
RAW_PREFIX = "PROF_"


def files_to_check(run):
    """Every file ``check_run`` will read, so they can be read ahead, in parallel."""
    if run.backend == "torch":
        return [run.path]
    out_dir = os.path.join(run.path, ASCEND_OUTPUT_DIR)
    try:
        names = os.listdir(out_dir)
    except OSError:
        return []
    return [p for p in (os.path.join(out_dir, n) for n in names if not sqlitecheck.is_side_file(n))
            if os.path.isfile(p)]


def check_run(run, window=None, config=None, checked=None, kept=None, distributed=True):
    """``window``: the [start, end) the manifest gave this capture; ``config``: its config;
    ``checked``: FileChecks already made, by path; ``kept``: what the manifest says the window
    recorded (``Kept``), else every iteration of ``window`` is expected; ``distributed``: the
    capture's rank is its process's global rank (an RL role may number its own)."""
    report = RunReport(path=run.rel, backend=run.backend, rank=run.rank,
                       rank_source=run.rank_source, timestamp=run.timestamp,
                       window=window or run.window)
    report.warnings.extend(run.notes)
    try:
        read = _reader(checked or {})
        if run.backend == "torch":
            _torch(run, report, read, kept)
        else:
            _npu(run, report, config, read, kept)
    except OSError as exc:  # the folder vanished or cannot be listed
        report.fail(CORRUPT, f"cannot read {run.rel}: {exc.strerror or exc}")
    _whose(run, report, distributed)
    if kept is not None and kept.cut:
        report.fail(CUT, _cut_text(report.window, kept))
    return report


def _whose(run, report, distributed):
    """A capture whose content names another rank than the one it was found as is that rank's
    (copied over this one's): this rank's own capture is not here."""
    if run.rank is None:
        return
    if run.backend == "torch":
        if any(f.status != filecheck.OK for f in report.files):
            return  # not a trace: its check said why
        said = claims.torch_trace(run.path, distributed)
    else:
        said = run.claims
    for where, rank in said:
        if rank != run.rank:
            report.fail(CORRUPT, f"holds rank {rank}'s capture, not rank {run.rank}'s: {where} "
                                 f"says {rank} (its {run.rank_source} says {run.rank}); another "
                                 f"rank's output copied over this one's, so rank {run.rank}'s "
                                 f"own is not here")
            return


def _cut_text(window, kept):
    unit = kept.unit
    what = (f"{unit.plural} {_ranges(sorted(kept.recorded))} recorded" if kept.recorded
            else f"no {unit.name} recorded to its end")
    if kept.in_progress is not None:
        what += f", {unit.name} {kept.in_progress} cut mid-way (its ProfilerStep is partial)"
    shown = f" [{window[0]}, {window[1]})" if window and window[1] != -1 else ""
    return f"window{shown} cut short ({kept.cut}): {what}"


def _reader(checked):
    def read(path, name=None):
        return checked.get(path) or filecheck.check_file(path, name)
    return read


def _torch(run, report, read, kept):
    checked = read(run.path)
    report.files.append(checked)
    if checked.status != filecheck.OK:
        report.fail(CORRUPT, f"{os.path.basename(run.path)}: {checked.detail}")
        return
    if checked.detail:  # steps whose time is unreadable (read/numbers.py)
        report.warnings.append(f"{os.path.basename(run.path)}: {checked.detail}")
    report.steps = checked.facts.get("steps", [])
    if not report.steps:
        report.fail(INCOMPLETE, "no ProfilerStep#N events: the profiler was never stepped "
                                "inside its schedule, so no iteration can be told apart")
        return
    _window_steps(report, kept)


def _window_steps(report, kept=None):
    """Compare the ProfilerStep ids with what ran: the iterations the manifest says the window
    recorded (``kept``), else every iteration of [start, end); end -1 = until training ended.
    One rule for both backends: a recorded iteration without its step is incomplete."""
    if not report.window or not report.steps:
        return
    start, end = report.window
    steps = set(report.steps)
    window = f"[{start}, {end})" if end != -1 else f"[{start}, end of training)"
    if kept is not None and kept.never_ran in steps:
        steps.discard(kept.never_ran)
        report.warnings.append(f"ProfilerStep#{kept.never_ran} was opened for {kept.unit.name} "
                               f"{kept.never_ran}, which never ran (the loop ended after "
                               f"{kept.never_ran - 1}); leave it out of step statistics")
    # The spans below are tested, never built: a window's numbers come from files, any size.
    if kept is not None:
        expected = sorted(kept.recorded)
        top = max(expected, default=start)
        whole = not kept.cut and end != -1

        def tolerated(n):
            # Units the host skipped inside the window were stepped past: their ids may be there.
            return start <= n <= top or n == kept.in_progress or (whole and start <= n < end)
    else:
        last = end - 1 if end != -1 else max(max(steps), start)
        if last - start >= MAX_WINDOW_SPAN:
            report.fail(CORRUPT, f"window {window} with ProfilerStep ids up to {last} spans "
                                 f"{last - start + 1} units: no profiler records that many in "
                                 f"one window (its step ids or its window are damaged)")
            return
        expected = range(start, last + 1)

        def tolerated(n):
            return start <= n <= last
    missing = [n for n in expected if n not in steps]
    outside = sorted(n for n in steps if not tolerated(n))
    if missing:
        report.fail(INCOMPLETE, f"ProfilerStep#{_ranges(missing)} of window {window} missing "
                                f"(found {_ranges(sorted(steps)) or 'none'})")
    if outside:
        report.warnings.append(f"ProfilerStep#{_ranges(outside)} lie outside window {window}: "
                               f"step ids do not match the training log's iterations")


def _ranges(numbers):
    parts, run = [], []
    for n in numbers:
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            parts.append(_span(run))
        run = [n]
    if run:
        parts.append(_span(run))
    return ",".join(parts)


def _span(run):
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def _npu(run, report, config, read, kept):
    entries = os.listdir(run.path)
    has_raw = any(e in RAW_DIRS or e.startswith(RAW_PREFIX) for e in entries)
    _info(run, report, has_raw)
    settings = expect.settings_for(run.info, config)
    report.settings = settings.describe()
    report.warnings.extend(settings.notes)
    report.errors, report.error_count = logscan.error_lines(run.path)
    out_dir = os.path.join(run.path, ASCEND_OUTPUT_DIR)
    # a database's -wal/-shm are SQLite's, not deliverables: the database's check reads them;
    # a FIFO or a device is listed, and its check says it was not read
    names = sorted(n for n in os.listdir(out_dir) if not sqlitecheck.is_side_file(n)
                   and os.path.exists(os.path.join(out_dir, n))
                   and not os.path.isdir(os.path.join(out_dir, n))) \
        if os.path.isdir(out_dir) else []
    if not names:
        if report.verdict == NOT_STOPPED:
            return  # nothing can parse a capture that never stopped: no advice to add
        light = expect.light_capture_problem(settings, []) if os.path.isdir(out_dir) else None
        if light:  # parsed, and a light capture had nothing to write
            report.fail(INCOMPLETE, f"{ASCEND_OUTPUT_DIR}/ is empty: {light}")
        elif has_raw:
            report.fail(UNPARSED, f"raw data (FRAMEWORK/, PROF_*) but no parsed "
                                  f"{ASCEND_OUTPUT_DIR}/: parse it with `mindspeed-prof analyse "
                                  f"{run.path}` (needs torch_npu and CANN)")
        else:
            report.fail(INCOMPLETE, f"no {ASCEND_OUTPUT_DIR}/ and no raw data (FRAMEWORK/, "
                                    f"PROF_*): the capture recorded nothing")
        return
    checks = {n: read(os.path.join(out_dir, n), n) for n in names}
    report.files.extend(checks.values())
    for name, checked in checks.items():
        if checked.status != filecheck.OK:
            report.fail(CORRUPT, f"{ASCEND_OUTPUT_DIR}/{name}: {checked.detail}")
        elif checked.detail:
            report.warnings.append(f"{ASCEND_OUTPUT_DIR}/{name}: {checked.detail}")
    for wanted in expect.deliverables(settings, run.rank):
        _expect(report, checks, wanted)
    if "analyse.done" not in checks and report.verdict == INCOMPLETE:
        report.warnings.append("no analyse.done: parsing did not finish (still running with "
                               "--profile-analyse async, or interrupted); torch_npu < 2.10 "
                               "never writes it. Re-parse with `mindspeed-prof analyse`")
    trace = checks.get("trace_view.json")
    if trace is not None and trace.status == filecheck.OK:
        report.steps = trace.facts.get("steps", [])
        light = expect.light_capture_problem(settings, report.steps)
        if light:
            report.fail(INCOMPLETE, f"trace_view.json: {light}")
        scan = trace.facts.get("scan")
        if scan is not None and settings.npu and not scan.npu_processes() \
                and "kernel_details.csv" in checks:
            report.warnings.append("trace_view.json has no NPU process (Ascend Hardware): the "
                                   "device timeline is missing")
        _window_steps(report, kept)


def _info(run, report, has_raw):
    if run.info is None and run.info_error is None:
        raw = " (raw data is there, but the offline parser needs profiler_info too)" \
            if has_raw else ""
        report.fail(NOT_STOPPED, f"no profiler_info*.json: the profiler's stop() never ran "
                                 f"(training ended or was killed inside the window, or stop "
                                 f"failed){raw}")
        return
    if run.info is None:
        report.fail(CORRUPT, f"{run.info_name}: {run.info_error}")
        return
    report.warnings.extend(run.info.notes)
    if run.info.rank_in_name is None:
        report.warnings.append(
            f"{run.info_name} names no rank: msprof-analyze cluster drops this folder "
            f"(\"Expected to get rank_id from profiler_info_{{rank_id}}.json\"). Set RANK (or "
            f"initialise torch.distributed) before the profiler starts; for this capture, "
            f"rename it to profiler_info_<rank>.json")


def _expect(report, checks, wanted):
    present = next((checks[n] for n in (wanted.name, *wanted.alternatives) if n in checks), None)
    if present is None:
        text = f"missing {ASCEND_OUTPUT_DIR}/{wanted.name} ({wanted.why})"
        if wanted.required:
            report.fail(INCOMPLETE, text)
        else:
            report.warnings.append(text)
        return
    present.why = present.why or wanted.why
    if wanted.alternatives and present.name != wanted.name:
        report.warnings.append(f"{present.name} found where {wanted.name} was expected: the "
                               f"rank was unknown to torch_npu; msprof-analyze reports rank -1")
    if wanted.column and present.status == filecheck.OK:
        header = [normalise(h) for h in present.facts.get("header", [])]
        if normalise(wanted.column) not in header:
            report.fail(INCOMPLETE, f"{present.name} has no '{wanted.column}' column "
                                    f"({wanted.why})")
    if wanted.tables and present.status == filecheck.OK:
        held = set(present.facts.get("table_names", []))
        lacking = {}
        for table, why in wanted.tables:
            if table not in held:
                lacking.setdefault(why, []).append(table)
        if lacking:
            report.fail(INCOMPLETE, f"{present.name} lacks tables it must hold: " + "; ".join(
                f"{', '.join(tables)} ({why})" for why, tables in lacking.items())
                + (f" ({present.detail})" if present.detail else ""))
