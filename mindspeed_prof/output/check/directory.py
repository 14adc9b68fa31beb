"""``check_directory``: every rank's verdict under a save path, manifests included.

Our manifests say which ranks were expected (``selected_ranks``), which window each capture
covers and whether the rank's profiler failed; torch_npu's own files say what was collected.
A rank is judged by the worst of its captures, and by its manifest when that reports failure.
"""

import os
from typing import Any, Iterable, Optional

from ...errors import ConfigError
from ...config.units import ITERATION, UNITS
from .. import parallel
from ..progress import Progress
from ..read import discover as discovery
from ..read import jobruns
from ..read.windows import manifest_window, manifest_windows, rank_from_manifests
from . import captures as capturecheck
from . import file as filecheck
from .capture import Kept, check_run, files_to_check
from ..memory.check import check_snapshots
from .capture import _ranges as runcheck_ranges
from .report import CORRUPT, CUT, INCOMPLETE, MISSING, RankReport, Report, worst

FAILED_STATUSES = ("failed", "incomplete")
UNFINISHED_STATUSES = ("armed", "running")


def check_directory(path: "str | os.PathLike[str]", expected_ranks: Optional[Iterable[int]] = None,
                    share: Any = None, run: Optional[str] = None) -> Report:
    """Check every capture under ``path``; ``expected_ranks`` (e.g. from ``--ranks``) replaces
    the ranks the manifests expect, and limits the report to them. ``share`` (a
    ``job.share.Share``): check only this node's part of those ranks (``report.covered``
    says which), for a per-node report merged later. ``run`` (``--run``): judge that run
    instead of the newest (``read/jobruns.py``). Raises ``ConfigError`` when ``path`` is not a
    directory or has no such run; any file content gives a verdict, never an exception."""
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise ConfigError(f"DIR {path} {what}; give the --profile-save-path of the profiled run "
                          f"(e.g. ./profile_dir), or one *_ascend_pt folder.")
    found = discovery.discover(path)
    report = Report(directory=found.root)
    report.warnings.extend(found.notes)
    manifests = _manifests(found, report, run)
    unreadable = _unreadable(found, manifests, report)
    for capture in found.runs:
        if capture.rank is None:
            rank_from_manifests(capture, manifests)
    expected = _expected(manifests) if expected_ranks is None else set(expected_ranks)
    report.expected_ranks = sorted(expected)
    runs = found.runs
    if expected_ranks is not None:
        skipped = sorted({r.rank for r in runs if r.rank is not None} - expected)
        if skipped:
            report.warnings.append(f"also found rank(s) {_list(skipped)}, not checked (--ranks)")
        runs = [r for r in runs if r.rank is None or r.rank in expected]
    if expected_ranks is None:
        expected |= set(unreadable)  # known from its manifest's name, read or not
    if share is not None:
        found_ranks = {r.rank for r in runs if r.rank is not None} | set(unreadable)
        candidates = expected | (found_ranks if expected_ranks is None else set())
        report.covered = share.pick(candidates, found_ranks)
        mine = set(report.covered)
        runs = [r for r in runs if (r.rank in mine if r.rank is not None
                                    else share.takes_unranked)]
    read_ahead = _read_files(runs)
    by_rank: dict = {}
    for capture in runs:
        manifest = manifests.get(capture.rank)
        chosen = manifest_window(capture, manifest)
        checked = check_run(capture, _window(capture, chosen), _config(manifest), read_ahead,
                            _kept(chosen, manifest), distributed=not _role(manifest))
        checked.trigger = capturecheck.reason_line(chosen, manifest)
        if capture.rank is None:
            report.unranked.append(checked)
        else:
            by_rank.setdefault(capture.rank, []).append(checked)
    ranks = expected if expected_ranks is not None else set(by_rank) | expected
    if share is not None:
        ranks = ranks & set(report.covered or ())
    for rank in sorted(ranks):
        report.ranks.append(_rank_report(rank, by_rank.get(rank, []), manifests.get(rank),
                                         unreadable.get(rank, ())))
    # allocator snapshots: this node's ranks only in a per-node report
    wanted = set(report.covered or ()) if share is not None else (
        None if expected_ranks is None else expected)
    check_snapshots(found.root, manifests, report, wanted)
    if not found.runs and not manifests and (share is None or share.takes_unranked):
        report.warnings.append(f"no profiler output under {found.root}: expected *_ascend_pt "
                               f"folders, rank*.pt.trace.json files or "
                               f"profile_manifest_rank*.json")
    return report


def _read_files(runs):
    """Check every file of every capture up front, over several processes when they are big."""
    sizes = {}
    for run in runs:
        for path in files_to_check(run):
            try:
                sizes[path] = os.path.getsize(path)
            except OSError:
                continue  # check_run reports it
    # what the cache holds costs a look, not a read: it neither needs a pool nor counts for one
    known = {p: filecheck.check_file(p) for p in sizes if filecheck.remembered(p)}
    paths = sorted((p for p in sizes if p not in known), key=sizes.get, reverse=True)
    total = sum(sizes[p] for p in paths)  # the biggest first keep workers busy
    workers = parallel.workers_for(total, len(paths))
    with Progress("check", total) as bar:
        if workers <= 1 and not bar.enabled:
            return known  # check_run reads each file as it goes
        results = parallel.run(filecheck.check_file, [(p, os.path.basename(p)) for p in paths],
                               workers, warm=filecheck.load_parsers,
                               done=lambda i: bar.advance(sizes[paths[i]]))
    return {**known, **dict(zip(paths, results))}


