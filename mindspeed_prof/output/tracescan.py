"""Check a chrome trace end to end and keep only what ``check`` needs from it.

Every byte is validated, but only a few events are decoded: the ``ProfilerStep#N`` steps and
the process metadata. SQLite's C JSON parser (stdlib ``sqlite3``) validates a piece about
twice as fast as ``json.loads`` decodes it, because it builds no Python objects; where it is
missing or disagrees, ``json`` decides (it is what torch_npu and msprof-analyze read with).
"""

import json
import re
import sqlite3
from dataclasses import dataclass, field

from . import jsonstream

STEP_PREFIX = "ProfilerStep#"
_MARKERS = (STEP_PREFIX, '"M"')
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
        self._db = None
        try:
            db = sqlite3.connect(":memory:")
            probe = "select json_valid('[1]'), json_array_length('[1,2]')"
            if db.execute(probe).fetchone() == (1, 2):
                self._db = db
        except sqlite3.Error:
            pass

    def __call__(self, text):
        if self._db is None:
            return len(json.loads("[" + text + "]"))
        try:
            # one-argument json_valid is strict RFC 8259 even where SQLite reads JSON5
            valid, count = self._db.execute("select json_valid(?1), json_array_length(?1)",
                                            ("[" + text + "]",)).fetchone()
        except sqlite3.Error:
            raise ValueError("malformed JSON") from None
        if not valid:
            raise ValueError("malformed JSON")
        return count

    def close(self):
        if self._db is not None:
            self._db.close()


def scan_trace(path, chunk=jsonstream.CHUNK_BYTES):
    """Validate the whole trace; raises ``CorruptFile``. Returns a ``TraceScan``."""
    scan = TraceScan()
    validate = _Validator()
    try:
        for text, result in jsonstream.pieces(path, validate, chunk):
            if text is None:
                scan.events += len(result)
                for event in result:
                    scan.take(event)
            else:
                scan.events += result
                for event in _marked_events(text):
                    scan.take(event)
    finally:
        validate.close()
    return scan


def _marked_events(text):
    """Decode only the events around marker strings; the piece is known to be valid."""
    hits = sorted(i for marker in _MARKERS for i in _find_all(text, marker))
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


def _find_all(text, needle):
    i = text.find(needle)
    while i >= 0:
        yield i
        i = text.find(needle, i + 1)
