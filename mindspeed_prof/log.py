"""Console messages, prefixed so they stand out in an interleaved multi-rank training log."""

import os
import sys

PREFIX = "[mindspeed_prof]"


def _tag(rank):
    return PREFIX if rank is None else f"[mindspeed_prof rank {rank}]"


_lost = 0


def _write(line, stream):
    # A message must never end what it reports on: a dying job's console may be a closed pipe
    # (the launcher died first) while the final flush still writes the trace.
    global _lost
    try:
        # One write with its newline: print() writes text and "\n" separately, and another
        # rank's line could land between them in the shared torchrun log.
        stream = stream or sys.stdout
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):  # a broken pipe, or a closed file
        _lost += 1
    except RuntimeError:
        # "reentrant call": a signal handler's message while the code it interrupted was inside
        # this stream's own write (the buffer is that thread's): straight to the descriptor.
        try:
            os.write(stream.fileno(), (line + "\n").encode(errors="replace"))
        except (OSError, ValueError, RuntimeError, AttributeError):
            _lost += 1


def lost_writes():
    """How many messages could not be written so far."""
    return _lost


def info(message, rank=None):
    _write(f"{_tag(rank)} {message}", None)


def warning(message, rank=None):
    _write(f"{_tag(rank)} WARNING: {message}", sys.stderr)


def error(message, rank=None):
    _write(f"{_tag(rank)} ERROR: {message}", sys.stderr)
