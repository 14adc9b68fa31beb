"""The device caching allocator's history: a snapshot per profiled window, and one on OOM.

torch (``torch.cuda.memory``) and torch_npu (``torch_npu.npu.memory``, the same code ported) keep
a ring buffer of allocator events once ``_record_memory_history("all", max_entries=N)`` is on;
``_snapshot()`` returns it with the current segments as a dict of plain values, which
``torch.cuda._memory_viz`` draws. Two mechanisms use it, one per process (DESIGN §6):

- ``--profile-memory-snapshot`` (``WindowMemory``): recording starts with each profiled window's
  session and stops with it; the snapshot goes into the window's folder.
- ``--profile-memory-oom`` (``OOM``): recording starts at start-up (``startup.check_rank``: once
  the host's device is set up, at the latest when the recorder arms) and stays on; the
  allocator's out-of-memory observer writes a snapshot before the error is raised. An observer that raised would replace the out-of-memory error (both wheels turn a
  Python exception in it into ``error_already_set``), so it never raises.

The snapshot is written by us (``pickle.dump`` of our own ``_snapshot()``) rather than by
``_dump_snapshot``: torch_npu 2.6-2.11 open that file write-only for the owner and without
truncation (``os.O_WRONLY | os.O_CREAT, stat.S_IWUSR``), and torch_npu >= 2.9 falls back to
starting a profiler inside it (when ``_npu_saveDevMemUsageInfo`` fails), which would collide
with ours.
"""

import os
import pickle
import threading
from typing import Any, Callable, List, Optional

from .. import layout
from .. import log

Report = Callable[[str, str, str], None]
HISTORY_FLAGS = ("--profile-memory-snapshot", "--profile-memory-oom")


class Allocator:
    """One device's caching allocator, as torch or torch_npu expose it."""

    def __init__(self, device: str, memory: Any, attach_oom: Callable[[Callable], None]) -> None:
        self.device, self._memory, self._attach = device, memory, attach_oom

    def record(self, max_entries: int) -> None:
        # Python frames only: C++ frames ("all") cost more and torch_npu's own OOM dump skips them.
        self._memory._record_memory_history("all", context="all", stacks="python",
                                            max_entries=max_entries)

    def stop(self) -> None:
        self._memory._record_memory_history(None)

    def snapshot(self) -> dict:
        return self._memory._snapshot()

    def attach(self, observer: Callable[[int, int, int, int], None]) -> None:
        self._attach(observer)


def device_for(backend_name: str) -> Optional[str]:
    """``npu`` or ``cuda``: whose allocator this process records; None when it has neither."""
    from . import npu

    if backend_name == "npu" or npu.usable()[0]:
        return "npu"
    import torch

    gpu_build = torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None
    if gpu_build and torch.cuda.is_available():
        return "cuda"
    return None


def device_ready(device: str) -> bool:
    """Whether the process has set up ``device`` already. Recording before that would set it
    up on device 0 (torch_npu's ``_record_memory_history`` calls ``_lazy_init()``): a context on
    NPU 0 for every rank of the node, before Megatron picks each rank's device."""
    if device == "npu":
        from .npu import device_initialized

        return device_initialized()
    import torch

    return bool(torch.cuda.is_initialized())


def allocator(device: str) -> Allocator:
    if device == "npu":
        from .npu import memory_api

        return Allocator("npu", *memory_api())
    import torch

    # a CUDA build's binding (a CPU build lacks it; device_for never picks cuda there)
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer")
    return Allocator("cuda", torch.cuda.memory, attach)


def requested(config: Any) -> List[str]:
    """The allocator-history flags ``config`` turns on."""
    return [flag for flag, on in zip(HISTORY_FLAGS, (config.profile_memory_snapshot,
                                                     config.profile_memory_oom)) if on]


