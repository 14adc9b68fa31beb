"""Peak allocated and reserved memory, and who held the bytes at the peak, from a snapshot.

A snapshot holds the allocator's state when it was taken (``segments``) and the events before
it (``device_traces``, the newest ``max_entries``). The history starts mid-run, so the state at
its start is the final state minus every event's change; the curve is that start plus the
running sum. Allocated bytes change as torch's ``memory_allocated()`` does: up at ``alloc``,
down at ``free_requested``; reserved bytes at ``segment_alloc``/``segment_map`` and
``segment_free``/``segment_unmap``. At the allocated peak, the blocks alive are grouped by their
allocation site: the innermost frame outside torch itself (``file:line function``), else the
innermost frame; blocks allocated before the history began are one group of their own unless
the final segments still name their frames.
"""

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..read.memory_files import SnapshotFile, find_snapshots
from ..read.errors import CorruptFile
from ..read.snapshot import load_snapshot

BEFORE_HISTORY = "(allocated before the recorded history began)"
NO_FRAMES = "(no stack recorded)"
_TORCH_PARTS = (f"{os.sep}torch{os.sep}", f"{os.sep}torch_npu{os.sep}")
_RESERVE = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


@dataclass
class Site:
    site: str
    bytes: int = 0
    blocks: int = 0

    def as_dict(self) -> Dict[str, Any]:
        return {"site": self.site, "bytes": self.bytes, "blocks": self.blocks}


@dataclass
class DevicePeak:
    """One device's curve in one snapshot."""

    device: int
    events: int
    peak_allocated: int
    peak_reserved: int
    final_allocated: int
    final_reserved: int
    peak_event: Optional[int]  # index of the event after which allocated peaked (None: start)
    top_sites: List[Site] = field(default_factory=list)
    ooms: List[Dict[str, Any]] = field(default_factory=list)  # the trace's oom entries

    def as_dict(self) -> Dict[str, Any]:
        return {"device": self.device, "events": self.events,
                "peak_allocated_bytes": self.peak_allocated,
                "peak_reserved_bytes": self.peak_reserved,
                "final_allocated_bytes": self.final_allocated,
                "final_reserved_bytes": self.final_reserved, "peak_event": self.peak_event,
                "top_sites": [s.as_dict() for s in self.top_sites], "ooms": self.ooms}


@dataclass
class MemoryEntry:
    """One snapshot file of one rank."""

    file: SnapshotFile
    devices: List[DevicePeak] = field(default_factory=list)
    error: Optional[str] = None
    notes: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        f = self.file
        return {"rank": f.rank, "file": f.rel, "kind": f.kind, "folder": f.folder,
                "window": list(f.window) if f.window else None, "error": self.error,
                "notes": self.notes, "devices": [d.as_dict() for d in self.devices]}


def site_of(frames: Any) -> str:
    if not isinstance(frames, list) or not frames:
        return NO_FRAMES
    usable = [f for f in frames if isinstance(f, dict)]
    if not usable:
        return NO_FRAMES
    chosen = next((f for f in usable if not any(p in str(f.get("filename", ""))
                                                for p in _TORCH_PARTS)), usable[0])
    filename = str(chosen.get("filename", "?"))
    short = os.sep.join(filename.split(os.sep)[-2:])
    return f"{short}:{chosen.get('line', '?')} {chosen.get('name', '?')}"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _final_state(segments: List[dict], device: int) -> Tuple[int, int, Dict[int, Tuple[int, Any]]]:
    allocated = reserved = 0
    live: Dict[int, Tuple[int, Any]] = {}
    for segment in segments:
        if not isinstance(segment, dict) or _int(segment.get("device")) != device:
            continue
        reserved += _int(segment.get("total_size"))
        for block in segment.get("blocks") or []:
            if isinstance(block, dict) and block.get("state") == "active_allocated":
                size = _int(block.get("size"))
                allocated += size
                live[_int(block.get("address"))] = (size, block.get("frames"))
    return allocated, reserved, live


