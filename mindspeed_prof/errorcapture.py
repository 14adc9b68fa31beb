"""Notice the errors torch_npu prints instead of raising.

torch_npu wraps start/stop/step/export in a decorator that catches every exception, prints
``[...] [ERROR] [pid] profiler.py: Call start failed. Exception: ...`` to stdout and returns
None. The training goes on, and so must we, but the error has to reach the rank's log and
manifest. ``capture_error_lines`` tees stdout/stderr during a call and hands each such line to a
callback; the text still reaches the console unchanged.
"""

import contextlib
import re
import sys

ERROR_LINE = re.compile(r"\[ERROR\]")


class _Tee:
    def __init__(self, stream, on_line):
        self._stream = stream
        self._on_line = on_line
        self._partial = ""

    def write(self, text):
        self._stream.write(text)
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._on_line(line)
        return len(text)

    def flush(self):
        self._stream.flush()

    def finish(self):
        if self._partial:
            self._on_line(self._partial)
            self._partial = ""

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def capture_error_lines(on_error):
    """Tee stdout/stderr during the block; ``on_error(line)`` runs for each ``[ERROR]`` line once
    the streams are restored, so the callback's own logging is not captured again."""
    found = []

    def on_line(line):
        if ERROR_LINE.search(line):
            found.append(line.strip())

    out, err = _Tee(sys.stdout, on_line), _Tee(sys.stderr, on_line)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        out.finish()
        err.finish()
        for line in found:
            on_error(line)
