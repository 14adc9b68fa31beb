"""The NPU caching allocator, as far as its history, snapshot and out-of-memory path go.

Mirrors ``torch_npu/csrc/core/npu/NPUCachingAllocator.cpp`` and ``THNPModule_memorySnapshot``
(Module.cpp) of the wheels: a ring buffer of ``max_entries`` trace entries while history is
recorded; ``_npu_memorySnapshot`` returns ``{"segments": [...], "device_traces": [[...]]}`` with
the real key sets (segments: device, address, total_size, allocated_size, active_size,
requested_size, stream, segment_pool_id, segment_type, is_expandable, frames, blocks; blocks:
address, size, requested_size, state, frames; trace entries: action, addr (device_free for
``oom``), size, stream, pool_id, frames); pool ids are ``(0, 0)`` tuples as pybind makes them.
On out-of-memory the allocator records an ``oom`` entry, releases its lock, calls every observer
``(device, alloc_size, device_total, device_free)`` with the GIL and then raises
``torch.OutOfMemoryError``; an observer that raises replaces that error (the real lambda throws
``py::error_already_set``).

What is simplified: one block per segment (a freed block stays cached as an inactive segment
until ``empty_cache``), one stream, no expandable segments, no workspace allocator, Python frames
only (``stacks="all"`` records no C++ frames). Nothing allocates by itself: a test allocates
"device memory" with the fake-only ``torch_npu.npu.memory._fake_device_alloc(nbytes)`` and frees
it with ``_fake_device_free(handle)``. ``FAKE_TORCH_NPU_HBM_BYTES`` is the device's capacity
(default 64 GiB, an Ascend 910B).
"""

import os
import sys
import threading
import traceback

import torch

HBM_ENV = "FAKE_TORCH_NPU_HBM_BYTES"
_SMALL = 1 << 20          # blocks up to 1 MiB live in "small" segments (kSmallSize)
_SMALL_SEGMENT = 2 << 20  # kSmallBuffer
_LARGE_ROUND = 2 << 20    # kRoundLarge
_BLOCK_ROUND = 512        # kMinBlockSize
_POOL = (0, 0)


def _capacity():
    raw = os.environ.get(HBM_ENV, "")
    return int(raw) if raw else 64 << 30


