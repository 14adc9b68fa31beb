"""A file a reader command writes (``timeline -o``, ``report -o``, ``check --report``,
``summary --plot``, ``memory --html``): never one it reads, always one line when it cannot be
written, never a temporary file left behind.

- ``refuse_input``: an output that lies in a folder the command reads and bears a name the
  readers read there (a torch trace, a manifest, a snapshot, profiler_info, anything inside an
  ``*_ascend_pt`` capture) would replace a rank's capture with the command's own output, which
  ``check`` would then judge: it is refused before anything is read.
- ``temporary``: the sibling a file is written to before it is renamed into place, named to
  fit the file system's NAME_MAX (a legal long name whose ``.PID.tmp`` sibling would not fit
  keeps a cut of its name).
- ``cannot_write``: the usage error for an output the system refuses (``/proc/x.json.gz``, a
  read-only folder, a full disk).
- ``ended_by_signals``: SIGTERM raises ``SystemExit(143)`` in place of ending the process
  where it stands, so the writer's cleanup (its ``except BaseException``) removes its
  temporary files; SIGINT is Python's ``KeyboardInterrupt`` (exit 130) already.
"""

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional

from ..errors import ConfigError
from ..layout import (ASCEND_PT_SUFFIX, MANIFEST_RE, MEMORY_FILE_RE, PROFILER_INFO_RE,
                      TORCH_TRACE_RE)

TORCH_TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
DEFAULT_NAME_MAX = 255


def read_name(name: str) -> Optional[str]:
    """What the readers take a file named ``name`` in a save path for; None: nothing."""
    if MANIFEST_RE.match(name):
        return "a rank's manifest"
    if TORCH_TRACE_RE.match(name) or name.endswith(TORCH_TRACE_SUFFIXES):
        return "a torch trace"
    if MEMORY_FILE_RE.match(name):
        return "an allocator snapshot"
    if PROFILER_INFO_RE.match(name):
        return "torch_npu's profiler_info"
    return None


def refuse_input(flag: str, path: str, directories: Iterable[Optional[str]]) -> None:
    """``ConfigError`` when ``path`` (the value of ``flag``) names a file the command reads
    under one of ``directories``, or a name the readers read there."""
    for shown in (path, os.path.realpath(path)):  # a link is judged by what it replaces too
        for directory in directories:
            if not directory:
                continue
            root = os.path.realpath(directory)
            if os.path.isfile(root) and os.path.abspath(shown) == root:  # DIR given as a file
                raise ConfigError(f"{flag} {path} is {directory}, which this command reads; "
                                  f"give another name, e.g. {flag} {_example(flag, path)}.")
            rel = os.path.relpath(os.path.abspath(shown), root)
            if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep):
                continue
            parts = rel.split(os.sep)
            inside = next((p for p in parts[:-1] if p.endswith(ASCEND_PT_SUFFIX)), None)
            what = f"a file of the capture {inside}" if inside else read_name(parts[-1])
            if what is not None:
                raise ConfigError(
                    f"{flag} {path} would write over {what} under {directory}: the readers "
                    f"read that name as the run's own output (check would judge this file as "
                    f"the capture); give another name, e.g. {flag} {_example(flag, path)}.")


def _example(flag: str, path: str = "") -> str:
    if path.lower().endswith((".html", ".htm")):
        return "report.html" if flag == "-o" else "memory.html"
    return {"--plot": "steps.png", "--report": "node{node}.json",
            "--html": "memory.html"}.get(flag, "merged.json.gz")


def name_max(folder: str) -> int:
    try:
        return int(os.pathconf(folder or os.curdir, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return DEFAULT_NAME_MAX


def temporary(path: str, tag: str, reserve: int = 0) -> str:
    """``PATH.PID.TAG``, the sibling ``path`` is written to; when that name (plus ``reserve``
    bytes of a further suffix) would pass the folder's NAME_MAX, the name is cut to fit."""
    folder, name = os.path.split(path)
    suffix = f".{os.getpid()}.{tag}"
    room = name_max(folder) - len(suffix.encode()) - reserve
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) <= room:
        return path + suffix
    cut = encoded[:max(room, 1)].decode("utf-8", "ignore")  # whole characters only
    return os.path.join(folder, cut + suffix)


def cannot_write(flag: str, path: str, exc: OSError,
                 example: Optional[str] = None) -> ConfigError:
    """One line for an output the system refuses: what, why, the fix."""
    why = exc.strerror or type(exc).__name__
    return ConfigError(f"{flag} {path}: cannot write it ({why}); pick a writable path with "
                       f"room (e.g. {flag} {example or _example(flag, path)} in a folder of "
                       f"yours).")


@contextmanager
def ended_by_signals(command: str = "", output: str = "") -> Iterator[None]:
    """Within: SIGTERM raises ``SystemExit(128 + 15)``, so ``except``/``finally`` blocks
    remove what was half written (and ``command`` says so on stderr, naming ``output``); the
    previous handler is back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except (ValueError, OSError):
        yield
        return
    if previous == signal.SIG_IGN:  # an inherited ignore is kept
        signal.signal(signal.SIGTERM, previous)
    try:
        yield
    except SystemExit as exc:
        if command and exc.code == 128 + signal.SIGTERM:
            from .render.safe import cell

            print(cell(f"mindspeed-prof {command}: terminated (SIGTERM): {output} not written, "
                       f"its temporary files removed"), file=sys.stderr)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
