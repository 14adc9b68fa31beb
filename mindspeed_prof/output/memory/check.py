"""``check`` and allocator snapshots: present where the manifest's plan says, loadable (by the
restricted reader: a pickle that names anything but plain values is corrupt, and nothing in it
runs), and holding the allocator's history.

A rank whose manifest asked for ``--profile-memory-snapshot`` must have
``memory_snapshot_rank{R}.pickle`` in the folder of every window that recorded a unit; an
out-of-memory the manifest lists (``memory_oom``) must have left its snapshot. Every snapshot
file found under DIR is read, manifest or not; a rank known only from its snapshots (no
manifest, no capture) is not a valid capture: nothing says what it was asked to record.
"""

import os
from typing import Dict, Optional

from ...layout import memory_snapshot_name
from ..read.errors import CorruptFile
from ..read.memory_files import find_snapshots
from ..read.snapshot import load_snapshot
from ..read.windows import manifest_windows
from ..check.report import CORRUPT, INCOMPLETE, RankReport, Report, worst


def _rank_report(report: Report, rank: int) -> RankReport:
    found = report.rank(rank)
    if found is None:
        found = RankReport(rank=rank)
        report.ranks.append(found)
        report.ranks.sort(key=lambda r: r.rank)
    return found


def _fail(rank_report: RankReport, verdict: str, problem: str) -> None:
    rank_report.verdict = worst(rank_report.verdict, verdict)
    rank_report.problems.append(problem)


def _rel(path: str, root: str) -> str:
    return os.path.relpath(path, root)


def check_snapshots(root: str, manifests: Dict[int, object], report: Report,
                    expected_ranks: Optional[set] = None) -> None:
    """Add the snapshot verdicts of every rank to ``report`` (``expected_ranks``: only those)."""
    def wanted(rank: int) -> bool:
        return expected_ranks is None or rank in expected_ranks

    for rank, manifest in manifests.items():
        if wanted(rank):
            _planned(root, rank, manifest, report)
    for found in find_snapshots(root):
        if not wanted(found.rank):
            continue
        known = report.rank(found.rank) is not None
        rank_report = _rank_report(report, found.rank)
        if not known:
            _fail(rank_report, INCOMPLETE, f"rank {found.rank} is known only from its allocator "
                                           f"snapshot {found.rel}: no manifest and no trace or "
                                           f"capture of this rank, so nothing says what it was "
                                           f"asked to record or that it recorded it")
        try:
            snapshot = load_snapshot(found.path)
        except CorruptFile as exc:
            _fail(rank_report, CORRUPT, f"{found.rel}: {exc}")
            continue
        except OSError as exc:
            _fail(rank_report, CORRUPT, f"{found.rel}: unreadable: {exc.strerror or exc}")
            continue
        if found.kind == "snapshot" and not snapshot.events:
            _fail(rank_report, INCOMPLETE, f"{found.rel} holds no allocator history "
                                           f"(device_traces empty): the allocator was not "
                                           f"recording during the window")


def _planned(root: str, rank: int, manifest, report: Report) -> None:
    data = manifest.data
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    base = os.path.dirname(manifest.path)
    if config.get("profile_memory_snapshot") is True:
        for window in manifest_windows(manifest):
            if window.get("status") == "failed" or not window.get("iterations_recorded"):
                continue  # nothing ran in it: no history to keep
            folder = window.get("dir") if isinstance(window.get("dir"), str) else "."
            path = os.path.join(base, folder, memory_snapshot_name(rank))
            if not os.path.isfile(path):
                _fail(_rank_report(report, rank), INCOMPLETE,
                      f"missing {_rel(path, root)} (--profile-memory-snapshot writes one per "
                      f"window; the manifest's errors say why it is not there)")
    ooms = data.get("memory_oom") if isinstance(data.get("memory_oom"), list) else []
    for oom in ooms:
        if not isinstance(oom, dict) or not isinstance(oom.get("snapshot"), str):
            continue
        path = os.path.join(base, oom["snapshot"])
        rank_report = _rank_report(report, rank)
        rank_report.warnings.append(
            f"rank {rank} ran out of memory on {oom.get('device')} (tried to allocate "
            f"{oom.get('requested_bytes')} bytes, {oom.get('free_bytes')} free): its allocator "
            f"snapshot is {_rel(path, root)}")
        if not os.path.isfile(path):
            _fail(rank_report, INCOMPLETE, f"missing {_rel(path, root)}, the out-of-memory "
                                           f"snapshot {manifest.rel} lists")
