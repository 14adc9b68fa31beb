"""Read the events of a chrome trace in pieces, in constant memory.

Two shapes exist: torch_npu's ``trace_view.json`` is a bare JSON array of events, torch's
``*.pt.trace.json`` is an object whose ``traceEvents`` key holds that array. Either can be
several GB.

The file is read in chunks and each chunk is cut after its last ``}, {`` (an event boundary
when the cut is at the top level). The piece before the cut is checked as one array by a C
decoder, which is what makes this fast. A cut that lands inside a nested value or a string
can never form a valid array (a bracket or a quote stays open), so a failed piece only means
"decode this stretch one event at a time": it costs time, never a wrong answer.

The bytes stay in one buffer, checked in place (``jsonbytes.py``).
"""

import json

from ..deps import need
from .errors import CorruptFile
from .jsonbytes import (MAX_EVENT_BYTES, WS, WS_STR, Piece, Source, byte_at, describe_at,
                        maybe_cut)

# 1 MiB, not more: a piece becomes ~6k event dicts at once; at 4 MiB a reader process peaked
# 45 MiB higher and scanned 20 % slower (benchmarks/ figure 5, 1 GB of trace_view.json).
CHUNK_BYTES = 1 << 20
_raw_decode = json.JSONDecoder().raw_decode


def last_boundary(data, lo, hi):
    """Index of the ``}`` of the last ``}<ws>,<ws>{`` in data[lo:hi], or -1."""
    close, comma, brace = ("}", ",", "{") if isinstance(data, str) else (b"}", b",", b"{")
    ws = WS_STR if isinstance(data, str) else WS
    needle = close + comma
    j = hi
    while True:
        k = data.rfind(needle, lo, j)
        if k < 0:
            return -1
        m = k + 2
        while m < hi and data[m:m + 1] in ws and m - k < 64:
            m += 1
        if data[m:m + 1] == brace:
            return k
        j = k


def pieces(path, validate, chunk=CHUNK_BYTES):
    """Yield ``(text, result)`` for consecutive runs of events.

    ``validate(array)`` checks the bytes of ``[`` + the piece's events + ``]`` (a
    memoryview, valid during the call) and returns what the caller wants from it (a count, a
    list...), raising ValueError when it is not valid JSON; ``piece`` is a ``Piece``, valid
    until the next one is read. When the fast route fails, ``piece`` is None and ``result`` is
    the list of events decoded one by one.
    Raises ``CorruptFile`` (saying where, and whether the file looks truncated).
    """
    src = Source(path, chunk)
    try:
        src.fill(chunk)
        first = src.skip_ws()
        if src.buf.startswith(b"\xef\xbb\xbf", src.pos):
            src.pos += 3
            first = src.skip_ws()
        if first == "[":
            src.pos += 1
            yield from _array(src, validate)
        elif first == "{":
            src.pos += 1
            yield from _object(src, validate)
        elif first == "":
            raise CorruptFile("empty file (no JSON)")
        else:
            raise CorruptFile(f"not a chrome trace: starts with {first!r}, expected '[' or '{{'")
        if src.skip_ws():
            raise CorruptFile(f"extra data after the trace at byte {src.base + src.pos}")
    finally:
        src.close()


def _object(src, validate):
    """A torch trace: stream ``traceEvents``, decode every other key whole."""
    seen_events = False
    while True:
        token = src.skip_ws()
        if token == "}" and not seen_events:
            raise CorruptFile("no 'traceEvents' in this trace object")
        if token != '"':
            raise _unexpected(src, "a key string", token)
        key = src.value()
        if src.skip_ws() != ":":
            raise _unexpected(src, "':'")
        src.pos += 1
        if key == "traceEvents" and src.skip_ws() == "[":
            src.pos += 1
            seen_events = True
            yield from _array(src, validate)
        else:
            if not src.skip_ws():
                raise CorruptFile("truncated JSON: the file ends inside the trace object")
            src.value()
        sep = src.skip_ws()
        if sep == "}":
            src.pos += 1
            break
        if sep != ",":
            raise _unexpected(src, "',' or '}'", sep)
        src.pos += 1
    if not seen_events:
        raise CorruptFile("no 'traceEvents' array in this trace object")


