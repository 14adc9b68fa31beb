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

from .. import cache
from ..deps import need
from . import jsonstream
from .errors import CorruptFile
from .numbers import shown, time_us
from .regular import open_regular
from .scratch import BoolScratch

STEP_PREFIX = "ProfilerStep#"
# Text every event ``take`` keeps contains. "process_" is found by numpy (``_marker_hits``);
# "ProfilerStep#" through its "#", a rare character in traces that one memchr pass finds at
# ~9 GB/s, where the 13-character search ran at 2.1 GB/s.
_METADATA_MARKER = b"process_"
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


@dataclass
class TraceScan:
    events: int = 0
    steps: dict = field(default_factory=dict)  # N -> (ts_us, dur_us)
    processes: dict = field(default_factory=dict)  # pid -> name
    labels: dict = field(default_factory=dict)  # pid -> process_labels
    # N -> "ts 'inf'": a step whose time is unreadable (read/numbers.py): kept as recorded,
    # its time None, and said
    unreadable: dict = field(default_factory=dict)

    def as_cached(self):
        return {"events": self.events, "steps": [[n, *v] for n, v in self.steps.items()],
                "processes": list(self.processes.items()), "labels": list(self.labels.items()),
                "unreadable": list(self.unreadable.items())}

    @classmethod
    def from_cached(cls, data):
        return cls(events=int(data["events"]),
                   steps={int(n): (time_us(ts), time_us(dur)) for n, ts, dur in data["steps"]},
                   processes={_key(p): name for p, name in data["processes"]},
                   labels={_key(p): labels for p, labels in data["labels"]},
                   unreadable={int(n): str(why) for n, why in data.get("unreadable", [])})

    def unreadable_note(self):
        """What a reader says of the steps whose time it could not read; None: none."""
        if not self.unreadable:
            return None
        listed = "; ".join(f"ProfilerStep#{n} {why}" for n, why in
                           sorted(self.unreadable.items())[:3])
        more = len(self.unreadable) - 3
        return (f"{len(self.unreadable)} step(s) with a time that is not a finite number "
                f"({listed}{f'; {more} more' if more > 0 else ''}): their time is unreadable "
                f"and left out")

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
            if number is not None and not str(event.get("cat", "")).startswith("gpu") \
                    and number not in self.steps:
                raw = (event.get("ts"), event.get("dur"))
                ts, dur = time_us(raw[0]), time_us(raw[1])
                self.steps[number] = (ts, dur)
                bad = [f"{name} {shown(value)}" for name, value, read in
                       (("ts", raw[0], ts), ("dur", raw[1], dur))
                       if read is None and value is not None]
                if bad:
                    self.unreadable[number] = ", ".join(bad)


def step_number(name):
    tail = name[len(STEP_PREFIX):]
    return int(tail) if tail.isascii() and tail.isdigit() else None


def to_float(value):
    """A trace's ts or dur as a float; None when unreadable (read/numbers.py decides)."""
    return time_us(value)


def load_parsers():
    """Import what a scan parses with, before a fork: the workers share it."""
    for module in ("numpy", "simdjson"):
        need(module)


class _Validator:
    """The bytes of a JSON array -> its element count; ValueError when they are not valid
    JSON (simdjson checks the UTF-8 too)."""

    def __init__(self):
        simdjson = need("simdjson")  # the CLI's dependency, never the training side's

        self._parse = simdjson.Parser().parse

    def __call__(self, array):
        try:
            # len() of the lazy array; the document is dropped before the next parse
            return len(self._parse(array))
        except (ValueError, RuntimeError):
            raise ValueError("malformed JSON") from None


def _key(pid):
    return tuple(pid) if isinstance(pid, list) else pid  # a pid is whatever the trace said


KIND = "trace"


def remembered_scan(path):
    """``scan_trace``, from the cache when it holds this file as it is now."""
    return cache.remembered(path, KIND, scan_trace, TraceScan.as_cached, TraceScan.from_cached,
                            CorruptFile)


def scan_trace(path, chunk=jsonstream.CHUNK_BYTES):
    """Validate the whole trace; raises ``CorruptFile``. Returns a ``TraceScan``."""
    scan = TraceScan()
    for piece, result in jsonstream.pieces(path, _Validator(), chunk):
        if piece is None:
            scan.events += len(result)
            for event in result:
                scan.take(event)
        else:
            scan.events += result
            for event in _marked_events(piece.data, piece.lo, piece.hi, _SCRATCH):
                scan.take(event)
    return scan


# How far around a step marker its event's bounds are sought: an event of more than this is
# left to the whole scan.
_QUICK_REACH = 1 << 16
# the read's block: 512 KiB stays in the core's cache between the copy and the search (4 MiB:
# 23-32 ms of CPU per 95 MB rank, 512 KiB: 18-19 ms)
QUICK_BLOCK = 512 << 10


