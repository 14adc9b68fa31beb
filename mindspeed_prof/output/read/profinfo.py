"""What ``profiler_info*.json`` says a capture was asked to collect.

torch_npu writes it when ``stop()`` finalises a capture, so its absence means the capture
never stopped. The offline parser and msprof-analyze both read it. Two schemas exist: current
files carry ``_export_type``, ``start_info`` and versions; ~2023 files lack them and carry
``on_trace_ready`` and underscore schedule keys (shared/ascend_samples, test_rank_0).
"""

import json
import os
from dataclasses import dataclass, field
from typing import Optional

from ...config import names
from ...errors import ConfigError
from ...layout import PROFILER_INFO_RE
from .errors import CorruptFile
from .regular import read_regular

MAX_INFO_BYTES = 16 << 20


@dataclass
class ProfilerInfo:
    path: str
    rank_in_name: Optional[int] = None  # from profiler_info_{R}.json
    rank_id: Optional[int] = None  # from the "rank_id" key (int, or a numeric string when $RANK set it)
    level: Optional[str] = None  # level_none / level0 / level1 / level2, None when unknown
    export_types: tuple = ()
    cpu: bool = True
    npu: bool = True
    memory: bool = False
    shapes: bool = False
    stack: bool = False
    torch_npu_version: Optional[str] = None
    cann_version: Optional[str] = None
    notes: list = field(default_factory=list)

    @property
    def rank(self):
        return self.rank_in_name if self.rank_in_name is not None else self.rank_id


def info_files(run_dir):
    """``profiler_info*.json`` names in a run dir, those with a rank first."""
    try:
        entries = os.listdir(run_dir)
    except OSError:
        return []
    found = [e for e in entries if PROFILER_INFO_RE.match(e)]
    return sorted(found, key=lambda e: (PROFILER_INFO_RE.match(e).group(1) is None, e))


def read_profiler_info(path):
    """Parse one profiler_info file; raises ``CorruptFile`` when it cannot be used."""
    raw = read_regular(path, MAX_INFO_BYTES)  # a FIFO or /dev/zero: refused, never read
    if not raw:
        raise CorruptFile("empty file (0 bytes)")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptFile("not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise CorruptFile(f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CorruptFile("not a JSON object")
    info = ProfilerInfo(path=path)
    match = PROFILER_INFO_RE.match(os.path.basename(path))
    if match and match.group(1) is not None:
        info.rank_in_name = int(match.group(1))
    info.rank_id = _rank(data.get("rank_id"), info)
    config = _dict(data.get("config"))
    common = _dict(config.get("common_config"))
    experimental = _dict(config.get("experimental_config"))
    info.level = _level(experimental.get("_profiler_level"), info)
    info.export_types = _export_types(experimental.get("_export_type"), info)
    activities = common.get("activities")
    if isinstance(activities, list) and activities:
        text = " ".join(str(a).upper() for a in activities)
        info.cpu, info.npu = "CPU" in text, "NPU" in text
    info.memory = common.get("profile_memory") is True
    info.shapes = common.get("record_shapes") is True
    info.stack = common.get("with_stack") is True
    info.torch_npu_version = _text(data.get("torch_npu_version"))
    info.cann_version = _text(data.get("cann_version"))
    if info.rank_in_name is not None and info.rank_id is not None \
            and info.rank_in_name != info.rank_id:
        info.notes.append(f"{os.path.basename(path)} says rank_id {info.rank_id}; the file name "
                          f"wins (msprof-analyze reads the name)")
    return info


def _dict(value):
    return value if isinstance(value, dict) else {}


def _text(value):
    return value if isinstance(value, str) else None


def _rank(value, info):
    if value is None:
        return None
    if isinstance(value, bool):
        info.notes.append(f"rank_id {value!r} is not a rank")
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    # isascii: str.isdigit() is true for "²", which int() refuses
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    info.notes.append(f"rank_id {value!r} is not a rank")
    return None


def _level(value, info):
    if value is None:
        return None
    try:
        return names.level(str(value))
    except ConfigError:
        info.notes.append(f"unknown _profiler_level {value!r}")
        return None


def _export_types(value, info):
    if value is None:
        return ()  # the ~2023 schema: text was the only export then
    try:
        return tuple(names.export_type(value).split(","))
    except ConfigError:
        info.notes.append(f"unknown _export_type {value!r}")
        return ()
