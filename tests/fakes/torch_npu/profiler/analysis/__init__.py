"""Offline/online parser of the fake: turns a run directory's raw data into ASCEND_PROFILER_OUTPUT/."""

from ._driver import NpuProfiler, wait_for_async_parses

__all__ = ["NpuProfiler", "wait_for_async_parses"]
