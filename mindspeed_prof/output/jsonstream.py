"""Stream the events of a chrome trace in constant memory.

Two shapes exist: torch_npu's ``trace_view.json`` is a bare JSON array of events, torch's
``*.pt.trace.json`` is an object whose ``traceEvents`` key holds that array. Either can be
several GB, so the file is read in chunks and decoded batch by batch.

Speed comes from handing the C decoder many events at once: a chunk is cut at its last
``},`` and the part before it is decoded as one array. A cut that falls inside a string or a
nested value cannot form a valid array (brackets or quotes stay open), so a failed batch only
means "decode this stretch one event at a time", never a wrong result.
"""

import codecs
import gzip
import json

from .errors import CorruptFile

CHUNK_CHARS = 1 << 22
# One event never needs this much text; past it a "cut" value is really a broken one.
MAX_EVENT_CHARS = 1 << 26
_WS = " \t\r\n"
_decoder = json.JSONDecoder()
_raw_decode = _decoder.raw_decode


class _Text:
    """Characters of a (possibly gzipped) UTF-8 file, refilled on demand."""

    def __init__(self, path, chunk):
        opener = gzip.open if str(path).endswith(".gz") else open
        self._handle = opener(path, "rb")
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._chunk = chunk
        self.buf = ""
        self.pos = 0
        self.consumed = 0  # characters dropped from the front of buf
        self.eof = False

    def close(self):
        self._handle.close()

    def offset(self, pos=None):
        return self.consumed + (self.pos if pos is None else pos)

    def more(self):
        """Append one chunk; False at end of file."""
        if self.eof:
            return False
        try:
            raw = self._handle.read(self._chunk)
            text = self._utf8.decode(raw, final=not raw)
        except (UnicodeDecodeError, OSError, EOFError, gzip.BadGzipFile) as exc:
            raise CorruptFile(f"unreadable at character {self.offset(len(self.buf))}: {exc}")
        if not raw:
            self.eof = True
        if self.pos:
            self.consumed += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += text
        return bool(raw) or bool(text)

    def skip_ws(self):
        """Position at the next non-blank character; returns it, or '' at end of file."""
        while True:
            buf, pos, n = self.buf, self.pos, len(self.buf)
            while pos < n and buf[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self.more():
                return ""

    def value(self):
        """Decode one JSON value at pos, reading more text while it is cut short."""
        while True:
            try:
                obj, end = _raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if _maybe_cut(exc, self.buf) and len(self.buf) - self.pos < MAX_EVENT_CHARS \
                        and self.more():
                    continue
                raise CorruptFile(_describe(exc, self)) from None
            # A number or literal touching the buffer end may continue in the next chunk.
            if end >= len(self.buf) and not isinstance(obj, (dict, list, str)) and self.more():
                continue
            self.pos = end
            return obj


def _maybe_cut(exc, buf):
    # raw_decode reports an unterminated string at the string's start, every other cut at the end.
    return exc.pos >= len(buf) - 8 or exc.msg.startswith("Unterminated string")


def _describe(exc, text):
    where = text.offset(exc.pos)
    if text.eof and _maybe_cut(exc, text.buf):
        return f"truncated JSON: the file ends inside a value (character {where})"
    return f"invalid JSON at character {where}: {exc.msg}"


def iter_event_batches(path, chunk_chars=CHUNK_CHARS):
    """Yield lists of events (dicts, as decoded) from a trace file of either shape.

    Raises ``CorruptFile`` (with the character offset and whether the file looks truncated)
    for anything that is not a complete chrome trace; events already yielded stay valid.
    """
    text = _Text(path, chunk_chars)
    try:
        first = text.skip_ws()
        if first == "\ufeff":
            text.pos += 1
            first = text.skip_ws()
        if first == "[":
            text.pos += 1
            yield from _array(text)
        elif first == "{":
            text.pos += 1
            yield from _object(text)
        elif first == "":
            raise CorruptFile("empty file (no JSON)")
        else:
            raise CorruptFile(f"not a chrome trace: starts with {first!r}, expected '[' or '{{'")
        if text.skip_ws():
            raise CorruptFile(f"extra data after the trace at character {text.offset()}")
    finally:
        text.close()


def iter_events(path, chunk_chars=CHUNK_CHARS):
    for batch in iter_event_batches(path, chunk_chars):
        yield from batch


def _object(text):
    """Top-level object: stream ``traceEvents``, decode every other key whole."""
    seen_events = False
    if text.skip_ws() == "}":
        text.pos += 1
        raise CorruptFile("no 'traceEvents' in this trace object")
    while True:
        if text.skip_ws() != '"':
            raise _unexpected(text, "a key string")
        key = text.value()
        if text.skip_ws() != ":":
            raise _unexpected(text, "':'")
        text.pos += 1
        if key == "traceEvents":
            if text.skip_ws() != "[":
                raise _unexpected(text, "'[' for traceEvents")
            text.pos += 1
            seen_events = True
            yield from _array(text)
        else:
            if not text.skip_ws():
                raise CorruptFile("truncated JSON: the file ends inside the trace object")
            text.value()
        sep = text.skip_ws()
        text.pos += 1 if sep else 0
        if sep == "}":
            break
        if sep != ",":
            raise _unexpected(text, "',' or '}'", sep)
    if not seen_events:
        raise CorruptFile("no 'traceEvents' in this trace object")


def _array(text):
    if text.skip_ws() == "]":
        text.pos += 1
        return
    while True:
        batch = _fast_batch(text)
        if batch is not None:
            yield batch
            continue
        if not text.skip_ws():
            raise CorruptFile("truncated JSON: the file ends inside the event array")
        yield [text.value()]
        sep = text.skip_ws()
        if sep == "]":
            text.pos += 1
            return
        if sep != ",":
            if not sep:
                raise CorruptFile("truncated JSON: the file ends inside the event array")
            raise _unexpected(text, "',' or ']'", sep)
        text.pos += 1


def _fast_batch(text):
    """Decode every complete event up to the last ``},`` of the buffer in one call, or None."""
    if len(text.buf) - text.pos < (1 << 16) and not text.eof:
        text.more()
    buf, pos = text.buf, text.pos
    cut = buf.rfind("},", pos)
    if cut < 0 or cut - pos < 4096:
        return None
    try:
        batch = json.loads("[" + buf[pos:cut + 1] + "]")
    except ValueError:
        return None
    text.pos = cut + 2
    return batch


def _unexpected(text, wanted, got=None):
    got = text.buf[text.pos:text.pos + 1] if got is None else got
    if not got:
        return CorruptFile("truncated JSON: the file ends inside the trace")
    return CorruptFile(f"invalid JSON at character {text.offset()}: expected {wanted}, "
                       f"found {got!r}")
