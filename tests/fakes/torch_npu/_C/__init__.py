"""Stand-in for the compiled extension: only the names the profiler path imports."""

from torch_npu._C import _profiler  # noqa: F401