def _array(src, validate):
    if src.skip_ws() == "]":
        src.pos += 1
        return
    floor = 0  # file offset past a cut known to be nested: the next cut must lie beyond it
    while True:
        if src.end - src.pos < src._chunk and not src.eof:
            src.fill(src._chunk)
        lo = max(src.pos, floor - src.base)
        # at the end of the file too: only the last event is left to decode one by one
        cut = last_boundary(src.buf, lo, src.end)
        if cut < 0:
            if not src.eof:
                if src.end - src.pos > MAX_EVENT_BYTES:
                    raise CorruptFile(f"no event boundary in {MAX_EVENT_BYTES >> 20} MB after "
                                      f"byte {src.base + src.pos}: the file is corrupt")
                src.fill(src.end - src.pos + src._chunk)
                continue
            # The tail: the last events, the closing bracket and (torch) the remaining keys.
            text = src.text()
            events, used, closed = _one_by_one(text, src)
            if events:
                yield None, events
            if not closed:
                raise CorruptFile("truncated JSON: the file ends inside the event array")
            src.pos += len(text[:used].encode("utf-8"))
            return
        try:
            result = src.check(validate, cut)
        except ValueError:
            text = src.text(cut + 1)  # bad UTF-8 is named here, where the old decode named it
            events, used, closed = _one_by_one(text, src, cut_at_end=True)
            if events:
                yield None, events
            src.pos += len(text[:used].encode("utf-8"))
            if closed:  # the cut lay beyond the array, in a torch trace's trailing keys
                return
            if used >= len(text):
                _after_piece(src)
            else:
                floor = src.base + cut + 1
            continue
        floor = 0
        piece = Piece(src.buf, src.pos, cut + 1)
        src.pos = cut + 1
        yield piece, result
        _after_piece(src)


def _after_piece(src):
    """Step over the comma that follows a piece (it is there: the cut was at ``},``)."""
    src.skip_ws()
    src.pos += 1


def _one_by_one(text, src, cut_at_end=False):
    """Decode events separated by commas until the text ends or the array closes.

    Returns (events, characters used, whether ']' closed the array). With ``cut_at_end``,
    an event broken off at the end of the text is left for the next read.
    """
    events = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in WS_STR:
            i += 1
        start = i
        try:
            obj, i = _raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if cut_at_end and maybe_cut(exc, text):
                return events, start, False
            raise CorruptFile(describe_at(exc, src, text)) from None
        events.append(obj)
        while i < n and text[i] in WS_STR:
            i += 1
        if i >= n:
            return events, n, False
        if text[i] == "]":
            return events, i + 1, True
        if text[i] != ",":
            raise CorruptFile(f"invalid JSON at byte {byte_at(src, text, i)}: expected ',' or "
                              f"']' between events, found {text[i]!r}")
        i += 1


def _unexpected(src, wanted, got=None):
    got = src.skip_ws() if got is None else got
    if not got:
        return CorruptFile("truncated JSON: the file ends inside the trace")
    return CorruptFile(f"invalid JSON at byte {src.base + src.pos}: expected {wanted}, "
                       f"found {got!r}")


def iter_event_batches(path, chunk=CHUNK_BYTES):
    """Lists of decoded events, in file order; raises ``CorruptFile`` where the file breaks."""
    for _, result in pieces(path, _array_loader(), chunk):
        yield result


def complete_events(path, chunk=CHUNK_BYTES):
    """The complete (``"ph": "X"``) events of a trace, in file order; raises ``CorruptFile``
    where the file breaks. (``torchtrace`` keeps its own loop: it also counts every event.)"""
    for batch in iter_event_batches(path, chunk):
        for event in batch:
            if isinstance(event, dict) and event.get("ph") == "X":
                yield event


def _array_loader():
    """``array bytes -> list``: msgspec (1.6x json.loads on a torch trace), ``json`` where
    msgspec refuses what ``json`` reads (NaN, 1e999, lone surrogates), so the events are the
    same."""
    msgspec = need("msgspec")  # the CLI's dependency, never the training side's

    decode, refused = msgspec.json.decode, msgspec.DecodeError

    def loads(array):
        try:
            return decode(array)
        except (refused, RecursionError):
            try:
                return json.loads(str(array, "utf-8"))
            except UnicodeDecodeError:
                raise ValueError("not UTF-8") from None
    return loads