def write_snapshot(snapshot: dict, path: str) -> None:
    """The snapshot as torch's ``_dump_snapshot`` writes it (default protocol: what
    ``_memory_viz`` and pytorch.org/memory_viz read), atomically: a reader never sees half."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            pickle.dump(snapshot, handle)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return str(value)


class WindowMemory:
    """``--profile-memory-snapshot`` for one session: history on at its start, a snapshot at its
    stop. Never raises: a failure is reported (phase ``memory``) and the trace is kept."""

    def __init__(self, config: Any, report: Report, backend_name: str) -> None:
        self._on = bool(config.profile_memory_snapshot)
        self._max_entries = config.profile_memory_max_entries
        self._report, self._backend_name = report, backend_name
        self._allocator: Optional[Allocator] = None
        self._path: Optional[str] = None
        self._done = False

    def _failed(self, what: str, exc: BaseException) -> None:
        self._report("error", "memory", f"{what} failed ({type(exc).__name__}: {exc}); the "
                                        f"window's trace is kept, its memory snapshot is not")

    def start(self) -> None:
        if not self._on:
            return
        try:
            device = OOM.device or device_for(self._backend_name)
            if device is None:
                raise RuntimeError("this process has no NPU or GPU allocator to record")
            self._allocator = allocator(device)
            if not OOM.recording:  # the OOM watch records from start-up already
                self._allocator.record(self._max_entries)
        except Exception as exc:  # noqa: BLE001 - the window records without it
            self._allocator = None
            self._failed("recording the allocator's history", exc)

    def finish(self, directory: str, rank: int) -> Optional[str]:
        """Write this window's snapshot into ``directory`` (once) and stop recording."""
        if self._allocator is None or self._done:
            return self._path
        self._done = True
        path = os.path.join(directory, layout.memory_snapshot_name(rank))
        try:
            snapshot = self._allocator.snapshot()
            os.makedirs(directory, exist_ok=True)
            write_snapshot(snapshot, path)
            self._path = path
        except Exception as exc:  # noqa: BLE001
            self._failed(f"writing {path}", exc)
        try:
            if not OOM.recording:
                self._allocator.stop()
        except Exception as exc:  # noqa: BLE001
            self._failed("stopping the allocator's history", exc)
        return self._path

    def outputs(self) -> List[str]:
        return [self._path] if self._path and os.path.exists(self._path) else []


class OomWatch:
    """``--profile-memory-oom``, once per process: history from start-up, a snapshot in the save
    path when the allocator runs out of memory, told to every manifest that listens."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.forget()

    def forget(self) -> None:
        """Back to unarmed (a test, or a process whose allocator module was replaced)."""
        self.recording = False
        self.device: Optional[str] = None
        self._allocator: Optional[Allocator] = None
        self._save_path, self._rank = ".", 0
        self._listeners: List[Any] = []
        self._dumps = 0

    def arm(self, config: Any, *, rank: int, save_path: str, device: str) -> None:
        """Start recording and watch for OOM (idempotent). Raises what the allocator raises."""
        if not config.profile_memory_oom or self.recording:
            return
        with self._lock:
            chosen = allocator(device)
            chosen.record(config.profile_memory_max_entries)
            chosen.attach(self._observe)
            self._allocator, self.device, self.recording = chosen, device, True
            self._save_path, self._rank = save_path, rank

    def tell(self, manifest: Any) -> None:
        """``manifest`` (a recorder's) records every OOM from now on."""
        if self.recording and manifest is not None and manifest not in self._listeners:
            self._listeners.append(manifest)

    def _observe(self, device: int, alloc: int, total: int, free: int) -> None:
        # Called by the allocator, with the GIL, just before it raises OutOfMemoryError: anything
        # raised here would be raised instead of that error, so nothing is.
        try:
            self._dump(device, alloc, total, free)
        except BaseException as exc:  # noqa: BLE001 - the OOM error must propagate unchanged
            try:
                log.error(f"memory: writing the out-of-memory snapshot failed "
                          f"({type(exc).__name__}: {exc})", rank=self._rank)
            except BaseException:  # noqa: BLE001
                pass

    def _dump(self, device: int, alloc: int, total: int, free: int) -> None:
        if self._allocator is None:
            return
        self._dumps += 1
        path = os.path.join(self._save_path, layout.memory_oom_name(self._rank, self._dumps))
        os.makedirs(self._save_path, exist_ok=True)
        write_snapshot(self._allocator.snapshot(), path)
        where = f"{self.device}:{device}"
        message = (f"out of memory on {where}: tried to allocate {_size(alloc)} with "
                   f"{_size(free)} free of {_size(total)}; the allocator's snapshot is in "
                   f"{path} (`mindspeed-prof memory {self._save_path} --html memory.html` "
                   f"draws it)")
        log.error(f"memory: {message}", rank=self._rank)
        entry = {"device": where, "requested_bytes": alloc, "free_bytes": free,
                 "total_bytes": total, "snapshot": path}
        for manifest in list(self._listeners):
            manifest.add_oom(entry, message)


OOM = OomWatch()
