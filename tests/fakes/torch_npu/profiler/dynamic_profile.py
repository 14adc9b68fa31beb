"""Stub of torch_npu.profiler.dynamic_profile: same entry points, each failing the swallowed way.

Dynamic profiling (shared memory, monitor process, profiler_config.json polling) is
out of scope for the fake; calls print "[ERROR] ... Call <name> failed" and return None,
which is also what a real misconfigured dynamic profile looks like to the caller.
"""

from torch_npu import _version
from ._console import no_exception_func

__all__ = ["init", "step", "start"] + (["set_state"] if _version.HAS_CUSTOM_TRACE_ID else [])

_UNSUPPORTED = "dynamic profiling is not implemented by the fake torch_npu."


@no_exception_func()
def init(path: str):
    raise RuntimeError(_UNSUPPORTED)


@no_exception_func()
def step():
    raise RuntimeError(_UNSUPPORTED)


@no_exception_func()
def start(config_path: str = None):
    raise RuntimeError(_UNSUPPORTED)


if _version.HAS_CUSTOM_TRACE_ID:  # set_state arrived in 2.11 together with trace ids
    @no_exception_func()
    def set_state(state_step: dict):
        raise RuntimeError(_UNSUPPORTED)
