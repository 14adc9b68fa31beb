"""Allocator snapshots (``memory_*_rank{R}.pickle``), read without running anything in them.

A snapshot is a pickle, and unpickling a file someone hands us can run any code it names. The
reader here accepts only what ``torch.cuda.memory._snapshot()`` / torch_npu's
``_npu_memorySnapshot`` build: dicts, lists, tuples (pool ids), str, int, float, bool and None.
Those are all pickle opcodes of their own; anything else needs ``find_class`` (a global: a
class, a function such as ``os.system``, a reduce), a persistent id or an extension code, and is
refused before it is looked up, so nothing the file names is imported or called. The loaded value
is then walked once more for the same types (sets and bytes have opcodes of their own too) and
for the snapshot's shape: a dict with ``segments`` (a list) and ``device_traces`` (a list of
lists of dicts).
"""

import io
import pickle
from dataclasses import dataclass, field
from typing import Any, List, Optional

from .errors import CorruptFile

PLAIN = (dict, list, tuple, str, int, float, bool, type(None))
MAX_DEPTH = 64  # a snapshot nests about 6 deep (traces -> entry -> frames -> frame)


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that can build plain values only (see the module docstring)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it names {module}.{name}, which an allocator snapshot "
                                     f"never holds (refused, not loaded)")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it holds a persistent id, which an allocator snapshot "
                                     "never does (refused)")


def loads_plain(data: bytes) -> Any:
    """``data`` unpickled if it holds plain values only; CorruptFile naming what it holds else."""
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, MemoryError, RecursionError, OverflowError, UnicodeDecodeError) as exc:
        raise CorruptFile(f"not an allocator snapshot: {exc or type(exc).__name__}") from None
    _check_plain(value, 0)
    return value


def _check_plain(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CorruptFile("not an allocator snapshot: nested deeper than a snapshot ever is")
    if type(value) not in PLAIN:
        raise CorruptFile(f"not an allocator snapshot: it holds a {type(value).__name__}")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key, depth + 1)
            _check_plain(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(item, depth + 1)


@dataclass
class Snapshot:
    """One snapshot file, read and shape-checked."""

    path: str
    data: dict
    size: int
    notes: List[str] = field(default_factory=list)

    @property
    def segments(self) -> list:
        return self.data["segments"]

    @property
    def device_traces(self) -> list:
        return self.data["device_traces"]

    @property
    def events(self) -> int:
        return sum(len(trace) for trace in self.device_traces)


def load_snapshot(path: str) -> Snapshot:
    """Read ``path`` as an allocator snapshot; CorruptFile (with why) for anything else,
    OSError when it cannot be read."""
    with open(path, "rb") as handle:
        data = handle.read()
    if not data:
        raise CorruptFile("empty file (0 bytes)")
    value = loads_plain(data)
    problem = shape_problem(value)
    if problem:
        raise CorruptFile(f"not an allocator snapshot: {problem}")
    return Snapshot(path=path, data=value, size=len(data))


def shape_problem(value: Any) -> Optional[str]:
    """Why ``value`` is not shaped as ``_snapshot()`` returns it, or None."""
    if not isinstance(value, dict):
        return f"a {type(value).__name__}, not a dict"
    for key in ("segments", "device_traces"):
        if not isinstance(value.get(key), list):
            return f"no {key} list"
    for trace in value["device_traces"]:
        if not isinstance(trace, list) or not all(isinstance(e, dict) and "action" in e
                                                  for e in trace):
            return "device_traces holds something other than lists of trace entries"
    for segment in value["segments"]:
        if not isinstance(segment, dict) or not isinstance(segment.get("blocks", []), list):
            return "segments holds something other than segment dicts"
    return None
