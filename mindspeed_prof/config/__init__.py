"""What to profile: the flags' values (ProfilerConfig), their kinds, ranks, windows, budget, units."""

from .profiler_config import ProfilerConfig

__all__ = ["ProfilerConfig"]
