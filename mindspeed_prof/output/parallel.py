"""Spread large, independent reads over processes (each one streams in constant memory).

Decoding JSON and splitting CSV rows is CPU-bound Python, so one process tops out at a few
hundred MB/s; a save path holds several large files (trace_view.json, kernel_details.csv, one
set per rank), which lets ``check`` and ``summary`` use every core. Small inputs stay in this
process: a pool costs more than it saves below ``PARALLEL_MIN_BYTES``. Any failure to run a
pool (no fork, no semaphores in a sandbox) falls back to doing the work here.
"""

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from .deps import MissingDependency

PARALLEL_MIN_BYTES = 96 << 20
MAX_WORKERS = 4  # each worker holds ~60-90 MB; four keep a run well under 512 MB
WORKERS_ENV = "MINDSPEED_PROF_OUTPUT_WORKERS"
_in_worker = False  # set in pool processes: work inside a worker never starts another pool


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(total_bytes, tasks):
    """How many processes ``tasks`` units of work over ``total_bytes`` deserve (1 = none)."""
    if _in_worker:
        return 1
    forced = os.environ.get(WORKERS_ENV, "").strip()
    if forced.isdigit():
        return max(1, min(int(forced), tasks))
    if total_bytes < PARALLEL_MIN_BYTES or tasks < 2:
        return 1
    return max(1, min(cpu_count(), MAX_WORKERS, tasks))


def threads_allowed():
    """Whether a reader may use threads of its own (pyarrow's): not inside a pool worker,
    whose siblings already take the other cores."""
    return not _in_worker and cpu_count() > 1


def run(func, calls, workers, warm=None, done=None):
    """``[func(*args) for args in calls]``, in order, over ``workers`` processes.

    ``warm``: run here before the fork, to load what every worker needs (the parsers'
    libraries, pyarrow's compute functions: ~45 MB on first use) once; the workers then share
    those pages instead of each making its own (figure 5: summary's PSS 273 -> 226 MiB).
    ``done(i)``: called here as each call finishes, in any order (a progress bar)."""
    done = done or (lambda i: None)
    if workers <= 1 or len(calls) <= 1:
        return _here(func, calls, done)
    if warm is not None:
        try:
            warm()
        except (ImportError, MissingDependency):
            pass  # a worker that needs the missing parser says so itself
    try:
        # fork: the children need nothing re-imported, and the CLI has no threads to copy
        context = multiprocessing.get_context("fork") \
            if "fork" in multiprocessing.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                 initializer=_mark_worker) as pool:
            try:
                futures = {pool.submit(func, *args): i for i, args in enumerate(calls)}
                results = [None] * len(calls)
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    done(futures[future])
                return results
            except (KeyboardInterrupt, SystemExit):
                _stop(pool)
                raise
    except (OSError, BrokenProcessPool, ImportError, NotImplementedError, PermissionError):
        return _here(func, calls, done)


def _stop(pool):
    """Ended by a signal (SIGINT, or SIGTERM as ``SystemExit``): the queued calls are
    dropped and the workers killed now, not waited for, so the caller's cleanup runs at once
    and no worker writes after it."""
    children = multiprocessing.active_children()  # this process's own workers
    for child in children:
        child.kill()
    for child in children:
        child.join()
    # the pool sees its workers gone and its manager thread ends: joined here, before the
    # interpreter's exit hook wakes it through a pipe it may be closing (an "Exception ignored")
    pool.shutdown(wait=True, cancel_futures=True)


def _here(func, calls, done):
    results = []
    for i, args in enumerate(calls):
        results.append(func(*args))
        done(i)
    return results


def _mark_worker():
    global _in_worker
    _in_worker = True
