"""Console output in torch_npu's exact shape, and the decorator that never lets an error out.

Every public profiler entry point goes through no_exception_func, so callers must
read stdout (not exceptions) to learn that something failed; that is the property
the fake exists to reproduce.
"""

import functools
import os
import time
import warnings
from enum import Enum

from torch_npu import _version

_deprecation_reported = False


def _warnings_enabled() -> bool:
    global _deprecation_reported
    flag = None
    if _version.PREFERS_WARNING_DISABLE_ENV:
        flag = os.environ.get("TORCH_NPU_WARNING_DISABLE")
    if flag is None:
        flag = os.environ.get("TORCH_NPU_DISABLED_WARNING")
    if flag == "1":
        return False
    rank = os.environ.get("RANK")
    if rank is not None and rank != "0":
        return False
    if (_version.PREFERS_WARNING_DISABLE_ENV and not _deprecation_reported
            and "TORCH_NPU_DISABLED_WARNING" in os.environ):
        _deprecation_reported = True
        warnings.warn(
            "TORCH_NPU_DISABLED_WARNING is deprecated and will be removed in a future version. "
            "Use TORCH_NPU_WARNING_DISABLE instead.",
            DeprecationWarning,
            stacklevel=3,
        )
    return True


def _emit(level: str, message: str) -> None:
    stamp = time.strftime("[%Y-%m-%d %H:%M:%S]", time.localtime())
    print(f"{stamp} [{level}] [{os.getpid()}] profiler.py: {message}", flush=True)


def print_info_msg(message: str) -> None:
    _emit("INFO", message)


def print_warn_msg(message: str) -> None:
    if _warnings_enabled():
        _emit("WARNING", message)


def print_error_msg(message: str) -> None:
    _emit("ERROR", message)


def no_exception_func(default_ret=None):
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except Exception as ex:  # the real library swallows everything but BaseException
                print_error_msg(f"Call {func.__name__} failed. Exception: {ex}")
                return default_ret

        return wrapper

    return decorator


class ErrCode(Enum):
    PARAM = (1, "invalid parameter")
    TYPE = (2, "invalid type")
    VALUE = (3, "invalid value")
    INTERNAL = (5, "internal error")
    NOT_FOUND = (8, "resource not found")
    UNAVAIL = (9, "resource unavailable")
    SYSCALL = (10, "system call failed")
    PERMISSION = (12, "permission error")


_SUBMODULES = {"PTA": 0, "PROF": 4}


def _current_rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank()
    except Exception:
        return -1


def _error_suffix(submodule: str, code: ErrCode) -> str:
    if int(os.getenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", "0")):
        return ""
    from torch_npu import npu

    number, text = code.value
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime())
    return (
        f"\n[ERROR] {stamp} (PID:{os.getpid()}, Device:{npu.current_device()}, "
        f"RankID:{_current_rank()}) ERR{_SUBMODULES[submodule]:0>2d}{number:0>3d} {submodule} {text}"
    )


def pta_error(code: ErrCode) -> str:
    return _error_suffix("PTA", code)


def prof_error(code: ErrCode) -> str:
    return _error_suffix("PROF", code)
