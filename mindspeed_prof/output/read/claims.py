"""What a capture's own content says about whose it is, beside the name it was found under.

A rank's trace copied over another's (``cp rank0.*.pt.trace.json rank1.*.pt.trace.json``, a
sync that mixed two folders) reads as a perfect capture of the rank its name says. The content
tells: torch writes the path it exported to as the trace's ``traceName`` (its last key) and,
once torch.distributed is up, ``distributedInfo.rank`` (before ``traceEvents``); torch_npu
names ``profiler_info_{R}.json`` after the global rank, and ``profiler_metadata.json`` holds the
``distributed_args`` mindspeed_prof gave it. Each is read once per capture, from the file's
head or tail only (a few hundred KB at most), never from the per-event loops.
"""

import gzip
import json
import os
import re
from typing import List, Optional, Tuple

from ...layout import TORCH_TRACE_RE
from .errors import CorruptFile
from .regular import open_regular, read_regular

HEAD_BYTES = 1 << 20  # distributedInfo (and its process groups) precede traceEvents
TAIL_BYTES = 64 << 10  # traceName is the last key
MAX_METADATA_BYTES = 16 << 20
_DIST = re.compile(rb'"distributedInfo"\s*:\s*\{')
_RANK = re.compile(rb'"rank"\s*:\s*(\d{1,10})\b')
_TRACE_NAME = re.compile(rb'"traceName"\s*:\s*("(?:[^"\\]|\\.){0,4096}")\s*\}\s*$')
# the worker name of plain training (layout.worker_name): rank{R}_{pid}_{timestamp}_ascend_pt
_NPU_WORKER = re.compile(r"^rank(\d+)_\d+_")

Claim = Tuple[str, int]  # (where it is said, the rank it says)
FOLDER_NAME = "its folder name"


def torch_trace(path: str, distributed: bool = True) -> List[Claim]:
    """The ranks a torch chrome trace says it is: ``traceName``'s file name and (when
    ``distributed``: the trace's rank is the process's global one) ``distributedInfo.rank``."""
    claims: List[Claim] = []
    try:
        with open_regular(path) as raw:
            gz = path.endswith(".gz")
            handle = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
            head = handle.read(HEAD_BYTES)
            tail = b""
            if not gz:
                size = os.fstat(raw.fileno()).st_size
                raw.seek(max(0, size - TAIL_BYTES))
                tail = raw.read(TAIL_BYTES)
    except (OSError, EOFError, CorruptFile):
        return claims  # the trace's own check says what is wrong with it
    if distributed:
        rank = _distributed_rank(head)
        if rank is not None:
            claims.append(("its distributedInfo.rank", rank))
    name = _trace_name(tail if tail else head)
    if name is not None:
        match = TORCH_TRACE_RE.match(os.path.basename(name))
        if match:
            claims.append((f"its traceName, {os.path.basename(name)}", int(match.group(1))))
    return claims


def _distributed_rank(head: bytes) -> Optional[int]:
    events = head.find(b'"traceEvents"')
    found = _DIST.search(head, 0, events if events >= 0 else len(head))
    if found is None:
        return None
    rank = _RANK.search(head, found.end(), events if events >= 0 else len(head))
    return int(rank.group(1)) if rank else None


def _trace_name(tail: bytes) -> Optional[str]:
    found = _TRACE_NAME.search(tail)
    if found is None:
        return None
    try:
        name = json.loads(found.group(1))
    except ValueError:
        return None
    return name if isinstance(name, str) else None


def npu_capture(path: str) -> List[Claim]:
    """The ranks an ``*_ascend_pt`` folder's name (plain training's ``rank{R}_…``) and its
    ``profiler_metadata.json`` (``distributed_args.rank``) say it is."""
    claims: List[Claim] = []
    named = _NPU_WORKER.match(os.path.basename(path))
    if named:
        claims.append((FOLDER_NAME, int(named.group(1))))
    try:
        data = json.loads(read_regular(os.path.join(path, "profiler_metadata.json"),
                                      MAX_METADATA_BYTES))
    except (OSError, ValueError, RecursionError, CorruptFile):
        return claims  # absent (torch_npu < 2.1, a light capture) or unreadable: no claim
    args = data.get("distributed_args") if isinstance(data, dict) else None
    rank = args.get("rank") if isinstance(args, dict) else None
    if type(rank) is int and rank >= 0:
        claims.append(("profiler_metadata.json's distributed_args.rank", rank))
    return claims