def _manifests(found, report, run=None):
    """The judged run's manifests, one per rank; other runs' manifests and the captures they
    list are left out, and named (two jobs in one save path are never merged without a word)."""
    for entry in found.manifests:
        if entry.error and entry.data is not None:
            report.warnings.append(entry.error)
    runs = jobruns.choose(found.manifests, run)
    report.run = runs.judged.label if runs.judged else None
    if runs.left_out:
        report.warnings.append(runs.note())
        found.runs = jobruns.keep_runs(found.runs, runs)
    return runs.chosen


def _unreadable(found, manifests, report):
    """rank -> its manifests that could not be read, for the ranks the run judged has no
    readable manifest of (those judge the rank: their own problem). Either way it is said."""
    unreadable: dict = {}
    for entry in found.manifests:
        if entry.data is None:
            if entry.rank in manifests:
                report.warnings.append(entry.error)
            else:
                unreadable.setdefault(entry.rank, []).append(entry)
    return unreadable


def _expected(manifests):
    expected = set(manifests)
    for entry in manifests.values():
        selected = entry.data.get("selected_ranks")
        if isinstance(selected, list):
            expected.update(r for r in selected if isinstance(r, int) and not isinstance(r, bool)
                            and r >= 0)
    return expected


def _window(run, chosen):
    """The (start, end) of the manifest window holding this capture, else its folder's."""
    if chosen is None:
        return run.window
    start, end = chosen.get("start"), chosen.get("end")
    end = -1 if end is None else end  # an open window: until training ended
    recorded = _ints(chosen.get("iterations_recorded"))
    if chosen.get("stopped_early") and recorded:
        end = max(recorded) + 1  # the manager cut it short on purpose (e.g. --profile-max-gb)
    if isinstance(start, int) and isinstance(end, int):
        return start, end
    return run.window


def _unit(data):
    """What a manifest's windows count (its ``unit``), iterations when it does not say."""
    name = data.get("unit") if isinstance(data, dict) else None
    return UNITS.get(name, ITERATION) if isinstance(name, str) else ITERATION


def _kept(chosen, manifest=None):
    """What the window recorded, when its manifest says (older manifests may not)."""
    if chosen is None or not isinstance(chosen.get("iterations_recorded"), list):
        return None
    cut = chosen.get("cut") if isinstance(chosen.get("cut"), dict) else {}
    in_progress, never_ran = cut.get("in_progress"), chosen.get("never_ran")
    how = cut.get("reason")
    return Kept(recorded=tuple(_ints(chosen["iterations_recorded"])),
                in_progress=in_progress if _is_int(in_progress) else None,
                never_ran=never_ran if _is_int(never_ran) else None,
                cut=str(how) if cut else None,
                unit=_unit(manifest.data if manifest is not None else None))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(values):
    return [v for v in values if _is_int(v)] if isinstance(values, list) else []


def _role(manifest):
    """The RL role a manifest's process recorded (its ranks may be the role's own numbers)."""
    return manifest.data.get("role") if manifest is not None else None


def _config(manifest):
    config = manifest.data.get("config") if manifest else None
    return config if isinstance(config, dict) else None


def _rank_report(rank, runs, manifest, unreadable=()):
    rank_report = RankReport(rank=rank, runs=sorted(runs, key=lambda r: (r.timestamp or "",
                                                                         r.path)))
    if manifest is not None:
        rank_report.manifest = manifest.rel
        _apply_manifest(rank_report, manifest)
    for entry in unreadable:  # what the rank was asked to record, and how it ended: unknown
        rank_report.manifest = rank_report.manifest or entry.rel
        rank_report.verdict = worst(rank_report.verdict, CORRUPT)
        rank_report.problems.append(f"{entry.error}: what rank {rank} was asked to record, "
                                    f"and whether its profiler failed, cannot be known")
    nothing = capturecheck.nothing_captured(manifest) if not runs else None
    if nothing is not None and rank_report.verdict != INCOMPLETE:
        rank_report.notes.append(nothing)  # armed for captures, none taken: nothing missing
        return rank_report
    if not runs:
        rank_report.verdict = MISSING
        rank_report.problems.insert(0, "no output for this rank" + (
            f" (its manifest status is {rank_report.manifest_status!r})"
            if rank_report.manifest_status else " (expected: listed in selected_ranks or --ranks)"))
        return rank_report
    rank_report.verdict = worst(rank_report.verdict, *(r.verdict for r in runs))
    _msprof_pick(rank_report)
    return rank_report


