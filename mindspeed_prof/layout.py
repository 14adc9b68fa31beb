"""The on-disk layout under ``--profile-save-path`` (DESIGN §4), in one place.

    {save_path}/
      profile_manifest_rank{R}.json          one per profiled rank (ours)
      {worker}_{pid}_{timestamp}_ascend_pt/   NPU backend, torch_npu's own layout; worker = rank{R}
      rank{R}.{time_ns}.pt.trace.json        torch backend (chrome trace)
      iter_{first}-{last}/                   one folder per window when several windows run
                                             (inclusive iterations; "end" when open-ended)
      req_{first}-{last}/                    the same for inference (requests, DESIGN §6)
      step_{first}-{last}/                   the same for RL (the controller's RL steps)
      estep_{first}-{last}/                  the same for the dynamic inference engine's steps;
      {prefix}/estep_{first}-{last}/         a window an HTTP start named (its "prefix")
      {role}/                                RL: a complete save path per role
      memory_snapshot_rank{R}.pickle         --profile-memory-snapshot: in each window's folder
      memory_oom_rank{R}.pickle              --profile-memory-oom: in the save path, on OOM
"""

import os
import re
from typing import Optional, Tuple

from .config.units import UNITS, Unit

MANIFEST_TEMPLATE = "profile_manifest_rank{rank}.json"
# profile_manifest_rank{R}.{run}.json: another job's manifest already had the plain name
MANIFEST_RE = re.compile(r"^profile_manifest_rank(\d+)(?:\.([A-Za-z0-9_-]+))?\.json$")
TORCH_TRACE_TEMPLATE = "rank{rank}.{time_ns}.pt.trace.json"
TORCH_TRACE_RE = re.compile(r"^rank(\d+)\.(\d+)\.pt\.trace\.json(\.gz)?$")
ASCEND_PT_SUFFIX = "_ascend_pt"
ASCEND_OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
PROFILER_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
MEMORY_SNAPSHOT_TEMPLATE = "memory_snapshot_rank{rank}.pickle"
# The n-th out-of-memory of a process (n > 1 only when the host caught the first and went on).
MEMORY_OOM_TEMPLATE = "memory_oom_rank{rank}{n}.pickle"
MEMORY_FILE_RE = re.compile(r"^memory_(snapshot|oom)_rank(\d+)(?:\.(\d+))?\.pickle$")
WINDOW_DIR_TEMPLATE = "{prefix}_{first}-{last}"
# Every unit's folder prefix (units.py owns them): a new unit is one entry there, not an edit here.
WINDOW_DIR_RE = re.compile(r"^(" + "|".join(re.escape(u.prefix) for u in UNITS.values())
                           + r")_(\d+)-(\d+|end|-1)$")
# Folders the readers never walk into: msprof-analyze's cluster output and Python's cache.
SKIPPED_DIRS = frozenset({"cluster_analysis_output", "__pycache__"})


def reserved_name(name: str) -> Optional[str]:
    """Why ``name`` cannot be a folder of our own under a save path (an HTTP start's
    ``prefix``), else None: the readers (output/read/discover.py) would skip it, read it as
    one NPU capture, or take it for a file or a window folder of ours."""
    if name.startswith("."):
        return "the readers skip hidden folders: its traces would never be read"
    if name.endswith(ASCEND_PT_SUFFIX):
        return (f"a folder named *{ASCEND_PT_SUFFIX} is read as one NPU capture and never "
                f"looked into: the traces under it would be invisible")
    if name in SKIPPED_DIRS:
        return "the readers skip this folder: its ranks would be called missing"
    if MANIFEST_RE.match(name) or TORCH_TRACE_RE.match(name) or MEMORY_FILE_RE.match(name) \
            or PROFILER_INFO_RE.match(name):
        return "it is the name of a file mindspeed_prof or torch_npu writes in a save path"
    if WINDOW_DIR_RE.match(name):
        return "it is the name of a window folder (iter_/req_/step_/estep_{first}-{last})"
    return None


def parse_window_dir(name: str) -> Optional[Tuple[Unit, int, int]]:
    """``req_2-3`` -> (REQUEST, 2, 4): a window folder's unit and ``[start, end)`` (end -1: open,
    written ``end``); None for any other name."""
    match = WINDOW_DIR_RE.match(name)
    if match is None:
        return None
    unit = next(u for u in UNITS.values() if u.prefix == match.group(1))
    last = match.group(3)
    return unit, int(match.group(2)), -1 if last in ("end", "-1") else int(last) + 1


def worker_name(rank, role=None):
    """torch_npu appends ``_{pid}_{timestamp}``; the rank prefix keeps ranks apart on shared storage,
    the role (RL) keeps colocated roles' captures apart: ``actor_rank0``."""
    return f"{role}_rank{rank}" if role else f"rank{rank}"


def session_worker_name(rank, role=None, unit_prefix=None, n=None):
    """With a session per unit, the unit too (``rank0_req2``), so one rank's captures are told
    apart by name; else ``worker_name``."""
    name = worker_name(rank, role)
    return name if unit_prefix is None else f"{name}_{unit_prefix}{n}"


def memory_snapshot_name(rank):
    return MEMORY_SNAPSHOT_TEMPLATE.format(rank=rank)


def memory_oom_name(rank, n=1):
    return MEMORY_OOM_TEMPLATE.format(rank=rank, n="" if n == 1 else f".{n}")


def manifest_path(save_path, rank):
    return os.path.join(save_path, MANIFEST_TEMPLATE.format(rank=rank))


def window_dir(save_path, start, end, prefix="iter"):
    """The folder of window ``[start, end)`` (``end`` None: until the work ends); ``prefix`` is
    the unit's (``iter``, ``req``, ``step``)."""
    last = "end" if end is None else end - 1
    return os.path.join(save_path, WINDOW_DIR_TEMPLATE.format(prefix=prefix, first=start,
                                                              last=last))


def role_dir(save_path, role, stage=None):
    """An RL role's save path, ``{save}/{role}/``, or one selected stage's, ``{save}/{role}/{stage}/``
    (DESIGN §6): each a complete save path with its own manifests and window folders."""
    return os.path.join(save_path, role, stage) if stage else os.path.join(save_path, role)
