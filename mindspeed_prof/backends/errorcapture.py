"""Notice the errors torch_npu prints instead of raising.

torch_npu wraps start/stop/step/export in a decorator that catches every exception, prints
``[...] [ERROR] [pid] profiler.py: Call start failed. Exception: ...`` to stdout and returns
None. The training goes on, and so must we, but the error has to reach the rank's log and
manifest. ``capture_error_lines`` hands each such line printed during a call to a callback; the
text still reaches the console unchanged.

sys.stdout/sys.stderr are wrapped once and the wrapper is never taken off again. Swapping them
around each call (as contextlib.redirect_stdout does) crashes the process: CPython's print()
holds only a borrowed pointer to sys.stdout between its writes, so when another thread is
printing (the fake's async parse, a DataLoader or checkpoint thread, a logging handler) and the
swapped-out wrapper is freed, that print writes through freed memory. Seen as a SIGSEGV of the
profiled rank in CI, after "'str' object has no attribute 'write'". The wrapper keeps the
original stream alive, and which lines are captured is decided per thread, so a call only
collects what its own thread printed.
"""

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator

ERROR_LINE = re.compile(r"\[ERROR\]")


class _Lines:
    """Splits one stream's text, as written by one thread, into lines."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self._on_line = on_line
        self._partial = ""

    def feed(self, text: str) -> None:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._on_line(line)

    def finish(self) -> None:
        if self._partial:
            self._on_line(self._partial)
            self._partial = ""


class _Tee:
    """Stays on sys.stdout or sys.stderr once installed; copies a thread's text to its capture."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._local = threading.local()

    def write(self, text):
        try:
            written = self._stream.write(text)
        except RuntimeError:
            # "reentrant call": a signal handler's flush printing (torch_npu's stop) while the
            # code it interrupted was inside this stream's own write, the buffer held by that
            # very thread (a full pipe to the launcher's log): straight to the descriptor.
            written = _write_descriptor(self._stream, text)
        lines = getattr(self._local, "lines", None)
        if lines is not None:
            lines.feed(text)
        return written

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name):
        if name in ("_stream", "_local"):  # not set yet (copy, pickle): no endless recursion
            raise AttributeError(name)
        return getattr(self._stream, name)

    @contextlib.contextmanager
    def capturing(self, lines: _Lines) -> Iterator[None]:
        outer = getattr(self._local, "lines", None)
        self._local.lines = lines
        try:
            yield
        finally:
            self._local.lines = outer


def _write_descriptor(stream, text: str) -> int:
    try:
        os.write(stream.fileno(), text.encode(getattr(stream, "encoding", None) or "utf-8",
                                             errors="replace"))
    except (OSError, ValueError, AttributeError):
        pass  # no descriptor to write to: the text is lost, the work goes on
    return len(text)


# Every tee ever installed, kept alive: if other code replaces sys.stdout after us, a print on
# another thread may still hold a borrowed pointer to our tee, which must never be freed.
_KEPT: list = []


def _installed(name: str):
    """The tee on ``sys.<name>``, put there on first use (again if someone replaced it since)."""
    stream = getattr(sys, name)
    if stream is None or isinstance(stream, _Tee):
        return stream
    tee = _Tee(stream)
    _KEPT.append(tee)
    setattr(sys, name, tee)  # the old stream lives on inside the tee: nothing is freed
    return tee


@contextlib.contextmanager
def capture_error_lines(on_error: Callable[[str], None]) -> Iterator[None]:
    """Collect the ``[ERROR]`` lines this thread prints during the block; ``on_error(line)`` runs
    for each once the block ends, so the callback's own logging is not captured again."""
    found = []

    def on_line(line: str) -> None:
        if ERROR_LINE.search(line):
            found.append(line.strip())

    with contextlib.ExitStack() as stack:
        for name in ("stdout", "stderr"):
            tee = _installed(name)
            if tee is not None:
                lines = _Lines(on_line)
                stack.callback(lines.finish)
                stack.enter_context(tee.capturing(lines))
        try:
            yield
        finally:
            stack.close()
            for line in found:
                on_error(line)
