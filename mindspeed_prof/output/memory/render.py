"""Allocator snapshots' peaks as a table, JSON or CSV rows, and as torch's HTML timeline."""

import csv
import io
import os
from typing import Any, Dict, List

from ..read.snapshot import load_snapshot
from .summary import MemoryEntry
from ..render import safe


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def memory_dicts(entries: List[MemoryEntry]) -> List[Dict[str, Any]]:
    return [e.as_dict() for e in entries]


def memory_table(entries: List[MemoryEntry], top: int = 5) -> str:
    if not entries:
        return ""
    lines = ["Memory (allocator snapshots): peak over the recorded history",
             f"{'RANK':<5} {'PEAK ALLOC':>12} {'PEAK RESERVED':>14} {'EVENTS':>8}  SNAPSHOT"]
    for entry in entries:
        if entry.error:
            lines.append(f"{entry.file.rank:<5} {'-':>12} {'-':>14} {'-':>8}  {entry.file.rel}: "
                         f"{entry.error}")
            continue
        for device in entry.devices:
            lines.append(f"{entry.file.rank:<5} {_mib(device.peak_allocated):>12} "
                         f"{_mib(device.peak_reserved):>14} {device.events:>8}  {entry.file.rel}"
                         + (f" (device {device.device})" if len(entry.devices) > 1 else ""))
            for oom in device.ooms:
                lines.append(f"{'':<5} out of memory: {_mib(oom['requested_bytes'])} requested, "
                             f"{_mib(oom['device_free_bytes'])} free")
            for site in device.top_sites[:top]:
                lines.append(f"{'':<5} {_mib(site.bytes):>12}  {site.site}"
                             + (f" ({site.blocks} blocks)" if site.blocks > 1 else ""))
        for note in entry.notes:
            lines.append(f"{'':<5} note: {note}")
    return safe.lines("\n".join(lines))


def memory_csv(entries: List[MemoryEntry], header: bool = False) -> str:
    """Rows in summary's long format: section, rank, step, name, type, metric, value."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(["section", "rank", "step", "name", "type", "metric", "value"])
    for entry in entries:
        for device in entry.devices:
            name = entry.file.rel
            for metric, value in (("peak_allocated_bytes", device.peak_allocated),
                                  ("peak_reserved_bytes", device.peak_reserved),
                                  ("events", device.events)):
                writer.writerow(["memory", entry.file.rank, "", name, entry.file.kind, metric,
                                 value])
            for site in device.top_sites:
                writer.writerow(["memory_site", entry.file.rank, "", site.site, name,
                                 "bytes_at_peak", site.bytes])
    return safe.lines(out.getvalue())


def write_timeline(snapshot_path: str, out_path: str) -> str:
    """torch's offline "Active Memory Timeline" (``torch.cuda._memory_viz.trace_plot``) of the
    snapshot, read through the restricted reader, never ``pickle.load``. The page embeds the
    snapshot and loads torch's MemoryViz.js viewer from cdn.jsdelivr.net when opened."""
    from torch.cuda import _memory_viz

    snapshot = load_snapshot(snapshot_path)
    html = _memory_viz.trace_plot(snapshot.data)
    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(html)
    return out_path
