"""The bytes of a chrome trace, held in one buffer while ``jsonstream`` walks its events.

The bytes stay where they were read: one buffer, filled with ``readinto`` and never resized
(a piece is checked in place, the comma before it and the one after it standing in for the
array's brackets while the decoder looks), so a 1 MB piece costs no allocation. Copying each
piece into a new string cost as much CPU as validating it: a fresh 1 MB object is fresh pages,
and on a VM every page fault counts (figure 5: 0.37 -> 0.22 s of CPU per 200 MB trace).
"""

import gzip
import json

from .errors import CorruptFile
from .regular import open_regular

# One event never needs this much text; past it a "cut short" event is really a broken file.
MAX_EVENT_BYTES = 1 << 26
WS = b" \t\r\n"
WS_STR = " \t\r\n"
_raw_decode = json.JSONDecoder().raw_decode


class Piece:
    """Events ``data[lo:hi]`` (``{...}, ..., {...}``), valid until the next piece is read."""

    __slots__ = ("data", "lo", "hi")

    def __init__(self, data, lo, hi):
        self.data, self.lo, self.hi = data, lo, hi

    def text(self):
        return str(memoryview(self.data)[self.lo:self.hi], "utf-8")


class Source:
    """Bytes of a (possibly gzipped) file with a movable read position.

    ``buf[pos:end]`` holds the bytes not consumed yet; ``buf[0]`` is never data (it is where
    the first piece's ``[`` goes). ``base`` is the file offset of ``buf[0]``."""

    def __init__(self, path, chunk):
        # a regular file only (a FIFO would block here): once per file, not per event
        self._raw = open_regular(path)
        self._handle = gzip.GzipFile(fileobj=self._raw, mode="rb") \
            if str(path).endswith(".gz") else self._raw
        self._chunk = chunk
        self.buf = bytearray(2 * chunk + 2)
        self.view = memoryview(self.buf)
        self.pos = self.end = 1
        self.base = -1
        self.eof = False

    def close(self):
        self.view.release()
        self._handle.close()
        self._raw.close()

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
            while self.pos < n and buf[self.pos] in WS:
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
                    raise CorruptFile(describe_at(exc, self, text)) from None
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


def maybe_cut(exc, text):
    # raw_decode reports an unterminated string at the string's start, every other cut at the end.
    return exc.pos >= len(text.rstrip(WS_STR)) - 1 or exc.msg.startswith("Unterminated string")


def describe_at(exc, src, text):
    where = byte_at(src, text, exc.pos)
    if src.eof and maybe_cut(exc, text):
        return f"truncated JSON: the file ends inside a value (byte {where})"
    return f"invalid JSON at byte {where}: {exc.msg}"


def byte_at(src, text, index):
    return src.base + src.pos + len(text[:index].encode("utf-8"))
