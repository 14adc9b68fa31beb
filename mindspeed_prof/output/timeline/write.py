"""The merged file, written event by event: gzip JSON that Chrome's trace viewer and Perfetto
open (``{"traceEvents": [...], "displayTimeUnit": "ms", "mindspeed_prof": {...}}``).

One rank at a time, one piece of its file at a time (``read/jsonstream.py``): memory holds a
piece of events and, per rank, its thread and id maps, whatever the number of ranks. Each rank
is one process (``pid`` = rank + 1: pid 0 is the idle task to some viewers), named with its
place; the processes of its own file (the host, ``Ascend Hardware``, a GPU) become its threads,
named ``{process} · {thread}``. Timestamps are written as numbers (torch_npu writes strings,
which Perfetto mis-nests), shifted by the rank's offset; flow and async ids are renumbered per
rank so that two ranks' ids never join.
"""

import gzip
import os
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from ..deps import need
from ..read import jsonstream
from ..read.tracescan import STEP_PREFIX, step_number, to_float

HEADER = b'{"traceEvents":[\n'
WITH_IDS = frozenset(("s", "t", "f", "b", "e", "n", "S", "T", "F", "p"))
GZIP_LEVEL = 1  # 3x faster than gzip's default 6 for ~15% more bytes (the file is a transfer)


@dataclass
class Counts:
    events: int = 0
    dropped_short: int = 0
    dropped_outside: int = 0


@dataclass
class _Rank:
    """What one rank's events are rewritten with, and what its threads are named."""

    pid: int
    shift: float
    keep_steps: Optional[Tuple[int, int]]
    min_us: float
    tids: Dict[tuple, int] = field(default_factory=dict)
    ids: Dict[tuple, int] = field(default_factory=dict)
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
    """``add_rank(...)`` per rank, then ``close(metadata)``; the file appears whole (written
    to a temporary name, then renamed)."""

    def __init__(self, path: str, origin_us: int = 0) -> None:
        self.path = path
        self.origin_us = origin_us
        self._tmp = f"{path}.{os.getpid()}.tmp"
        raw = open(self._tmp, "wb")
        self._out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) \
            if path.endswith(".gz") else raw
        self._raw = raw
        self._first = True
        self.counts = Counts()
        self._encode = need("msgspec").json.encode
        self._out.write(HEADER)

    def _write(self, events):
        if not events:
            return
        body = self._encode(events)[1:-1]  # the list's items, without its brackets
        self._out.write(body if self._first else b",\n" + body)
        self._first = False
        self.counts.events += len(events)

    def add_rank(self, rank: int, name: str, files, shift: float,
                 keep_steps: Optional[Tuple[int, int]], min_us: float) -> None:
        """``files``: (path, base_ns, (lo, hi) or None) per capture of the rank; events whose
        start lies outside [lo, hi) are left out (None: all)."""
        state = _Rank(pid=rank + 1, shift=shift, keep_steps=keep_steps, min_us=min_us)
        self._write([_meta("process_name", state.pid, 0, name=name),
                     _meta("process_sort_index", state.pid, 0, sort_index=rank)])
        for path, base_ns, span in files:
            for batch in jsonstream.iter_event_batches(path):
                self._write(self._rewrite(batch, state, base_ns, span))
            state.ids.clear()  # a capture's ids are its own
        self._write(_thread_names(state))

    def _rewrite(self, batch, state, base_ns, span):
        kept = []
        counts = self.counts
        origin = self.origin_us
        # in integers first: base and origin are ~1.8e15 µs, past a double's µs fractions
        shift = state.shift + (base_ns - origin * 1000) / 1000.0
        lo, hi = span if span else (None, None)
        keep_steps, min_us = state.keep_steps, state.min_us
        for event in batch:
            if type(event) is not dict:
                continue
            ph = event.get("ph")
            if ph == "M":
                _remember(state, event)
                continue
            ts = event.get("ts")
            exact = None
            if type(ts) is not float and type(ts) is not int:
                exact = _exact(ts, origin)  # torch_npu's "1704161511420289.011"
                ts = to_float(ts)
                if ts is None:
                    continue
            if lo is not None and not lo <= ts < hi:
                counts.dropped_outside += 1
                continue
            if ph == "X":
                dur = event.get("dur")
                if type(dur) is not float and type(dur) is not int:
                    dur = to_float(dur)
                    if dur is None:
                        continue
                    event["dur"] = dur
                name = event.get("name")
                if type(name) is str and name.startswith(STEP_PREFIX):
                    number = step_number(name)
                    if keep_steps and number is not None \
                            and not keep_steps[0] <= number <= keep_steps[1]:
                        counts.dropped_outside += 1
                        continue
                elif dur < min_us:
                    counts.dropped_short += 1
                    continue
            if exact is not None:
                event["ts"] = round(exact + state.shift + base_ns / 1000.0, 3)
            else:
                event["ts"] = round(ts + shift, 3)
            pid, tid = event.get("pid"), event.get("tid")
            if type(pid) is list or type(tid) is list:
                pid, tid = _hashable(pid), _hashable(tid)
            event["tid"] = state.tid((pid, tid))
            event["pid"] = state.pid
            if ph in WITH_IDS and "id" in event:
                cat = event.get("cat")
                key = (cat if type(cat) is str else str(cat), event["id"])
                if type(key[1]) is int or type(key[1]) is str:
                    number = state.ids.get(key)
                    if number is None:  # ids are global to a file: the rank's pid in front
                        state.next_id += 1
                        number = state.ids[key] = (state.pid << 32) + state.next_id
                    event["id"] = number
            kept.append(event)
        return kept

    def close(self, metadata: dict) -> int:
        """Finish the file with ``metadata`` under ``"mindspeed_prof"``; its size in bytes."""
        tail = b'\n],"displayTimeUnit":"ms","mindspeed_prof":' + self._encode(metadata) + b"}\n"
        self._out.write(tail)
        self._out.close()
        if self._raw is not self._out:
            self._raw.close()
        os.replace(self._tmp, self.path)
        return os.path.getsize(self.path)

    def abandon(self) -> None:
        for handle in (self._out, self._raw):
            try:
                handle.close()
            except OSError:
                pass
        try:
            os.unlink(self._tmp)
        except OSError:
            pass


