"""The merged file, written event by event: gzip JSON that Chrome's trace viewer and Perfetto
open (``{"displayTimeUnit": "ms", "traceEvents": [...], "mindspeed_prof": {...}}``).

One rank at a time, one piece of its file at a time (``read/jsonstream.py``): memory holds a
piece of events and, per rank, its thread and id maps, whatever the number of ranks. Each rank
is one process (``pid`` = rank + 1: pid 0 is the idle task to some viewers), named with its
place; the processes of its own file (the host, ``Ascend Hardware``, a GPU) become its threads,
named ``{process} · {thread}``. Timestamps are written as numbers (torch_npu writes strings,
which Perfetto mis-nests), shifted by the rank's offset; flow and async ids are renumbered per
rank so that two ranks' ids never join.

Where the C extension ``_eventpatch`` is built (``setup.py``; optional), a piece of events is
rewritten in its bytes: pid/tid/ts/id written anew, the other fields a viewer reads copied byte
for byte, every decision the same as ``_RankWriter._rewrite`` below (an event it does not
decide itself comes back here, in its place). Otherwise, or with ``MINDSPEED_PROF_PURE=1``,
events are decoded into a ``msgspec.Struct`` of the fields a viewer reads, ``args`` kept as the
raw JSON text it was (never built into Python objects, written back as it came): 2.5x the
events per second of dicts. Fields no viewer of the Chrome format reads are not written.
"""

import gc
import os
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, Optional, Tuple

from .. import outfile
from ..deps import need
from ..read import jsonstream
from ..read.numbers import TIME_BOUND_US
from ..read.tracescan import STEP_PREFIX, step_number, to_float
from .deflate import GZIP_HEAD, Deflated, codec, crc32_combine, trailer

# displayTimeUnit first: Perfetto counts one read after the events as "too late"; our own key
# last: a reader that stops at a key it does not know has read every event by then
HEADER = b'{"displayTimeUnit":"ms","traceEvents":[\n'
WITH_IDS = frozenset(("s", "t", "f", "b", "e", "n", "S", "T", "F", "p"))
_UNHASHABLE = (list, dict)  # a pid or tid JSON gives as an array or object
PART_COPY_BYTES = 1 << 20
COUNTS_SUFFIX = ".counts"
COUNTED = ("events", "dropped_short", "dropped_outside", "unreadable")
_EVENT_TYPES: Dict[str, Any] = {}
PURE_ENV = "MINDSPEED_PROF_PURE"
EXACT_FLOAT = 2 ** 53


