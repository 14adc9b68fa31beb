"""Several jobs in one save path: judge each rank by its newest manifest, name the runs left out.

A second job writing into the same ``--profile-save-path`` (the default ``./profile_dir`` makes
it common) never replaces the first one's manifests (``manifest.py`` gives its own a name with
its run id). ``check`` and ``summary`` then read, per rank, the newest manifest (by
``started_at``), leave out the captures the older manifests list, and say which runs they left
out, so two runs are never merged without a word.
"""

import os
from dataclasses import dataclass, field
from typing import Dict, List


@dataclass
class Runs:
    """The manifests to use (one per rank) and the older runs' manifests left out."""

    chosen: Dict[int, object] = field(default_factory=dict)  # rank -> ManifestFile
    left_out: List[object] = field(default_factory=list)

    def left_out_paths(self):
        """Every capture path an older run's manifest lists (absolute, normalised)."""
        paths = set()
        for entry in self.left_out:
            base = os.path.dirname(entry.path)
            for name in _listed(entry.data):
                paths.add(os.path.normpath(os.path.join(base, name)))
        return paths

    def note(self):
        """One line naming the runs left out, or None."""
        if not self.left_out:
            return None
        chosen = sorted({_run(e) for e in self.chosen.values()})
        older = {}
        for entry in self.left_out:
            older.setdefault(_run(entry), []).append(entry)
        shown = "; ".join(f"run {run} (started {_started(entries)}, rank(s) "
                          f"{', '.join(str(e.rank) for e in sorted(entries, key=_rank))}: "
                          f"{', '.join(e.rel for e in entries[:3])}"
                          f"{' ...' if len(entries) > 3 else ''})"
                          for run, entries in sorted(older.items()))
        return (f"{len(older) + len(chosen)} runs wrote into this directory: each rank is "
                f"judged by its newest manifest (run {', '.join(chosen)}); left out {shown}. "
                f"Give each job its own --profile-save-path")


def newest_per_rank(manifests):
    """Split readable ``ManifestFile`` entries into the newest per rank and the rest."""
    runs = Runs()
    by_rank = {}
    for entry in manifests:
        if entry.data is not None:
            by_rank.setdefault(entry.rank, []).append(entry)
    for rank, entries in by_rank.items():
        entries.sort(key=_age, reverse=True)
        runs.chosen[rank] = entries[0]
        runs.left_out.extend(entries[1:])
    return runs


def keep_runs(found_runs, runs):
    """The captures that no left-out manifest lists."""
    gone = runs.left_out_paths()
    if not gone:
        return list(found_runs)
    return [r for r in found_runs if not any(
        os.path.normpath(r.path) == p or os.path.normpath(r.path).startswith(p + os.sep)
        for p in gone)]


def _listed(data):
    files = data.get("files") if isinstance(data, dict) else None
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []


def _age(entry):
    data = entry.data
    started_ns = data.get("started_ns")
    return (str(data.get("started_at") or ""),
            started_ns if isinstance(started_ns, int) else 0, entry.rel)


def _run(entry):
    run = entry.data.get("run_id")
    return str(run) if run else f"(no run id, pid {entry.data.get('pid')})"


def _rank(entry):
    return entry.rank


def _started(entries):
    return min(str(e.data.get("started_at") or "?") for e in entries)