def device_peak(snapshot_data: dict, device: int, top: int = 10) -> DevicePeak:
    """The curve of ``device`` (an index of ``device_traces``) and the sites at its peak."""
    traces = snapshot_data["device_traces"]
    trace = traces[device] if device < len(traces) else []
    final_allocated, final_reserved, final_live = _final_state(snapshot_data["segments"], device)
    alloc_delta = reserve_delta = 0
    best_alloc, best_at, best_reserve = 0, None, 0
    for index, entry in enumerate(trace):
        action, size = entry.get("action"), _int(entry.get("size"))
        if action == "alloc":
            alloc_delta += size
        elif action == "free_requested":
            alloc_delta -= size
        reserve_delta += _RESERVE.get(action, 0) * size
        if alloc_delta > best_alloc:
            best_alloc, best_at = alloc_delta, index
        best_reserve = max(best_reserve, reserve_delta)
    start_allocated = final_allocated - alloc_delta
    start_reserved = final_reserved - reserve_delta
    peak = DevicePeak(device=device, events=len(trace),
                      peak_allocated=start_allocated + best_alloc,
                      peak_reserved=start_reserved + best_reserve,
                      final_allocated=final_allocated, final_reserved=final_reserved,
                      peak_event=best_at)
    peak.ooms = [{"requested_bytes": _int(e.get("size")), "device_free_bytes":
                  _int(e.get("device_free"))} for e in trace if e.get("action") == "oom"]
    peak.top_sites = _sites_at(trace, best_at, final_live)[:top]
    return peak


def _sites_at(trace: list, peak_at: Optional[int],
              final_live: Dict[int, Tuple[int, Any]]) -> List[Site]:
    """The blocks alive just after event ``peak_at`` (None: before the first), by site: those the
    trace allocated and had not freed by then, and those alive before the history began and not
    yet freed (freed later in the trace, or never: the final segments still hold them)."""
    live: Dict[int, Tuple[int, Any]] = {}
    at_peak: Dict[int, Tuple[int, Any]] = {}
    pre_freed_later = 0  # bytes alive before the history, freed in the trace after the peak
    for index, entry in enumerate(trace):
        action, addr = entry.get("action"), _int(entry.get("addr"))
        if action == "alloc":
            live[addr] = (_int(entry.get("size")), entry.get("frames"))
        elif action == "free_requested" and live.pop(addr, None) is None:
            if peak_at is None or index > peak_at:
                pre_freed_later += _int(entry.get("size"))
        if index == peak_at:
            at_peak = dict(live)
    sites: Dict[str, Site] = {}

    def add(site: str, size: int, blocks: int = 1) -> None:
        item = sites.setdefault(site, Site(site))
        item.bytes += size
        item.blocks += blocks

    for size, frames in at_peak.values():
        add(site_of(frames), size)
    for addr, (size, frames) in final_live.items():
        if addr not in live:  # alive before the history began and never freed in it
            add(site_of(frames) if frames else BEFORE_HISTORY, size)
    if pre_freed_later:
        add(BEFORE_HISTORY, pre_freed_later, 0)
    return sorted(sites.values(), key=lambda s: (-s.bytes, s.site))


def analyse(path: str, top: int = 10) -> List[DevicePeak]:
    """Every device with history or segments in the snapshot at ``path`` (CorruptFile, OSError)."""
    snapshot = load_snapshot(path)
    devices = {d for d, trace in enumerate(snapshot.device_traces) if trace}
    devices |= {_int(s.get("device")) for s in snapshot.segments if isinstance(s, dict)}
    return [device_peak(snapshot.data, d, top) for d in sorted(devices)]


def summarize_memory(directory: str, top: int = 10) -> List[MemoryEntry]:
    """One entry per snapshot found under ``directory``, by rank, windows before OOM dumps."""
    entries = []
    for found in find_snapshots(directory):
        entry = MemoryEntry(file=found)
        try:
            entry.devices = analyse(found.path, top)
        except (CorruptFile, OSError) as exc:
            entry.error = str(exc) if isinstance(exc, CorruptFile) else \
                f"unreadable: {exc.strerror or exc}"
        else:
            if not any(d.events for d in entry.devices):
                entry.notes.append("no allocator history (recording was off): the peak is the "
                                   "state when the snapshot was taken")
        entries.append(entry)
    return entries
