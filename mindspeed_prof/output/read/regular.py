"""Open only regular files: a name in an output folder may be a FIFO, a device or a link to one.

``open()`` on a FIFO waits for a writer that never comes, and ``/dev/zero`` never ends: a reader
that opens whatever a name points at can hang or fill memory. Here a file is opened without
blocking (``O_NONBLOCK``: a FIFO's open returns at once), ``fstat``-ed, and refused unless it is a
regular file; a file read whole is refused past its size bound before a byte is read. Once per
file: the fast readers' per-event loops are not touched.
"""

import os
import stat
from typing import BinaryIO, Optional

from .errors import CorruptFile

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


class NotRegularFile(CorruptFile):
    """The name is not a regular file: nothing was read from it."""


def kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def skipped(mode: int) -> str:
    """The reason given for a file refused by its mode."""
    return f"{kind(mode)}, not a regular file: not read"


def check_regular(path: str, max_bytes: Optional[int] = None) -> int:
    """The size of ``path`` when it is a regular file within ``max_bytes``; NotRegularFile or
    CorruptFile (too large) else, OSError when it cannot be looked at. Follows links, as
    ``open`` would."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(skipped(info.st_mode))
    _bound(info.st_size, max_bytes)
    return info.st_size


def open_regular(path: str, max_bytes: Optional[int] = None) -> BinaryIO:
    """``open(path, "rb")`` for a regular file (within ``max_bytes`` when given); a FIFO, a
    device or a socket is refused without blocking (NotRegularFile)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(skipped(info.st_mode))
        _bound(info.st_size, max_bytes)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, max_bytes: int) -> bytes:
    """The whole of regular file ``path``, at most ``max_bytes`` (a file that grew past its
    bound while read is refused as too large)."""
    with open_regular(path, max_bytes) as handle:
        data = handle.read(max_bytes + 1)
    _bound(len(data), max_bytes)
    return data


def _bound(size: int, max_bytes: Optional[int]) -> None:
    if max_bytes is not None and size > max_bytes:
        raise CorruptFile(f"{size} bytes, past the {max_bytes >> 20} MiB this reader reads "
                          f"whole: skipped, not read")