def quick_steps(path):
    """The steps of a plain (not gzip) trace from its ``ProfilerStep#`` markers alone, the
    bytes around each decoded as ``scan_trace`` decodes them, the rest of the file not
    validated: a ``TraceScan`` with ``steps`` and ``unreadable`` (no events, no processes);
    None where a marker's event cannot be decoded alone (a nested object, a marker in the
    first or last event, one larger than 64 KiB) or the file cannot be read: the caller then
    scans it whole. For ``timeline``, whose write decodes every byte strictly anyway
    (``jsonstream``, json the arbiter, as here) and scans whole when it finds the file
    corrupt: a read and a memchr (~20 ms of CPU per 95 MB), where the validated scan costs
    ~0.15 s and numpy's import. Read, not mapped: a file cut short meanwhile would end a
    mapping's reader by SIGBUS."""
    if path.endswith(".gz"):
        return None
    try:
        handle = open_regular(path)
    except (OSError, CorruptFile):
        return None
    try:
        with handle:
            return _quick(handle)
    except (OSError, ValueError, RecursionError):
        return None


def _quick(handle, block=QUICK_BLOCK):
    scan = TraceScan()
    reach, back = _QUICK_REACH, len(STEP_PREFIX) - 1
    buf = bytearray(block + 2 * reach)
    view = memoryview(buf)
    held, base, start, covered = 0, 0, back, -1  # base: the file offset of buf[0]
    try:
        while True:
            eof = False
            while held < len(buf):
                got = handle.readinto(view[held:])
                if not got:
                    eof = True
                    break
                held += got
            # a marker is decoded here when the bytes around it are held (else: next block)
            end = held if eof else held - reach
            i = buf.find(b"#", start, end)
            while i >= 0:
                hit = i - back
                if base + hit >= covered and buf[hit:i + 1] == _STEP_BYTES:
                    first, last = _around(buf, max(0, hit - reach), min(held, hit + reach), hit)
                    if first is None or last is None:
                        return None
                    event = json.loads(bytes(view[first:last]).lstrip(
                        b" \t\r\n,"))  # ValueError: a boundary in a nested value fooled it
                    if not isinstance(event, dict):
                        return None
                    scan.take(event)
                    covered = base + last
                i = buf.find(b"#", i + 1, end)
            if eof:
                return scan
            keep = end - reach  # what a marker after ``end`` may need before it
            buf[:held - keep] = view[keep:held]
            base, held, start = base + keep, held - keep, end - keep
    finally:
        view.release()


def _marked_events(data, lo, hi, scratch):
    """Decode only the events of ``data[lo:hi]`` around marker strings; those bytes are known
    to be valid JSON (events separated by commas)."""
    hits = sorted([*_step_hits(data, lo, hi), *_marker_hits(data, _METADATA_MARKER, lo, hi,
                                                             scratch)])
    covered = -1
    for hit in hits:
        if hit < covered:
            continue
        start, end = _around(data, lo, hi, hit)
        start, end = lo if start is None else start, hi if end is None else end
        try:
            events = json.loads(b"[" + bytes(data[start:end]).lstrip(b" \t\r\n,") + b"]")
        except ValueError:
            # a boundary inside a nested list fooled the search: decode the whole piece
            yield from json.loads(b"[" + bytes(data[lo:hi]) + b"]")
            return
        yield from events
        covered = end


def _around(data, lo, hi, hit):
    """The bytes of the event around the marker at ``hit`` within ``data[lo:hi]``: (first,
    last), from past the last event boundary before it to past the brace that closes it at
    the next boundary; None for a side with no boundary in the range."""
    close = jsonstream.last_boundary(data, lo, hit)
    match = _BOUNDARY.search(data, hit, hi)
    return (close + 1 if close >= 0 else None), (match.start() + 1 if match else None)


def _step_hits(data, lo=0, hi=None):
    """Where each ``ProfilerStep#`` of ``data[lo:hi]`` starts, found from its ``#`` (``data``:
    str or bytes-like)."""
    hi = len(data) if hi is None else hi
    prefix, mark = (STEP_PREFIX, "#") if isinstance(data, str) else (_STEP_BYTES, b"#")
    back = len(prefix) - 1
    i = data.find(mark, lo + back, hi)
    while i >= 0:
        if data.startswith(prefix, i - back):
            yield i - back
        i = data.find(mark, i + 1, hi)


_STEP_BYTES = STEP_PREFIX.encode()


def _marker_hits(data, needle, lo, hi, scratch):
    """Where ``needle`` starts in the bytes ``data[lo:hi]``. numpy marks where its first and
    last bytes line up (many bytes per compare; ~18 places per MB of a trace for "process_"),
    into a bytearray whose marks ``find`` reaches by memchr, and ``startswith`` confirms each:
    10 ms per 95 MB trace, against 34 for ``bytes.find`` (a trace's text is full of the
    needle's letters, so find's skip table rarely skips) and 17 for ``numpy.flatnonzero``."""
    numpy = need("numpy")

    last = len(needle) - 1
    if hi - lo <= last:
        return []
    text = numpy.frombuffer(data, numpy.uint8, count=hi - lo, offset=lo)
    starts = len(text) - last
    lined_up, other = scratch.views(starts)
    numpy.equal(text[last:], needle[last], out=lined_up)
    numpy.logical_and(lined_up, numpy.equal(text[:starts], needle[0], out=other), out=lined_up)
    marks = scratch.raw(0)  # lined_up's bytes
    hits, i = [], marks.find(1, 0, starts)
    while i >= 0:
        if data.startswith(needle, lo + i):
            hits.append(lo + i)
        i = marks.find(1, i + 1, starts)
    return hits


# one per process, 2 MB for 1 MB pieces (scratch.py says why they are kept)
_SCRATCH = BoolScratch(2)
