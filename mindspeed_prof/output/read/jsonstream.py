"""Read the events of a chrome trace in pieces, in constant memory.

Two shapes exist: torch_npu's ``trace_view.json`` is a bare JSON array of events, torch's
``*.pt.trace.json`` is an object whose ``traceEvents`` key holds that array. Either can be
several GB.

The file is read in chunks and each chunk is cut after its last ``}, {`` (an event boundary
when the cut is at the top level). The piece before the cut is checked as one array by a C
decoder, which is what makes this fast. A cut that lands inside a nested value or a string
can never form a valid array (a bracket or a quote stays open), so a failed piece only means
"decode this stretch one event at a time": it costs time, never a wrong answer.

The bytes stay where they were read: one buffer, filled with ``readinto`` and never resized
(a piece is checked in place, the comma before it and the one after it standing in for the
array's brackets while the decoder looks), so a 1 MB piece costs no allocation. Copying each
piece into a new string cost as much CPU as validating it: a fresh 1 MB object is fresh pages,
and on a VM every page fault counts (figure 5: 0.37 -> 0.22 s of CPU per 200 MB trace).
"""

import gzip
import json

from .errors import CorruptFile

# 1 MiB, not more: a piece becomes ~6k event dicts at once; at 4 MiB a reader process peaked
# 45 MiB higher and scanned 20 % slower (benchmarks/ figure 5, 1 GB of trace_view.json).
CHUNK_BYTES = 1 << 20
# One event never needs this much text; past it a "cut short" event is really a broken file.
MAX_EVENT_BYTES = 1 << 26
_WS = b" \t\r\n"
_WS_STR = " \t\r\n"
_raw_decode = json.JSONDecoder().raw_decode


class Piece:
    """Events ``data[lo:hi]`` (``{...}, ..., {...}``), valid until the next piece is read."""

    __slots__ = ("data", "lo", "hi")

    def __init__(self, data, lo, hi):
        self.data, self.lo, self.hi = data, lo, hi

    def text(self):
        return str(memoryview(self.data)[self.lo:self.hi], "utf-8")


class _Source:
    """Bytes of a (possibly gzipped) file with a movable read position.

    ``buf[pos:end]`` holds the bytes not consumed yet; ``buf[0]`` is never data (it is where
    the first piece's ``[`` goes). ``base`` is the file offset of ``buf[0]``."""

    def __init__(self, path, chunk):
        opener = gzip.open if str(path).endswith(".gz") else open
        self._handle = opener(path, "rb")
        self._chunk = chunk
        self.buf = bytearray(2 * chunk + 2)
        self.view = memoryview(self.buf)
        self.pos = self.end = 1
        self.base = -1
        self.eof = False

    def close(self):
        self.view.release()
        self._handle.close()

    def fill(self, want):
        """Read until ``want`` bytes lie after pos, or the file ends."""
        left = self.end - self.pos
        if self.pos > 1:
            self.view[1:1 + left] = self.view[self.pos:self.end]  # memmove, in place
            self.base += self.pos - 1
            self.pos, self.end = 1, 1 + left
        if 1 + max(want, left + self._chunk) > len(self.buf):  # a huge event: a bigger buffer
            bigger = bytearray(2 * max(want, left + self._chunk) + 2)
            bigger[:self.end] = self.view[:self.end]
            self.view.release()
            self.buf, self.view = bigger, memoryview(bigger)
        while self.end - self.pos < want and not self.eof:
            room = min(len(self.buf) - self.end, max(self._chunk, want - (self.end - self.pos)))
            try:
                got = self._handle.readinto(self.view[self.end:self.end + room])
            except (OSError, EOFError) as exc:  # gzip damage surfaces here
                raise CorruptFile(f"unreadable at byte {self.base + self.end}: {exc}") from None
            if not got:
                self.eof = True
            self.end += got or 0

    def skip_ws(self):
        """The next non-blank byte as a 1-char str ('' at end of file); pos moves onto it."""
        while True:
            buf, n = self.buf, self.end
            while self.pos < n and buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < n:
                return chr(buf[self.pos])
            if self.eof:
                return ""
            self.fill(self._chunk)

    def text(self, end=None, partial=False):
        """Decode buf[pos:end]; with ``partial``, a multi-byte character cut at the end waits."""
        end = self.end if end is None else end
        try:
            return str(self.view[self.pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            if partial and exc.reason == "unexpected end of data":
                return str(self.view[self.pos:self.pos + exc.start], "utf-8")
            raise CorruptFile(f"not UTF-8 at byte {self.base + self.pos + exc.start}") from None

    def value(self):
        """Decode one small JSON value at pos (a key, or a non-event value of a torch trace)."""
        while True:
            text = self.text(partial=not self.eof)
            try:
                obj, end = _raw_decode(text)
            except json.JSONDecodeError as exc:
                if self.eof or self.end - self.pos > MAX_EVENT_BYTES:
                    raise CorruptFile(_describe_at(exc, self, text)) from None
                self.fill(self.end - self.pos + self._chunk)
                continue
            if end >= len(text) and not self.eof:  # a number may go on in the next chunk
                self.fill(self.end - self.pos + self._chunk)
                continue
            self.pos += len(text[:end].encode("utf-8"))
            return obj

    def check(self, validate, cut):
        """``validate`` the events ``buf[pos:cut + 1]`` as one array, in place: the bytes
        before and after them (a comma, ``[`` or blanks) become the brackets meanwhile."""
        buf, before, after = self.buf, self.buf[self.pos - 1], self.buf[cut + 1]
        buf[self.pos - 1], buf[cut + 1] = 0x5B, 0x5D  # "[", "]"
        try:
            return validate(self.view[self.pos - 1:cut + 2])
        finally:
            buf[self.pos - 1], buf[cut + 1] = before, after


def _maybe_cut(exc, text):
    # raw_decode reports an unterminated string at the string's start, every other cut at the end.
    return exc.pos >= len(text.rstrip(_WS_STR)) - 1 or exc.msg.startswith("Unterminated string")


def last_boundary(data, lo, hi):
    """Index of the ``}`` of the last ``}<ws>,<ws>{`` in data[lo:hi], or -1."""
    close, comma, brace = ("}", ",", "{") if isinstance(data, str) else (b"}", b",", b"{")
    ws = _WS_STR if isinstance(data, str) else _WS
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
    src = _Source(path, chunk)
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
        while i < n and text[i] in _WS_STR:
            i += 1
        start = i
        try:
            obj, i = _raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if cut_at_end and _maybe_cut(exc, text):
                return events, start, False
            raise CorruptFile(_describe_at(exc, src, text)) from None
        events.append(obj)
        while i < n and text[i] in _WS_STR:
            i += 1
        if i >= n:
            return events, n, False
        if text[i] == "]":
            return events, i + 1, True
        if text[i] != ",":
            raise CorruptFile(f"invalid JSON at byte {_byte_at(src, text, i)}: expected ',' or "
                              f"']' between events, found {text[i]!r}")
        i += 1


def _describe_at(exc, src, text):
    where = _byte_at(src, text, exc.pos)
    if src.eof and _maybe_cut(exc, text):
        return f"truncated JSON: the file ends inside a value (byte {where})"
    return f"invalid JSON at byte {where}: {exc.msg}"


def _byte_at(src, text, index):
    return src.base + src.pos + len(text[:index].encode("utf-8"))


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
    import msgspec  # the CLI's dependency, never the training side's

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