def _apply_manifest(rank_report, manifest):
    data = manifest.data
    status = data.get("status")
    rank_report.manifest_status = status if isinstance(status, str) else None
    for kind, target in (("errors", rank_report.errors), ("warnings", rank_report.warnings)):
        entries = data.get(kind) if isinstance(data.get(kind), list) else []
        for entry in entries:
            if isinstance(entry, dict):
                phase = entry.get("phase")
                target.append(f"{manifest.rel}: " + (f"[{phase}] " if phase else "")
                              + str(entry.get("message")))
            else:
                target.append(f"{manifest.rel}: {entry}")
    if status in FAILED_STATUSES:
        rank_report.verdict = worst(rank_report.verdict, INCOMPLETE)
        rank_report.problems.append(f"{manifest.rel} reports status {status!r}"
                                    + (" (its errors are listed)" if rank_report.errors else ""))
    elif status in UNFINISHED_STATUSES and (status == "running" or data.get("exit") is None):
        rank_report.warnings.append(f"{manifest.rel} still says {status!r}: the training process "
                                    f"ended without closing the profiler (killed?)")
    elif status == "parsing":
        rank_report.warnings.append(f"{manifest.rel} says 'parsing': an asynchronous parse may "
                                    f"still be running; check again when it ends")
    elif rank_report.errors:
        rank_report.warnings.append(f"{manifest.rel} lists errors although its status is "
                                    f"{status!r}")
    _planned_windows(rank_report, data)
    for window in manifest_windows(manifest):
        if window.get("stopped_early"):
            rank_report.warnings.append(
                f"window starting at iteration {window.get('start')} was stopped early "
                f"({window['stopped_early']}) after iterations {window.get('iterations_recorded')}")
    base = os.path.dirname(manifest.path)
    files = data.get("files") if isinstance(data.get("files"), list) else []
    absent = [f for f in files if isinstance(f, str) and not os.path.exists(os.path.join(base, f))]
    if absent:
        rank_report.verdict = worst(rank_report.verdict, INCOMPLETE)
        rank_report.problems.append(f"listed in {manifest.rel} but absent: "
                                    f"{', '.join(absent[:5])}"
                                    + (f" and {len(absent) - 5} more" if len(absent) > 5 else ""))


def _planned_windows(rank_report, data):
    """Windows recorded as one session per unit (requests, RL steps): each session may be whole
    while the window is not. A window left cut, left running by a process that never said how
    it ended, or with units whose session was refused is not the window that was asked for."""
    planned = data.get("planned") if isinstance(data.get("planned"), list) else []
    words = _unit(data)
    unit, plural = words.name, words.plural
    for entry in planned:
        if not isinstance(entry, dict):
            continue
        start, end = entry.get("start"), entry.get("end")
        span = f"{plural} {start}-{end - 1}" if _is_int(start) and _is_int(end) \
            else f"{plural} {start}.."
        recorded = _ints(entry.get("recorded"))
        kept = (f"{plural} {runcheck_ranges(recorded)} recorded" if recorded
                else f"no {unit} recorded to its end")
        status = entry.get("status")
        cut = entry.get("cut") if isinstance(entry.get("cut"), dict) else {}
        if status == "cut":
            rank_report.verdict = worst(rank_report.verdict, CUT)
            mid = cut.get("in_progress")
            mid = f", {unit} {mid} cut mid-way" if _is_int(mid) else ""
            rank_report.problems.append(f"window of {span} cut short ({cut.get('reason')}): "
                                        f"{kept}{mid}")
        elif status == "running" and data.get("exit") is None:
            rank_report.verdict = worst(rank_report.verdict, CUT)
            rank_report.problems.append(f"window of {span} never finished: the process ended "
                                        f"inside it without closing the profiler (killed?); "
                                        f"{kept}")
        refused = _ints(entry.get("refused"))
        if refused:
            rank_report.verdict = worst(rank_report.verdict, INCOMPLETE)
            rank_report.problems.append(f"window of {span}: the session of {unit} "
                                        f"{runcheck_ranges(refused)} was refused (another "
                                        f"session ran in this process; its errors are listed): "
                                        f"those {plural} are missing")
        skipped = _ints(entry.get("skipped"))
        if skipped:
            rank_report.warnings.append(f"window of {span}: {unit} {runcheck_ranges(skipped)} "
                                        f"never began in this process (started later, or the "
                                        f"number was skipped)")


def _msprof_pick(rank_report):
    npu = [r for r in rank_report.runs if r.backend == "npu"]
    if len(npu) < 2:
        return
    newest = max(npu, key=lambda r: (r.timestamp or "", r.path))
    rank_report.msprof_analyze_pick = newest.path
    rank_report.warnings.append(
        f"{len(npu)} NPU captures for rank {rank_report.rank}; msprof-analyze cluster analyses "
        f"only the newest ({newest.path}: field [-3] of the folder name). To analyse another, "
        f"point -d at a folder holding one capture per rank (e.g. one iter_<start>-<end>/).")


def _list(numbers):
    return ", ".join(str(n) for n in numbers)

