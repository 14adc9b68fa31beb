"""Pure-Python replacement for the symbols torch_npu._C._profiler exposes to Python."""

import enum


class ProfilerActivity(enum.Enum):
    """The pybind enum has exactly these members; str() gives "ProfilerActivity.CPU"."""

    CPU = 0
    NPU = 1

    def __str__(self) -> str:
        return f"ProfilerActivity.{self.name}"


def _supported_npu_activities() -> set:
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}
