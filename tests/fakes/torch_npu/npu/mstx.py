"""torch_npu.npu.mstx: host mstx marks and ranges, with each wheel's surface.

2.6 ... 2.9: ``mstx.mark``, ``range_start``, ``range_end``, ``mstx_range``; 2.10 and later add
``range_push``/``range_pop`` and the ``annotate`` context manager. Every function is wrapped in
mstx.py's own ``_no_exception_func`` (failures print ``Call <name> failed`` and return None);
an invalid message warns and returns the documented sentinel (0 from ``range_start``). A
``stream`` (``torch_npu.npu.current_stream()``) puts the range on that device stream too in the
real library; the fake keeps host ranges only and lists the ranges started on a stream in
``torch_npu._C._mstx.ON_STREAM``.
"""

import functools
import warnings

import torch_npu._C
from torch_npu import _version

__all__ = ["mstx"] + (["annotate"] if _version.HAS_MSTX_PUSH_POP else [])


def _no_exception_func(default_ret=None):
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except Exception as ex:
                from torch_npu.profiler._console import print_error_msg  # no import cycle

                print_error_msg(f"Call {func.__name__} failed. Exception: {str(ex)}")
                return default_ret
        return wrapper
    return decorator


class mstx:
    @staticmethod
    @_no_exception_func()
    def mark(message: str, stream=None, domain: str = 'default'):
        if not message or not isinstance(message, str):
            warnings.warn("Invalid message for mstx.mark function. Please provide a valid message string.")
            return
        if not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.mark function. Please provide a valid domain string.")
            return
        torch_npu._C._mstx._mark_on_host(message, domain)

    @staticmethod
    @_no_exception_func()
    def range_start(message: str, stream=None, domain: str = 'default') -> int:
        if not message or not isinstance(message, str):
            warnings.warn("Invalid message for mstx.range_start function. Please provide a valid message string.")
            return 0
        if not domain or not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.range_start func. Please input valid domain string.")
            return 0
        if stream is None:
            return torch_npu._C._mstx._range_start_on_host(message, domain)
        if not isinstance(stream, torch_npu.npu.Stream):
            warnings.warn("Invalid stream for mstx.range_start func. Please input valid stream.")
            return 0
        return torch_npu._C._mstx._range_start(message, stream.stream_id, stream.device_index,
                                               stream.device_type, domain)

    @staticmethod
    @_no_exception_func()
    def range_end(range_id: int, domain: str = 'default'):
        if not isinstance(range_id, int):
            warnings.warn("Invalid message for mstx.range_end function. Please provide the return value from mstx.range_start.")
            return
        if not domain or not isinstance(domain, str):
            warnings.warn("Invalid domain for mstx.range_end func. Please input valid domain string.")
            return
        torch_npu._C._mstx._range_end(range_id, domain)

    @staticmethod
    @_no_exception_func()
    def mstx_range(message: str, stream=None, domain: str = 'default'):
        def wrapper(func):
            def inner(*args, **kargs):
                range_id = mstx.range_start(message, stream, domain)
                ret = func(*args, **kargs)
                mstx.range_end(range_id, domain)
                return ret
            return inner
        return wrapper

    if _version.HAS_MSTX_PUSH_POP:
        _stack = []

        @staticmethod
        @_no_exception_func()
        def range_push(message: str, stream=None, domain: str = 'default') -> int:
            range_id = mstx.range_start(message, stream, domain)
            mstx._stack.append((range_id, domain))
            return 0

        @staticmethod
        @_no_exception_func()
        def range_pop(domain: str = 'default') -> int:
            for index in range(len(mstx._stack) - 1, -1, -1):
                if mstx._stack[index][1] == domain:
                    range_id, _ = mstx._stack.pop(index)
                    mstx.range_end(range_id, domain)
                    return 0
            return -1


if _version.HAS_MSTX_PUSH_POP:
    class annotate:
        def __init__(self, message: str = '', stream=None, domain: str = 'default'):
            self.message, self.stream, self.domain, self.range_id = message, stream, domain, None

        def __enter__(self):
            self.range_id = mstx.range_start(self.message, self.stream, self.domain)
            return self

        def __exit__(self, exc_type, exc_val, exc_tb):
            if self.range_id is not None:
                mstx.range_end(self.range_id, self.domain)
                self.range_id = None

    mstx.annotate = annotate
