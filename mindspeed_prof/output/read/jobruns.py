"""Several jobs in one save path: judge one run at a time, the newest unless ``--run`` says.

A second job writing into the same ``--profile-save-path`` (the default ``./profile_dir`` makes
it common) never replaces the first one's manifests (``manifest.py`` gives its own a name with
its run id). A run is the manifests that share a ``run_id``: every rank of one job writes the
same one (``run_id.py``: torchrun's run id, SLURM's job.step, else one shared through the job's
store). ``check`` and ``summary`` read the newest run as a whole (by when it started): its
ranks, its expected ranks, its captures; every other run's manifests, and the captures they
list, are left out and named. Judging rank 0 by one job and rank 1 by another would give one
verdict for two runs.

Within a run, a rank may have several manifests (torchrun restarted its workers: same run id,
new processes); the newest is the rank's, the others are left out as older attempts.

Whether a manifest's run id is shared is what its ``run_id_source`` says (``run_id.py``):
``process`` is a lone process's own id (ranks that had no job store when they armed); every
other source is the job's. The spelling never decides: an id agreed through the job's store is
the ``host-pid`` of the rank that got there first, spelled as that rank's own id. Manifests of
an older mindspeed_prof, which name no source, are read as before: an id equal to the
manifest's own ``host-pid`` (or none) is the process's only.

Manifests whose run id is only their own process's cannot say which job they belong to. They
are split into runs by when they started: a rank seen twice means a second job, which began at
the widest gap between starts before it.
"""

import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ...errors import ConfigError
from ...recording.run_id import PROCESS


@dataclass
class JobRun:
    """The manifests of one run (``ManifestFile`` entries), oldest first."""

    label: str
    manifests: List[Any]
    shared: bool  # its ranks share a run id (False: grouped by their start times)

    @property
    def ids(self):
        return {_run_id(e) for e in self.manifests}

    @property
    def started(self):
        return min(_started_ns(e) for e in self.manifests)

    def describe(self):
        ranks = sorted({e.rank for e in self.manifests})
        names = ", ".join(e.rel for e in self.manifests[:3])
        more = " ..." if len(self.manifests) > 3 else ""
        return (f"run {self.label} (started {_started_text(self.manifests)}, rank(s) "
                f"{', '.join(map(str, ranks))}: {names}{more})")


@dataclass
class Runs:
    """The run judged (one manifest per rank) and the manifests left out."""

    chosen: Dict[int, Any] = field(default_factory=dict)  # rank -> ManifestFile
    left_out: List[Any] = field(default_factory=list)
    judged: Optional[JobRun] = None
    others: List[JobRun] = field(default_factory=list)  # the other runs, oldest first
    asked: Optional[str] = None  # --run, when given

    def left_out_paths(self):
        """Every capture path a left-out manifest lists (absolute, normalised)."""
        paths = set()
        for entry in self.left_out:
            base = os.path.dirname(entry.path)
            for name in _listed(entry.data):
                paths.add(os.path.normpath(os.path.join(base, name)))
        return paths

    def note(self):
        """One line naming what was left out, or None."""
        if not self.left_out:
            return None
        parts = []
        if self.others:
            which = "the run asked for (--run)" if self.asked else "the newest run"
            parts.append(f"{len(self.others) + 1} runs wrote into this directory: judged "
                         f"{which}, {self.judged.describe()}; left out "
                         + "; ".join(r.describe() for r in self.others)
                         + ". Look at another with --run ID; give each job its own "
                           "--profile-save-path")
        attempts = [e for e in self.left_out if self.judged and e in self.judged.manifests]
        if attempts:
            parts.append(f"run {self.judged.label} wrote rank(s) "
                         f"{', '.join(str(r) for r in sorted({e.rank for e in attempts}))} "
                         f"more than once (its workers restarted): each judged by its newest "
                         f"manifest; left out {', '.join(e.rel for e in attempts)}")
        return ". ".join(parts)


