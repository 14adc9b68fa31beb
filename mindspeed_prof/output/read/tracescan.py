"""Check a chrome trace end to end and keep only what ``check`` needs from it.

Every byte is validated, but only a few events are decoded: the ``ProfilerStep#N`` steps and
the process metadata (``process_name`` / ``process_labels``). simdjson validates a piece
without building a Python object per value: 1385 MB per CPU-second on the 1 GB benchmark set,
against msgspec's ``Raw`` 1125 and SQLite's ``json_valid`` (used before) ~400. It refuses
nothing ``json`` accepts by mistake (UTF-8, control characters, escapes, numbers: see the
readers' notes in BENCHMARKS.md), but refuses some of what ``json`` reads (NaN, integers past
64 bits, lone surrogates): such a piece goes to ``json``, which decides (it is what torch_npu
and msprof-analyze read with).
"""

import json
import re
from dataclasses import dataclass, field

from . import jsonstream

STEP_PREFIX = "ProfilerStep#"
# Text every event ``take`` keeps contains. "process_" is searched as it is (1.7 GB/s; '"M"',
# a quote first, ran at half that); "ProfilerStep#" through its "#", a rare character in traces
# that one memchr pass finds at ~9 GB/s, where the 13-character search ran at 2.1 GB/s.
_METADATA_MARKER = "process_"
_BOUNDARY = re.compile(r"\}\s*,\s*\{")


@dataclass
class TraceScan:
    events: int = 0
    steps: dict = field(default_factory=dict)  # N -> (ts_us, dur_us)
    processes: dict = field(default_factory=dict)  # pid -> name
    labels: dict = field(default_factory=dict)  # pid -> process_labels

    def npu_processes(self):
        return sorted({name for pid, name in self.processes.items()
                       if name == "Ascend Hardware"
                       or str(self.labels.get(pid, "")).startswith("NPU")})

    def take(self, event):
        if not isinstance(event, dict):
            return
        name = event.get("name")
        if not isinstance(name, str):
            return
        if event.get("ph") == "M":
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            if name == "process_name":
                self.processes[event.get("pid")] = args.get("name")
            elif name == "process_labels":
                self.labels[event.get("pid")] = args.get("labels")
        elif name.startswith(STEP_PREFIX) and event.get("ph") == "X":
            number = step_number(name)
            # torch on CUDA repeats each step as a gpu_user_annotation; the host one is the step
            if number is not None and not str(event.get("cat", "")).startswith("gpu"):
                self.steps.setdefault(number, (to_float(event.get("ts")),
                                               to_float(event.get("dur"))))


def step_number(name):
    tail = name[len(STEP_PREFIX):]
    return int(tail) if tail.isdigit() else None


def to_float(value):
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return None


class _Validator:
    """``"[" + text + "]"`` is valid JSON -> its element count; else ValueError."""

    def __init__(self):
        import simdjson  # the CLI's dependency, never the training side's

        self._parse = simdjson.Parser().parse

    def __call__(self, text):
        try:
            # len() of the lazy array; the document is dropped before the next parse
            return len(self._parse("[" + text + "]"))
        except (ValueError, RuntimeError):
            raise ValueError("malformed JSON") from None


def scan_trace(path, chunk=jsonstream.CHUNK_BYTES):
    """Validate the whole trace; raises ``CorruptFile``. Returns a ``TraceScan``."""
    scan = TraceScan()
    for text, result in jsonstream.pieces(path, _Validator(), chunk):
        if text is None:
            scan.events += len(result)
            for event in result:
                scan.take(event)
        else:
            scan.events += result
            for event in _marked_events(text):
                scan.take(event)
    return scan


def _marked_events(text):
    """Decode only the events around marker strings; the piece is known to be valid."""
    hits = sorted([*_step_hits(text), *_find_all(text, _METADATA_MARKER)])
    covered = -1
    for hit in hits:
        if hit < covered:
            continue
        start = jsonstream.last_boundary(text, 0, hit)
        start = 0 if start < 0 else start + 1
        match = _BOUNDARY.search(text, hit)
        end = match.start() + 1 if match else len(text)
        try:
            events = json.loads("[" + text[start:end].lstrip(" \t\r\n,") + "]")
        except ValueError:
            # a boundary inside a nested list fooled the search: decode the whole piece
            yield from json.loads("[" + text + "]")
            return
        yield from events
        covered = end


def _step_hits(text):
    """Where each ``ProfilerStep#`` starts, found from its ``#``."""
    back = len(STEP_PREFIX) - 1
    i = text.find("#", back)
    while i >= 0:
        if text.startswith(STEP_PREFIX, i - back):
            yield i - back
        i = text.find("#", i + 1)


def _find_all(text, needle):
    i = text.find(needle)
    while i >= 0:
        yield i
        i = text.find(needle, i + 1)
