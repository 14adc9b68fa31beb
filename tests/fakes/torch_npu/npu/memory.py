"""torch_npu.npu.memory: the allocator-history functions, with each wheel's signatures.

``_record_memory_history(enabled="all", *args, **kwargs)`` forwards to ``_record_memory_history_impl
(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None)``, which calls
``torch_npu._C._npu_record_memory_history(enabled, context, stacks, max_entries)`` after
``_lazy_init()``. ``_snapshot()`` returns ``_npu_memorySnapshot()`` (``(None)`` from 2.13);
``_dump_snapshot(filename)`` pickles it, through ``os.open(O_WRONLY | O_CREAT, S_IWUSR)`` before
2.13 (a file only its owner may write, not even read, and not truncated), ``open(filename, "wb")``
from 2.13. The 2.9+ fallback that starts a profiler when ``_npu_saveDevMemUsageInfo`` fails is
not reproduced. ``_fake_device_alloc`` / ``_fake_device_free`` / ``_fake_empty_cache`` exist only
in the fake: they stand for tensors created and freed on the NPU.
"""

import os
import pickle
import stat
import sys
from typing import Optional

import torch_npu
from torch_npu import _version
from torch_npu._C._allocator import ALLOCATOR

__all__ = ["empty_cache", "memory_allocated", "memory_reserved", "memory_snapshot"]


def _record_memory_history(enabled="all", *args, **kwargs):
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(
    enabled: Optional[str] = "all",
    context: Optional[str] = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device=None,
):
    torch_npu.npu._lazy_init()
    torch_npu._C._npu_record_memory_history(enabled, context, stacks, max_entries)


def _raw_snapshot():
    if _version.SNAPSHOT_TAKES_POOL_ID:
        return torch_npu._C._npu_memorySnapshot(None)
    return torch_npu._C._npu_memorySnapshot()


if _version.SNAPSHOT_HAS_FX_AUGMENT:
    def _snapshot(device=None, augment_with_fx_traces=False):
        return _raw_snapshot()

    def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
        s = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
        with open(filename, "wb") as f:
            pickle.dump(s, f)
else:
    def _snapshot(device=None):
        return _raw_snapshot()

    def _dump_snapshot(filename="dump_snapshot.pickle"):
        s = _snapshot()
        with os.fdopen(os.open(filename, os.O_WRONLY | os.O_CREAT, stat.S_IWUSR), "wb") as f:
            pickle.dump(s, f)


def memory_snapshot():
    return _raw_snapshot()["segments"]


def memory_allocated(device=None):
    return sum(s["allocated_size"] for s in memory_snapshot())


def memory_reserved(device=None):
    return sum(s["total_size"] for s in memory_snapshot())


def empty_cache():
    ALLOCATOR.empty_cache()


def _fake_device_alloc(nbytes: int) -> int:
    """Fake only: "allocate" nbytes of NPU memory (as a tensor would), returning its address.
    Raises torch.OutOfMemoryError, after the out-of-memory observers ran, when it does not fit."""
    return ALLOCATOR.allocate(nbytes)


def _fake_device_free(address: int) -> None:
    """Fake only: free what _fake_device_alloc returned (the block stays cached)."""
    ALLOCATOR.free(address)


_fake_empty_cache = empty_cache