def native() -> Any:
    """The C rewrite (``_eventpatch``), or None: not built, or ``MINDSPEED_PROF_PURE=1``."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        from . import _eventpatch  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _eventpatch


def _id_map() -> Any:
    """The (cat, id) -> number map of a rank's flow ids: the C rewrite's own (``IdMap``,
    used by both paths: an id is one number whichever path meets it first), else a dict."""
    patch = native()
    return patch.IdMap() if patch is not None else {}


def _types():
    """The event Struct and its decoders, made once (msgspec is the CLI's, imported late)."""
    if not _EVENT_TYPES:
        msgspec = need("msgspec")
        codec()  # before the workers fork: each finds the compressor imported

        class Event(msgspec.Struct, omit_defaults=True):
            # every field of the Trace Event Format a viewer reads
            ph: Any = None
            name: Any = None
            cat: Any = None
            pid: Any = None
            tid: Any = None
            ts: Any = None
            dur: Any = None
            tts: Any = None
            tdur: Any = None
            id: Any = None
            id2: Any = None
            bp: Any = None
            s: Any = None
            scope: Any = None
            cname: Any = None
            bind_id: Any = None
            flow_in: Any = None
            flow_out: Any = None
            args: msgspec.Raw = msgspec.Raw(b"")

        _EVENT_TYPES.update(
            Event=Event, decode=msgspec.json.Decoder(list[Event]).decode,
            decode_one=msgspec.json.Decoder(Event).decode, encode=msgspec.json.encode,
            args=msgspec.json.decode, error=msgspec.DecodeError, raw=msgspec.Raw)
    return _EVENT_TYPES


@dataclass
class Counts:
    events: int = 0
    dropped_short: int = 0
    dropped_outside: int = 0
    unreadable: int = 0


@dataclass
class _Rank:
    """What one rank's events are rewritten with, and what its threads are named."""

    pid: int
    shift: float
    keep_steps: Optional[Tuple[int, int]]
    min_us: float
    tids: Dict[tuple, int] = field(default_factory=dict)
    ids: Any = field(default_factory=_id_map)  # (cat, id) -> number
    next_id: int = 0
    process_names: Dict[object, str] = field(default_factory=dict)
    thread_names: Dict[tuple, str] = field(default_factory=dict)
    sort: Dict[object, int] = field(default_factory=dict)

    def tid(self, key):
        tid = self.tids.get(key)
        if tid is None:
            tid = self.tids[key] = len(self.tids) + 1
        return tid


class TimelineWriter:
    """The output file: its head, then each rank's part (``write_rank``) in rank order, then
    ``close(metadata)``; it appears whole (written to a temporary name, then renamed).

    Parts come compressed (``deflate.py``): a ``.gz`` output takes their bytes as they are,
    between its own pieces; a ``.json`` output inflates them."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._types = _types()
        self.tmp = outfile.temporary(path, "tmp")
        raw = open(self.tmp, "wb")
        self._raw: BinaryIO = raw
        self._gzip = path.endswith(".gz")
        self._own = Deflated(raw)  # the head, commas and tail (.gz); only counted (.json)
        self._crc, self._length = 0, 0
        self._first = True
        self.counts = Counts()
        try:  # a failed (or signalled) start leaves no temporary file either
            if self._gzip:
                raw.write(GZIP_HEAD)
            self._text(HEADER)
        except BaseException:
            self.abandon()
            raise

    def _text(self, data: bytes) -> None:
        """Bytes of our own, in the output's form."""
        if self._gzip:
            self._own.write(data)
            self._own.sync()
        else:
            self._raw.write(data)
        self._crc = zlib.crc32(data, self._crc)
        self._length += len(data)

    def add_part(self, part: str) -> None:
        """Append one rank's part and add its counts (``write_rank``'s; both then deleted)."""
        with open(part + COUNTS_SUFFIX, "rb") as handle:
            counts = self._types["args"](handle.read())
        os.unlink(part + COUNTS_SUFFIX)
        length, crc = int(counts["length"]), int(counts["crc"])
        with open(part, "rb") as handle:
            if length:
                if not self._first:
                    self._text(b",\n")
                self._first = False
                self._join(handle)
                self._crc = crc32_combine(self._crc, crc, length)
                self._length += length
        os.unlink(part)
        for name in COUNTED:
            setattr(self.counts, name, getattr(self.counts, name) + int(counts[name]))

    def _join(self, handle: BinaryIO) -> None:
        inflate = None if self._gzip else zlib.decompressobj(-zlib.MAX_WBITS)
        while True:
            block = handle.read(PART_COPY_BYTES)
            if not block:
                break
            self._raw.write(block if inflate is None else inflate.decompress(block))
        if inflate is not None:
            self._raw.write(inflate.flush())

    def close(self, metadata: dict) -> int:
        """Finish the file with ``metadata`` under ``"mindspeed_prof"``; its size in bytes."""
        tail = b'\n],"mindspeed_prof":' + \
            self._types["encode"](metadata) + b"}\n"
        if self._gzip:
            self._own.write(tail)
            self._own.finish()
            self._crc = zlib.crc32(tail, self._crc)
            self._length += len(tail)
            self._raw.write(trailer(self._crc, self._length))
        else:
            self._raw.write(tail)
        self._raw.close()
        os.replace(self.tmp, self.path)
        return os.path.getsize(self.path)

    def abandon(self) -> None:
        try:
            self._raw.close()
        except OSError:
            pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def write_rank(part: str, rank: int, name: str, files, shift: float,
               keep_steps: Optional[Tuple[int, int]], min_us: float, origin_us: int) -> Counts:
    """Write rank ``rank``'s events (its process, its threads) to the file ``part``, events
    separated by commas, no brackets (run in a worker process: ranks in parallel, each
    streamed). ``files``: (path, base_ns, (lo, hi) or None) per capture; events whose start
    lies outside [lo, hi) are left out (None: all)."""
    with open(part, "wb") as out, _no_collection():
        deflated = Deflated(out)  # compressed here, in the rank's worker (deflate.py)
        writer = _RankWriter(deflated, origin_us)
        writer.rank(rank, name, files, shift, keep_steps, min_us)
        deflated.sync()
    with open(part + COUNTS_SUFFIX, "wb") as out:  # read as the part joins the file
        out.write(writer._types["encode"]({**{k: getattr(writer.counts, k) for k in COUNTED},
                                           "crc": deflated.crc, "length": deflated.length}))
    return writer.counts


@contextmanager
def _no_collection():
    """The cyclic garbage collector held off while a rank is written: a write makes no
    cycles, but its tracked objects (a piece's Structs on the Python path, a key tuple per
    flow in a dict id map: 118 K per 95 MB rank) trigger collections that walk them all and
    find nothing. Per 95 MB rank: the Python path 1.81-1.95 -> 1.76-1.82 s of CPU; the C path
    with the dict map 0.39-0.42 -> 0.34-0.35 s (its map is now the C one, ``IdMap``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _RankWriter:
    def __init__(self, out, origin_us):
        self._out = out
        self.origin_us = origin_us
        self._types = _types()
        self._first = True
        self.counts = Counts()

    def _write(self, events):
        if not events:
            return
        body = self._types["encode"](events)[1:-1]  # the list's items, without its brackets
        self._write_body(body, len(events))

    def _write_body(self, body, count):
        if not count:
            return
        if not self._first:
            self._out.write(b",\n")  # apart: a megabyte's copy a piece saved
        self._out.write(body)
        self._first = False
        self.counts.events += count

    def rank(self, rank, name, files, shift, keep_steps, min_us):
        state = _Rank(pid=rank + 1, shift=shift, keep_steps=keep_steps, min_us=min_us)
        self._write([_meta("process_name", state.pid, 0, name=name),
                     _meta("process_sort_index", state.pid, 0, sort_index=rank)])
        decode = self._types["decode"]
        refused = self._types["error"]

        def structs(array):  # a piece the Struct refuses: jsonstream decodes it one by one
            try:
                return decode(array)
            except (refused, RecursionError):
                raise ValueError("not an array of events") from None

        patch = native()
        for path, base_ns, span in files:
            params = _native_params(state, base_ns, span, self.origin_us) if patch else None
            validate = structs if params is None else \
                self._patched(patch, params, state, base_ns, span, structs)
            for piece, batch in jsonstream.pieces(path, validate):
                if piece is None:
                    batch = self._as_structs(batch)
                elif type(batch) is tuple:  # rewritten in C: (bytes, kept, counts...)
                    self._write_body(batch[0], batch[1])
                    self.counts.dropped_short += batch[2]
                    self.counts.dropped_outside += batch[3]
                    self.counts.unreadable += batch[4]
                    continue
                # within the piece: args are views of the reading buffer until the next piece
                self._write(self._rewrite(batch, state, base_ns, span))
            state.ids.clear()  # a capture's ids are its own
        self._write(_thread_names(state))

    def _patched(self, patch, params, state, base_ns, span, structs):
        """The piece validator that rewrites in C: its result, or the piece's Structs where
        the C code leaves the piece to this module (before it changed any state)."""
        decode_one, encode = self._types["decode_one"], self._types["encode"]

        def one(raw):  # an event the C code does not decide: here, in its place
            kept = self._rewrite([decode_one(raw)], state, base_ns, span)
            return encode(kept[0]) if kept else None

        def validate(array):
            done = patch.rewrite(array, params, state.tids, state.ids, state, one)
            return structs(array) if done is None else done
        return validate

    def _as_structs(self, events):
        """Dicts decoded one by one (a piece cut inside a value) as Structs, through their
        JSON text; an event msgspec cannot carry (NaN, a lone surrogate) is counted, left out."""
        encode, decode_one = self._types["encode"], self._types["decode_one"]
        result = []
        for event in events:
            try:
                result.append(decode_one(encode(event)))
            except (TypeError, ValueError, self._types["error"]):
                self.counts.unreadable += 1
        return result

    def _rewrite(self, batch, state, base_ns, span):
        kept = []
        counts = self.counts
        origin = self.origin_us
        shift, exact_shift = _shifts(state, base_ns, origin)
        lo, hi = span if span else (None, None)
        lo_text, hi_text = (lo - origin, hi - origin) if span else (None, None)
        keep_steps, min_us = state.keep_steps, state.min_us
        tids, ids = state.tids, state.ids
        head, head_us = None, 0
        for event in batch:
            ph = event.ph
            if ph == "M":
                _remember(state, event, self._types["args"])
                continue
            ts = event.ts
            if type(ts) is str:  # torch_npu's "1704161511420289.011": exact, from the text
                # the digits above 10**9 µs apart, as an integer (float() of the whole string
                # would round the fraction away); they change once in 1000 s of trace
                dot = ts.find(".")
                cut = (dot if dot >= 0 else len(ts)) - 9
                try:
                    if cut > 0:
                        if ts[:cut] != head:
                            head = ts[:cut]
                            head_us = int(head) * 1_000_000_000 - origin
                        ts = head_us + float(ts[cut:])
                    else:
                        ts = float(ts) - origin
                except ValueError:
                    head = None
                    counts.unreadable += 1
                    continue
                if not -TIME_BOUND_US <= ts <= TIME_BOUND_US:  # "nan", "inf", "1e400"
                    counts.unreadable += 1
                    continue
                if lo is not None and not lo_text <= ts < hi_text:
                    counts.dropped_outside += 1
                    continue
                out_ts = ts + exact_shift
            elif type(ts) is float or type(ts) is int:
                if not -TIME_BOUND_US <= ts <= TIME_BOUND_US:  # read/numbers.py: unreadable
                    counts.unreadable += 1
                    continue
                if lo is not None and not lo <= ts < hi:
                    counts.dropped_outside += 1
                    continue
                out_ts = ts + shift
            else:
                counts.unreadable += 1
                continue
            if ph == "X":
                dur = event.dur
                if type(dur) is not float and type(dur) is not int:
                    dur = to_float(dur)
                    if dur is None:
                        counts.unreadable += 1
                        continue
                    event.dur = dur
                elif not -TIME_BOUND_US <= dur <= TIME_BOUND_US:
                    counts.unreadable += 1
                    continue
                name = event.name
                if type(name) is str and name.startswith(STEP_PREFIX):
                    number = step_number(name)
                    if keep_steps and number is not None \
                            and not keep_steps[0] <= number <= keep_steps[1]:
                        counts.dropped_outside += 1
                        continue
                elif dur < min_us:
                    counts.dropped_short += 1
                    continue
            event.ts = round(out_ts, 3)
            key = (event.pid, event.tid)
            tid = tids.get(key) if type(key[0]) not in _UNHASHABLE \
                and type(key[1]) not in _UNHASHABLE else None
            if tid is None:
                tid = state.tid((_hashable(event.pid), _hashable(event.tid)))
            event.tid = tid
            event.pid = state.pid
            if type(ph) is str and ph in WITH_IDS and event.id is not None:
                cat = event.cat
                key = (cat if type(cat) is str else str(cat), event.id)
                if type(key[1]) is int or type(key[1]) is str:
                    number = ids.get(key)
                    if number is None:  # ids are global to a file: the rank's pid in front
                        state.next_id += 1
                        number = ids[key] = (state.pid << 32) + state.next_id
                    event.id = number
            kept.append(event)
        return kept


def _shifts(state, base_ns, origin):
    """What is added to a numeric ts (relative to the file's base) and to torch_npu's text ts
    (read relative to ``origin``): one computation for both paths, which must agree."""
    # in integers first: base and origin are ~1.8e15 µs, past a double's µs fractions
    return (state.shift + (base_ns - origin * 1000) / 1000.0,
            state.shift + base_ns / 1000.0)


def _native_params(state, base_ns, span, origin):
    """What the C rewrite is given, as doubles and int64s; None where one of them is not held
    exactly (the Python path compares ints and floats exactly)."""
    shift, exact_shift = _shifts(state, base_ns, origin)
    if span:
        lo, hi = span
        bounds = [lo, hi, lo - origin, hi - origin]
    else:
        bounds = [0.0, 0.0, 0.0, 0.0]
    for value in bounds:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if isinstance(value, int) and not -EXACT_FLOAT <= value <= EXACT_FLOAT:
            return None
    steps = state.keep_steps
    if steps and not all(type(n) is int and abs(n) < 2 ** 62 for n in steps):
        return None
    if type(origin) is not int or not -2 ** 62 < origin < 2 ** 62 or \
            type(state.pid) is not int or not 0 <= state.pid < 2 ** 30:
        return None
    return (state.pid, float(shift), float(exact_shift), origin, bool(span),
            *(float(v) for v in bounds), bool(steps), *(steps if steps else (0, 0)),
            float(state.min_us))


def _meta(kind, pid, tid, **args):
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def _remember(state, event, decode):
    try:
        args = decode(event.args) if len(event.args) else {}
    except ValueError:
        return
    if not isinstance(args, dict):
        return
    pid, kind = _hashable(event.pid), event.name
    if kind == "process_name" and isinstance(args.get("name"), str):
        state.process_names[pid] = args["name"]
    elif kind == "thread_name" and isinstance(args.get("name"), str):
        state.thread_names[(pid, _hashable(event.tid))] = args["name"]
    elif kind == "process_sort_index" and isinstance(args.get("sort_index"), int):
        state.sort[pid] = args["sort_index"]


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value if not isinstance(value, dict) else str(value)


def _fallback(kind, value):
    if value in (None, ""):
        return "trace"
    return value if isinstance(value, str) else f"{kind} {value}"


def _thread_names(state):
    """A thread per (process, thread) of the rank's files, named after both, host first."""
    events = []
    order = sorted(state.tids.items(), key=lambda kv: (
        state.sort.get(kv[0][0], 0), str(kv[0][0]), str(kv[0][1])))
    for index, ((pid, tid), new) in enumerate(order):
        process = state.process_names.get(pid) or _fallback("process", pid)
        thread = state.thread_names.get((pid, tid)) or _fallback("thread", tid)
        events.append(_meta("thread_name", state.pid, new, name=f"{process} · {thread}"))
        events.append(_meta("thread_sort_index", state.pid, new, sort_index=index))
    return events