def choose(manifests, run: Optional[str] = None) -> Runs:
    """The newest run of the readable ``ManifestFile`` entries (or the one ``run`` names:
    ``ConfigError`` when none has that id), its newest manifest per rank, the rest left out."""
    runs = group(manifests)
    result = Runs(asked=run)
    if not runs:
        if run is not None:
            raise ConfigError(f"--run {run}: no readable profile_manifest_rank*.json here, so "
                              f"no run to pick; leave out --run.")
        return result
    if run is None:
        judged = runs[-1]
    else:
        matching = [r for r in runs if run in r.ids or run == r.label]
        if not matching:
            raise ConfigError(f"--run {run}: no manifest here has that run id; the runs are "
                              + "; ".join(r.describe() for r in runs) + ".")
        judged = matching[-1]
    result.judged = judged
    result.others = [r for r in runs if r is not judged]
    for entry in sorted(judged.manifests, key=_age, reverse=True):
        if entry.rank in result.chosen:
            result.left_out.append(entry)
        else:
            result.chosen[entry.rank] = entry
    for other in result.others:
        result.left_out.extend(other.manifests)
    return result


def newest_per_rank(manifests) -> Runs:
    """``choose(manifests)``: the newest run's manifest per rank (the name older readers use)."""
    return choose(manifests)


def group(manifests) -> List[JobRun]:
    """The runs of the readable manifests, oldest first."""
    shared: Dict[str, List[Any]] = {}
    unshared: List[Any] = []
    for entry in manifests:
        if entry.data is None:
            continue
        run_id = _run_id(entry)
        if _own_process_only(entry):
            unshared.append(entry)
        else:
            shared.setdefault(run_id, []).append(entry)
    runs = [JobRun(run_id, sorted(entries, key=_age), True) for run_id, entries in shared.items()]
    runs.extend(_split_by_start(unshared))
    return sorted(runs, key=lambda r: (r.started, r.label))


def keep_runs(found_runs, runs):
    """The captures that no left-out manifest lists."""
    gone = runs.left_out_paths()
    if not gone:
        return list(found_runs)
    return [r for r in found_runs if not any(
        os.path.normpath(r.path) == p or os.path.normpath(r.path).startswith(p + os.sep)
        for p in gone)]


def _split_by_start(entries):
    """Runs of manifests without a shared id: in start order, a rank seen again begins the next
    run, at the widest gap between starts since that rank's first manifest."""
    runs, current = [], []
    for entry in sorted(entries, key=_age):
        seen = [i for i, e in enumerate(current) if e.rank == entry.rank]
        if seen:
            sequence = current + [entry]
            gaps = [(_started_ns(sequence[i + 1]) - _started_ns(sequence[i]), i)
                    for i in range(seen[-1], len(current))]
            cut = max(gaps)[1] + 1
            runs.append(current[:cut])
            current = current[cut:]
        current.append(entry)
    if current:
        runs.append(current)
    return [JobRun(_unshared_label(run), run, False) for run in runs]


def _unshared_label(entries):
    ids = sorted({_run_id(e) for e in entries})
    return ids[0] if len(ids) == 1 else f"{ids[0]} (+{len(ids) - 1} processes without a " \
                                        f"shared run id)"


def _own_process_only(entry):
    """True when the manifest's run id is its process's alone: absent, or its
    ``run_id_source`` says ``process``; without a source (older manifests), when the id is the
    manifest's own ``host-pid``."""
    data = entry.data
    run_id = data.get("run_id")
    if not run_id:
        return True
    if "run_id_source" in data:
        return data["run_id_source"] == PROCESS  # a source unknown here is a job's
    return str(run_id) == f"{data.get('hostname')}-{data.get('pid')}"


def _listed(data):
    files = data.get("files") if isinstance(data, dict) else None
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []


def _age(entry):
    data = entry.data
    started_ns = data.get("started_ns")
    return (str(data.get("started_at") or ""),
            started_ns if isinstance(started_ns, int) else 0, entry.rel)


def _started_ns(entry):
    started_ns = entry.data.get("started_ns")
    if isinstance(started_ns, int) and not isinstance(started_ns, bool):
        return started_ns
    try:  # older manifests: local time to the second
        return int(time.mktime(time.strptime(str(entry.data.get("started_at")),
                                             "%Y-%m-%dT%H:%M:%S")) * 1e9)
    except (ValueError, OverflowError):
        return 0


def _run_id(entry):
    run = entry.data.get("run_id")
    return str(run) if run else f"(no run id, pid {entry.data.get('pid')})"


def _started_text(entries):
    return min(str(e.data.get("started_at") or "?") for e in entries)