def _exact(text, origin):
    """A decimal string's µs minus ``origin``, its whole and fractional parts apart (float() of
    the whole string would round the fraction away); None when not such a string."""
    if type(text) is not str:
        return None
    whole, _, fraction = text.strip().partition(".")
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        return None
    return (int(whole) - origin) + (float("0." + fraction) if fraction else 0.0)


def _meta(kind, pid, tid, **args):
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def _remember(state, event):
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    pid, kind = event.get("pid"), event.get("name")
    if kind == "process_name" and isinstance(args.get("name"), str):
        state.process_names[_hashable(pid)] = args["name"]
    elif kind == "thread_name" and isinstance(args.get("name"), str):
        state.thread_names[(_hashable(pid), _hashable(event.get("tid")))] = args["name"]
    elif kind == "process_sort_index" and isinstance(args.get("sort_index"), int):
        state.sort[_hashable(pid)] = args["sort_index"]


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def _fallback(kind, value):
    if value in (None, ""):
        return "trace"
    return value if isinstance(value, str) else f"{kind} {value}"


def _thread_names(state):
    """A thread per (process, thread) of the rank's files, named after both, host first."""
    events = []
    order = sorted(state.tids.items(), key=lambda kv: (
        state.sort.get(_hashable(kv[0][0]), 0), str(kv[0][0]), str(kv[0][1])))
    for index, ((pid, tid), new) in enumerate(order):
        key = (_hashable(pid), _hashable(tid))
        process = state.process_names.get(key[0]) or _fallback("process", pid)
        thread = state.thread_names.get(key) or _fallback("thread", tid)
        events.append(_meta("thread_name", state.pid, new, name=f"{process} · {thread}"))
        events.append(_meta("thread_sort_index", state.pid, new, sort_index=index))
    return events
