"""How the CLI's reader processes ask glibc's malloc to keep freed memory.

glibc returns every block above its mmap threshold (128 KiB to start) to the kernel when it is
freed, and the next such block faults its pages in again. The readers allocate a block at a
time (pyarrow's 256 KiB CSV blocks and their columns, simdjson's documents): a 31 MB
kernel_details.csv took ~2,900 page faults and 15 ms of system time per read, against ~250 and
7-11 ms with the thresholds below, for ~10 MB more peak RSS. Only the reader commands set them
(never the training side, whose allocator is the job's own); where the C library has no
``mallopt`` (not glibc) nothing changes.
"""

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD_BYTES = 32 << 20  # blocks below it come from the heap and are reused
TRIM_THRESHOLD_BYTES = 64 << 20  # free memory kept at the heap's top before it shrinks

_done = False


def keep_freed_blocks() -> bool:
    """Set the thresholds once per process (forked workers inherit them); whether they are."""
    global _done
    if _done:
        return True
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False
    _done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    return _done
