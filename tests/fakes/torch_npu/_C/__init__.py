"""Stand-in for the compiled extension: only the names the profiler and memory paths import."""

from torch_npu import _version
from torch_npu._C import _mstx, _profiler  # noqa: F401
from torch_npu._C._allocator import ALLOCATOR as _ALLOCATOR


def _npu_record_memory_history(enabled, context, stacks, max_entries):
    # m.def("_npu_record_memory_history", torch_npu::_record_memory_history): positional, all four
    _ALLOCATOR.record_history(enabled, context, stacks, max_entries)


if _version.SNAPSHOT_TAKES_POOL_ID:
    def _npu_memorySnapshot(mempool_id):  # METH_O: a (first, second) tuple or None
        if mempool_id is not None and (not isinstance(mempool_id, tuple) or len(mempool_id) != 2):
            raise RuntimeError("Expected tuple of size 2 (mempool_id_first, mempool_id_second)")
        return _ALLOCATOR.snapshot()

    def _npu_isHistoryEnabled():
        return _ALLOCATOR.is_history_enabled()
else:
    def _npu_memorySnapshot():  # METH_NOARGS before torch_npu 2.10
        return _ALLOCATOR.snapshot()


def _npu_attach_out_of_memory_observer(observer):
    # METH_O; the observer is called (device, alloc, device_total, device_free) before the raise
    _ALLOCATOR.attach_oom_observer(observer)
