"""A one-line progress bar on stderr for long ``check``/``summary``/``analyse`` runs.

Drawn only when stderr is a terminal (a pipe, a file or a test's capture gets nothing: stdout
and stderr stay what scripts parse) and only for work big enough to take a while. Redrawn at
most every ``REDRAW_S``; the line is erased when the work is done.
"""

import sys
import time

# Below this much input a run ends before a bar would help (figure 5: ~1 GB/s).
MIN_BYTES = 256 << 20
REDRAW_S = 0.2
WIDTH = 24


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """``advance(n)`` as units of work finish; ``close()`` (or ``with``) erases the line.

    ``unit``: "bytes" shows MB, anything else counts (e.g. "captures")."""

    def __init__(self, label, total, unit="bytes", minimum=None, stream=None):
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        floor = (MIN_BYTES if unit == "bytes" else 2) if minimum is None else minimum
        self.enabled = total >= floor and total > 0 and _is_terminal(self.stream)
        self.done = 0
        self._start = time.monotonic()
        self._drawn = 0.0
        self._width = 0

    def advance(self, amount):
        self.done += amount
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn >= REDRAW_S or self.done >= self.total:
            self._drawn = now
            self._draw(now)

    def _draw(self, now):
        share = min(1.0, self.done / self.total)
        filled = int(share * WIDTH)
        if self.unit == "bytes":
            amount = f"{self.done / 1e6:.0f}/{self.total / 1e6:.0f} MB"
        else:
            amount = f"{self.done}/{self.total} {self.unit}"
        line = (f"{self.label}: [{'#' * filled}{'.' * (WIDTH - filled)}] {share:4.0%} "
                f"{amount} {now - self._start:.1f} s")
        self._write("\r" + line.ljust(self._width))
        self._width = len(line)

    def close(self):
        if self.enabled and self._width:
            self._write("\r" + " " * self._width + "\r")
            self._width = 0

    def _write(self, text):
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False  # a closed terminal ends the bar, never the command

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
