"""Find every rank's output under a directory, for both backends (DESIGN §4).

    *_ascend_pt/                 NPU capture (torch_npu); rank from profiler_info_{R}.json,
                                 its rank_id, or our worker name rank{R}_...
    rank{R}.{time_ns}.pt.trace.json[.gz]    torch capture
    profile_manifest_rank{R}.json           what rank R was asked to do (ours)
    iter_{start}-{last}/                    one folder per window when several ran
                                            (last inclusive, "end" when open-ended)

The walk goes at most ``MAX_DEPTH`` folders down (msprof-analyze looks 5 deep) and never into
a capture, so a large save path costs a directory listing, not a read.
"""

import os
import re
from dataclasses import dataclass, field
from typing import Optional

from ...layout import (ASCEND_PT_SUFFIX, MANIFEST_RE, SKIPPED_DIRS, TORCH_TRACE_RE,
                       parse_window_dir)
from ...recording.manifest import read_manifest
from . import claims, profinfo
from .errors import CorruptFile
from .manifest_shape import MAX_MANIFEST_BYTES, shape_problem
from .regular import check_regular

MAX_DEPTH = 6
TORCH_TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
# rank{R}_… (training) or {role}_rank{R}_… (RL roles)
WORKER_RANK_RE = re.compile(r"(?:^|_)rank(\d+)_")
TIMESTAMP_RE = re.compile(r"^\d{17}$")
SKIP_DIRS = SKIPPED_DIRS  # one definition with the HTTP start's check (layout.reserved_name)
# The manager names a window folder after its last iteration, not layout.py's exclusive end.


@dataclass
class Run:
    """One capture: an ``*_ascend_pt`` folder or one torch trace file."""

    backend: str
    path: str
    rel: str
    rank: Optional[int] = None
    rank_source: Optional[str] = None
    timestamp: Optional[str] = None
    window: Optional[tuple] = None  # [start, end) of the iter_ folder holding it; end -1 = open
    info: object = None  # ProfilerInfo of the first readable profiler_info file
    info_name: Optional[str] = None
    info_error: Optional[str] = None
    notes: list = field(default_factory=list)
    claims: list = field(default_factory=list)  # (where, rank) its own content says (NPU)


@dataclass
class ManifestFile:
    path: str
    rel: str
    rank: Optional[int] = None
    data: Optional[dict] = None
    error: Optional[str] = None


@dataclass
class Discovery:
    root: str
    runs: list = field(default_factory=list)
    manifests: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def discover(root):
    """Everything under ``root`` (a save path, a window folder or one capture)."""
    root = os.path.abspath(root)
    found = Discovery(root=root)
    if os.path.basename(root).endswith(ASCEND_PT_SUFFIX):
        found.runs.append(_npu_run(root, os.path.dirname(root)))
        return found
    for folder, dirs, files in _walk(root, found):
        for name in sorted(dirs):
            if name.endswith(ASCEND_PT_SUFFIX):
                found.runs.append(_npu_run(os.path.join(folder, name), root))
        for name in sorted(files):
            path = os.path.join(folder, name)
            if MANIFEST_RE.match(name):
                found.manifests.append(_manifest(path, root))
            elif name.endswith(TORCH_TRACE_SUFFIXES):
                found.runs.append(_torch_run(path, root))
    return found


def _walk(root, found):
    for folder, dirs, files in os.walk(root, onerror=lambda exc: found.notes.append(
            f"cannot list {exc.filename}: {exc.strerror}")):
        depth = 0 if folder == root else os.path.relpath(folder, root).count(os.sep) + 1
        yield folder, list(dirs), files
        # captures are read on demand, never walked; nor is anything hidden
        dirs[:] = [d for d in dirs if not d.endswith(ASCEND_PT_SUFFIX)
                   and not d.startswith(".") and d not in SKIP_DIRS and depth < MAX_DEPTH]


def _window(path, root):
    rel = os.path.relpath(os.path.dirname(path), root)
    for part in reversed(rel.split(os.sep)):
        parsed = parse_window_dir(part)
        if parsed is not None:
            return parsed[1], parsed[2]
    return None


def _npu_run(path, root):
    name = os.path.basename(path)
    run = Run(backend="npu", path=path, rel=os.path.relpath(path, root), window=_window(path, root))
    stamp = name.split("_")
    if len(stamp) >= 3 and TIMESTAMP_RE.match(stamp[-3]):
        run.timestamp = stamp[-3]  # the field msprof-analyze sorts on
    for info_name in profinfo.info_files(path):
        try:
            info = profinfo.read_profiler_info(os.path.join(path, info_name))
        except (CorruptFile, OSError) as exc:
            if run.info_error is None:
                run.info_name, run.info_error = info_name, str(exc)
            continue
        run.info, run.info_name, run.info_error = info, info_name, None
        break
    named = [profinfo.PROFILER_INFO_RE.match(n).group(1) for n in profinfo.info_files(path)]
    ranks_in_names = sorted({int(r) for r in named if r is not None})
    if len(ranks_in_names) > 1:
        run.notes.append(f"profiler_info files for several ranks ({ranks_in_names}): one "
                         f"capture folder per rank is expected")
    if ranks_in_names:
        run.rank, run.rank_source = ranks_in_names[0], f"profiler_info_{ranks_in_names[0]}.json"
    elif run.info is not None and run.info.rank_id is not None:
        run.rank, run.rank_source = run.info.rank_id, "rank_id in profiler_info.json"
    else:
        match = WORKER_RANK_RE.search(name)
        if match:
            run.rank, run.rank_source = int(match.group(1)), "folder name"
    run.claims = claims.npu_capture(path)
    named = next((rank for where, rank in run.claims if where == claims.FOLDER_NAME), None)
    if named is not None and run.rank is not None and named != run.rank:
        # Our own worker name says whose slot this is; torch_npu's files say whose data is in
        # it: judged as the named rank's, holding another rank's capture (check says so).
        run.claims = [(f"its {run.rank_source}", run.rank)] + [
            c for c in run.claims if c[0] != claims.FOLDER_NAME]
        run.rank, run.rank_source = named, "folder name"
    return run


def _torch_run(path, root):
    name = os.path.basename(path)
    run = Run(backend="torch", path=path, rel=os.path.relpath(path, root),
              window=_window(path, root))
    match = TORCH_TRACE_RE.match(name)
    if match:
        run.rank, run.rank_source = int(match.group(1)), "file name"
        run.timestamp = match.group(2)
    else:
        run.notes.append(f"{name} is not named rank{{R}}.{{time_ns}}.pt.trace.json: its rank "
                         f"is unknown")
    return run


def _manifest(path, root):
    entry = ManifestFile(path=path, rel=os.path.relpath(path, root),
                         rank=int(MANIFEST_RE.match(os.path.basename(path)).group(1)))
    try:
        check_regular(path, MAX_MANIFEST_BYTES)  # a FIFO would hang the read: never opened
        data = read_manifest(path)
    except CorruptFile as exc:
        entry.error = f"{entry.rel}: {exc}"
        return entry
    except (OSError, ValueError, RecursionError) as exc:  # JSON errors are ValueErrors
        entry.error = f"{entry.rel} is unreadable: {exc}"
        return entry
    problem = shape_problem(data)
    if problem:  # read as it is, it would lend its rank a verdict its files cannot back
        entry.error = f"{entry.rel} is unreadable as a manifest: {problem}"
        return entry
    entry.data = data
    rank = entry.data.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool) and rank != entry.rank:
        entry.error = (f"{entry.rel} says rank {rank}; the file name says {entry.rank} "
                       f"(the file name is used)")
    return entry