def _round_up(n, m):
    return ((n + m - 1) // m) * m


def _format_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024.0
    return f"{n}"


class _Segment:
    def __init__(self, address, total_size, requested, frames):
        self.address, self.total_size = address, total_size
        self.requested, self.frames = requested, frames
        self.allocated = True  # its one block is in use


class FakeCachingAllocator:
    def __init__(self):
        self._lock = threading.Lock()
        self._segments = {}  # address -> _Segment
        self._next_address = 0x12c000000000
        self._observers = []
        self.enabled = None  # None, "state" or "all"
        self._context = None
        self._max_entries = sys.maxsize
        self._trace = []
        self._trace_next = 0

    # -- history --------------------------------------------------------------------------------

    def record_history(self, enabled, context, stacks, max_entries):
        with self._lock:
            if enabled is None:
                self.enabled, self._context = None, None
                self._trace, self._trace_next = [], 0  # recordHistory(false) clears the buffer
                return
            if enabled not in ("state", "all"):
                raise RuntimeError(f"expected enabled to be None, 'state' or 'all', got {enabled!r}")
            if stacks not in ("python", "all"):
                raise RuntimeError(f"expected stacks to be 'python' or 'all', got {stacks!r}")
            self.enabled, self._context = enabled, context
            self._max_entries = max(int(max_entries), 1)

    def is_history_enabled(self):
        return self.enabled is not None

    def _stack(self):
        """The caller's Python frames, innermost first (py_symbolize's dicts), or [] when no
        context is recorded; the fake's own frames are left out, as a C++ allocator has none."""
        if self.enabled is None or self._context is None:
            return []
        fake = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return [{"name": f.name, "filename": f.filename, "line": f.lineno}
                for f in reversed(traceback.extract_stack())
                if not os.path.abspath(f.filename).startswith(fake + os.sep)]

    def _when(self, stack, event):
        """The frames a trace entry of ``event`` (alloc, free) keeps under this context."""
        keeps = {"alloc": ("alloc", "all"), "free": ("all",)}[event]
        return stack if self._context in keeps else []

    def _record(self, action, addr, size, frames, device_free=None):
        if self.enabled != "all":
            return
        entry = {"action": action, "size": size, "stream": 0, "pool_id": _POOL, "frames": frames}
        if action == "oom":
            entry["device_free"] = device_free
        else:
            entry["addr"] = addr
        if len(self._trace) < self._max_entries:
            self._trace.append(entry)
        else:  # the ring buffer of NPUCachingAllocator::record_trace
            self._trace[self._trace_next] = entry
            self._trace_next = (self._trace_next + 1) % self._max_entries

    # -- allocation -----------------------------------------------------------------------------

    def reserved(self):
        return sum(s.total_size for s in self._segments.values())

    def allocate(self, nbytes):
        size = _round_up(max(int(nbytes), 1), _BLOCK_ROUND)
        stack = self._stack()
        frames = self._when(stack, "alloc")
        self._lock.acquire()
        try:
            segment = self._cached(size)
            if segment is None:
                total = _SMALL_SEGMENT if size <= _SMALL else _round_up(size, _LARGE_ROUND)
                if self.reserved() + total > _capacity():
                    self._release_cached()
                if self.reserved() + total > _capacity():
                    observers = self._out_of_memory(size, frames)
                    self._lock.release()
                    try:
                        self._notify(observers, size)
                    finally:
                        self._lock.acquire()
                    raise torch.OutOfMemoryError(self._oom_message(size))
                segment = _Segment(self._next_address, total, nbytes, stack)
                self._next_address += total
                self._segments[segment.address] = segment
                self._record("segment_alloc", segment.address, total, frames)
            segment.allocated, segment.requested, segment.frames = True, nbytes, stack
            self._record("alloc", segment.address, size, frames)
            return segment.address
        finally:
            self._lock.release()

    def _cached(self, size):
        for segment in self._segments.values():
            small = segment.total_size == _SMALL_SEGMENT
            if not segment.allocated and segment.total_size >= size and small == (size <= _SMALL):
                return segment
        return None

    def _release_cached(self):
        for address in [a for a, s in self._segments.items() if not s.allocated]:
            segment = self._segments.pop(address)
            self._record("segment_free", address, segment.total_size, [])

    def _out_of_memory(self, size, frames):
        free = max(_capacity() - self.reserved(), 0)
        self._record("oom", 0, size, frames, device_free=free)
        return list(self._observers)

    def _notify(self, observers, size):
        free = max(_capacity() - self.reserved(), 0)
        for observer in observers:
            observer(0, size, _capacity(), free)  # an exception here propagates instead

    def _oom_message(self, size):
        allocated = sum(s.total_size for s in self._segments.values() if s.allocated)
        free = max(_capacity() - self.reserved(), 0)
        return (f"NPU out of memory. Tried to allocate {_format_size(size)} (NPU 0; "
                f"{_format_size(_capacity())} total capacity; {_format_size(allocated)} already "
                f"allocated; {_format_size(allocated)} current active; {_format_size(free)} free; "
                f"{_format_size(self.reserved())} reserved in total by PyTorch).If reserved memory "
                f"is >> allocated memory try setting max_split_size_mb to avoid fragmentation.")

    def free(self, address):
        frames = self._when(self._stack(), "free")
        with self._lock:
            segment = self._segments.get(address)
            if segment is None or not segment.allocated:
                raise RuntimeError(f"invalid device pointer: {address:#x}")
            size = _round_up(max(segment.requested, 1), _BLOCK_ROUND)
            segment.allocated = False
            self._record("free_requested", address, size, frames)
            self._record("free_completed", address, size, frames)

    def empty_cache(self):
        with self._lock:
            self._release_cached()

    def attach_oom_observer(self, observer):
        with self._lock:
            self._observers.append(observer)

    # -- snapshot -------------------------------------------------------------------------------

    def snapshot(self):
        with self._lock:
            segments = []
            for segment in sorted(self._segments.values(), key=lambda s: s.address):
                used = _round_up(max(segment.requested, 1), _BLOCK_ROUND) if segment.allocated else 0
                blocks = [{"address": segment.address, "size": used,
                           "requested_size": segment.requested if segment.allocated else 0,
                           "state": "active_allocated", "frames": list(segment.frames)}] \
                    if used else []
                if segment.total_size - used:
                    blocks.append({"address": segment.address + used,
                                   "size": segment.total_size - used, "requested_size": 0,
                                   "state": "inactive", "frames": []})
                segments.append({
                    "device": 0, "address": segment.address, "total_size": segment.total_size,
                    "allocated_size": used, "active_size": used,
                    "requested_size": segment.requested if segment.allocated else 0,
                    "stream": 0, "segment_pool_id": _POOL,
                    "segment_type": "small" if segment.total_size == _SMALL_SEGMENT else "large",
                    "is_expandable": False, "frames": list(segment.frames), "blocks": blocks})
            trace = self._trace[self._trace_next:] + self._trace[:self._trace_next]
            return {"segments": segments, "device_traces": [[dict(e) for e in trace]]}


ALLOCATOR = FakeCachingAllocator()
