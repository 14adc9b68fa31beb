"""Text read from an output folder, made safe to print on a terminal.

Names in a trace (event names), a snapshot (frame file and function names), a manifest (errors,
run ids, role names) or a folder's own file names are whatever the file holds: an ESC sequence
among them would clear the screen, set the window's title or hide the lines above it. Every
terminal rendering (tables, CSV on stdout, the one-line errors of the commands) passes its text
through here: each control character (C0, DEL, C1) and each bidirectional override is written
as a visible escape (``\\x1b``, ``\\u202e``), so the reader sees what the file holds and the
terminal acts on none of it. JSON output needs nothing: ``json.dumps`` escapes them already.
"""

import re
from contextlib import contextmanager
from typing import Iterator

from ...errors import ConfigError

# C0 controls, DEL, C1 controls; bidi embeddings/overrides/isolates and the marks (U+200E/F)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f"
                                 "\u202a-\u202e\u2066-\u2069]")


def _visible(match: "re.Match[str]") -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def cell(text: object) -> str:
    """One value on one line: every control character escaped, newlines included."""
    text = str(text)
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


def lines(text: str) -> str:
    """A rendering of several lines: every control character but the newline escaped."""
    return _UNSAFE_BUT_NEWLINE.sub(_visible, text) if _UNSAFE_BUT_NEWLINE.search(text) else text


@contextmanager
def usage_errors() -> Iterator[None]:
    """A usage error's one line (it may quote a run id or a path read from the folder) with
    its control characters escaped, as the command's other output."""
    try:
        yield
    except ConfigError as exc:
        text = str(exc)
        if _UNSAFE.search(text) is None:
            raise
        raise ConfigError(cell(text)) from None
