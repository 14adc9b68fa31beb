"""Which captures go into a merged timeline: one role, one window, the asked ranks and steps.

The save path is found and split into runs as ``summary`` does (``read/discover.py``,
``read/jobruns.py``: the newest run); RL output (``{role}/`` folders) needs ``--role``; a save
path of several windows needs a window folder or ``--steps``. Each rank becomes a ``Track``:
its captures' timeline files (a torch trace, or torch_npu's ``trace_view.json``), the steps
each recorded (from ``check``'s scan, remembered in the cache) and its place in the parallel
layout (the manifest's ``parallel`` sizes, Megatron's rank order tp, cp, dp, pp).
"""

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...config import ranks as rank_grammar
from ...errors import ConfigError
from ...layout import ASCEND_OUTPUT_DIR, parse_window_dir
from .. import cache, parallel
from ..read import jobruns, tracescan
from ..read.discover import discover
from ..read.errors import CorruptFile
from ..read.roles import role_roots
from . import clock

NPU_TIMELINE = os.path.join(ASCEND_OUTPUT_DIR, "trace_view.json")
_STEPS_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


@dataclass
class Capture:
    """One timeline file of a rank, with the steps it recorded on its own clock (µs)."""

    path: str
    rel: str
    backend: str
    window: str  # the window folder it lies in, relative to the root ("." when none)
    steps: Optional[Dict[int, Tuple[float, float]]] = field(default_factory=dict)  # N -> (start, end); None: unreadable
    base_ns: int = 0  # torch's baseTimeNanoseconds: ts + base is the rank's clock
    host: Optional[str] = None  # the host_name torch wrote in the file


@dataclass
class Track:
    """One rank's process in the merged file."""

    rank: int
    name: str
    host: Optional[str]
    captures: List[Capture] = field(default_factory=list)

    def steps(self) -> Dict[int, Tuple[float, float]]:
        """Every step of this rank on its clock (ts + base), the newest capture's on a clash."""
        merged: Dict[int, Tuple[float, float]] = {}
        for capture in self.captures:
            for number, (start, end) in (capture.steps or {}).items():
                base = capture.base_ns / 1000.0
                merged[number] = (start + base, end + base)
        return merged


@dataclass
class Selection:
    root: str
    role: Optional[str]
    unit: Optional[str]
    tracks: List[Track]
    steps: Optional[Tuple[int, int]]
    windows: List[str]
    notes: List[str] = field(default_factory=list)
    quick: bool = False  # some steps read from markers alone, their files not validated


def parse_steps(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """``--steps 5-7`` -> (5, 7); ``--steps 6`` -> (6, 6); None when not given."""
    if text is None:
        return None
    match = _STEPS_RE.match(text)
    if not match:
        raise ConfigError(f"--steps {text!r} is not a step range; write A-B (e.g. --steps 5-7) "
                          f"or one step (--steps 6), in the trace's step numbers.")
    first, last = int(match.group(1)), int(match.group(2) or match.group(1))
    if last < first:
        raise ConfigError(f"--steps {text} runs backwards; write it as {last}-{first}.")
    return first, last


def select(directory: str, ranks: Optional[List[str]] = None, steps: Optional[str] = None,
           role: Optional[str] = None, quick: bool = False) -> Selection:
    """The tracks of ``directory``'s chosen window; ``ConfigError`` for what the user must
    change (naming the argument and the fix). ``quick``: a file ``check`` has not scanned
    gives its steps from its markers alone (``tracescan.quick_steps``), unvalidated: for a
    caller that reads every byte strictly afterwards, and calls again without ``quick`` when
    a file proves corrupt (``Selection.quick`` says whether any was read so)."""
    if not os.path.isdir(directory):
        what = "does not exist" if not os.path.exists(directory) else "is not a directory"
        raise ConfigError(f"DIR {directory} {what}; give the --profile-save-path of the "
                          f"profiled run, or one of its window folders (e.g. iter_5-7).")
    asked = parse_steps(steps)
    root = _role_root(directory, role)
    found = discover(root)
    runs = jobruns.choose(found.manifests)
    notes = [runs.note()] if runs.left_out else []
    captures = jobruns.keep_runs(found.runs, runs)
    manifests = runs.chosen
    chosen_ranks = _chosen_ranks(ranks, captures, manifests)
    chosen = []
    for run in sorted(captures, key=lambda r: (r.rank if r.rank is not None else -1,
                                               r.timestamp or "", r.rel)):
        if run.rank is None:
            notes.append(f"{run.rel}: rank unknown, left out")
        elif chosen_ranks is None or run.rank in chosen_ranks:
            capture = _capture(run, found.root, notes)
            if capture is not None:
                chosen.append((run, capture))
    quick_read = _read_steps([c for _, c in chosen], notes, quick)
    tracks: Dict[int, Track] = {}
    for run, capture in chosen:
        if capture.steps is None:
            continue  # unreadable: said in the notes
        if asked and capture.steps and not any(asked[0] <= n <= asked[1] for n in capture.steps):
            continue
        if asked and not capture.steps:
            notes.append(f"{capture.rel}: no ProfilerStep#N markers, left out (--steps "
                         f"needs them)")
            continue
        track = tracks.get(run.rank)
        if track is None:
            manifest = manifests.get(run.rank)
            data = manifest.data if manifest is not None and isinstance(manifest.data, dict) \
                else {}
            track = tracks[run.rank] = Track(run.rank, place_name(run.rank, data, role),
                                             _host(data))
        track.captures.append(capture)
        track.host = track.host or capture.host
    windows = sorted({c.window for t in tracks.values() for c in t.captures})
    if len(windows) > 1 and asked is None:
        shown = ", ".join(windows[:6]) + (" ..." if len(windows) > 6 else "")
        raise ConfigError(f"DIR {directory} holds {len(windows)} windows ({shown}); a timeline "
                          f"shows one: give one window folder (e.g. `mindspeed-prof timeline "
                          f"{os.path.join(directory, windows[0])} -o ...`) or --steps A-B.")
    if not tracks:
        raise ConfigError(_nothing(directory, ranks, steps, found))
    unit = _unit(windows, manifests)
    return Selection(root=found.root, role=role, unit=unit,
                     tracks=[tracks[r] for r in sorted(tracks)], steps=asked, windows=windows,
                     notes=notes, quick=quick_read)


def _role_root(directory, role):
    roots = role_roots(directory)
    has_roles = bool(roots) and not (len(roots) == 1 and roots[0].rel == ".")
    if role is None:
        if has_roles:
            names = sorted({r.role if r.stage is None else f"{r.role}/{r.stage}" for r in roots})
            raise ConfigError(f"DIR {directory} holds RL role output ({', '.join(names)}); a "
                              f"timeline shows one role: add --role {names[0]}.")
        return directory
    if not roots:
        raise ConfigError(f"--role {role}: {directory} holds no RL role output (its manifests "
                          f"name no role); leave out --role.")
    name, _, stage = role.partition("/")
    matching = [r for r in roots if r.role == name and (r.stage or "") == stage]
    if not matching:
        names = sorted({r.role if r.stage is None else f"{r.role}/{r.stage}" for r in roots})
        raise ConfigError(f"--role {role}: no such role under {directory}; it holds "
                          f"{', '.join(names)} (a stage is written ROLE/STAGE).")
    return matching[0].path


def _chosen_ranks(tokens, captures, manifests):
    """The global ranks ``--ranks`` names (None: every rank), with the parallel layout the
    manifests give for selectors (tp=0,pp=*, pp-stage-leaders, ...)."""
    if not tokens:
        return None
    try:
        selection = rank_grammar.parse_rank_tokens(list(tokens))
        world = _world_size(captures, manifests)
        layout = _layout(manifests, world)
        return set(rank_grammar.resolve(selection, world, layout))
    except ConfigError as exc:
        raise ConfigError(str(exc).replace(rank_grammar.FLAG, "--ranks")) from None


def _world_size(captures, manifests):
    for manifest in manifests.values():
        world = manifest.data.get("world_size") if isinstance(manifest.data, dict) else None
        if isinstance(world, int) and world > 0:
            return world
    found = [r.rank for r in captures if r.rank is not None]
    return max(found) + 1 if found else 1


def _sizes(data):
    parallel = data.get("parallel") if isinstance(data, dict) else None
    if not isinstance(parallel, dict):
        return None

    def size(key):
        value = parallel.get(key)
        return value if isinstance(value, int) and value > 0 else 1
    return {"tp": size("tensor_model_parallel_size"), "cp": size("context_parallel_size"),
            "pp": size("pipeline_model_parallel_size"), "dp": size("data_parallel_size")}


def coordinates(rank: int, data: dict) -> Optional[Dict[str, int]]:
    """The rank's tp/cp/dp/pp coordinates from the manifest's sizes, in Megatron's default
    rank order (tp fastest, then cp, dp, pp); None without a parallel layout."""
    sizes = _sizes(data)
    if sizes is None:
        return None
    tp, cp, dp = sizes["tp"], sizes["cp"], sizes["dp"]
    return {"tp": rank % tp, "cp": (rank // tp) % cp, "dp": (rank // (tp * cp)) % dp,
            "pp": rank // (tp * cp * dp), "node": 0}


def _layout(manifests, world):
    data = next((m.data for m in manifests.values() if _sizes(m.data)), None)
    if data is None:
        return None
    return {rank: coordinates(rank, data) for rank in range(world)}


def place_name(rank: int, data: dict, role: Optional[str] = None) -> str:
    """``rank 5 · tp1 pp0 dp2`` (cp when the job has it; the role in front for RL)."""
    name = f"rank {rank}"
    coords, sizes = coordinates(rank, data), _sizes(data)
    if coords is not None and sizes is not None:
        shown = [f"tp{coords['tp']}"] + ([f"cp{coords['cp']}"] if sizes["cp"] > 1 else []) \
            + [f"pp{coords['pp']}", f"dp{coords['dp']}"]
        name += " · " + " ".join(shown)
    return f"{role} {name}" if role else name


def _host(data):
    host = data.get("hostname") if isinstance(data, dict) else None
    return host if isinstance(host, str) and host else None


def _window_of(rel):
    parts = rel.split(os.sep)[:-1]
    for i in range(len(parts) - 1, -1, -1):
        if parse_window_dir(parts[i]) is not None:
            return os.path.join(*parts[:i + 1])
    return "."


def _capture(run, root, notes) -> Optional[Capture]:
    if run.backend == "npu":
        path = os.path.join(run.path, NPU_TIMELINE)
        if not os.path.isfile(path):
            notes.append(f"{run.rel}: no {NPU_TIMELINE} (not parsed, or a db export), left out")
            return None
    else:
        path = run.path
    return Capture(path=path, rel=os.path.relpath(path, root), backend=run.backend,
                   window=_window_of(run.rel))


def _read_steps(captures, notes, quick=False):
    """Each capture's steps, base and host (``clock.recorded_steps``), over several processes
    when the cache does not hold the files' scans (what ``check`` reads: after it, none);
    with ``quick``, such a file's from its markers where they decode alone (about 20 ms of
    CPU per 95 MB). Returns whether any was read so."""
    cached = [cache.load(c.path, tracescan.KIND) is not None for c in captures]
    results = [None if cached[i] or not quick else _quick_steps(c.path)
               for i, c in enumerate(captures)]
    read_quickly = any(found is not None for found in results)
    whole = [i for i, found in enumerate(results) if found is None]
    sizes = [0 if cached[i] else _size(captures[i].path) for i in whole]
    scanned = parallel.run(_steps_or_error, [(captures[i].path,) for i in whole],
                           parallel.workers_for(sum(sizes), len(whole)),
                           warm=tracescan.load_parsers) if whole else []
    for i, found in zip(whole, scanned):
        results[i] = found
    for capture, (found, error, unreadable) in zip(captures, results):
        if error is not None:
            notes.append(f"{capture.rel}: unreadable ({error}), left out; run "
                         f"`mindspeed-prof check`")
            capture.steps = None
        else:
            capture.steps, capture.base_ns, capture.host = found
            if unreadable:  # steps whose ts/dur is no finite number: not aligned on
                notes.append(f"{capture.rel}: {unreadable}")
    return read_quickly


def _quick_steps(path):
    """``_steps_or_error``'s answer from the file's markers alone; None: scan it whole."""
    scan = tracescan.quick_steps(path)
    if scan is None:
        return None
    return clock.recorded_steps(path, scan), None, scan.unreadable_note()


def _steps_or_error(path):
    """(steps, base, host), the error that made the file unreadable, and what its scan
    says of the steps whose time it could not read."""
    try:
        scan = tracescan.remembered_scan(path)
        return clock.recorded_steps(path, scan), None, scan.unreadable_note()
    except (CorruptFile, OSError, ValueError, RecursionError, EOFError) as exc:
        return None, str(exc), None


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _unit(windows, manifests):
    for window in windows:
        for part in reversed(window.split(os.sep)):
            parsed = parse_window_dir(part)
            if parsed is not None:
                return parsed[0].name
    for manifest in manifests.values():
        unit = manifest.data.get("unit") if isinstance(manifest.data, dict) else None
        if isinstance(unit, str):
            return unit
    return None


def _nothing(directory, ranks, steps, found):
    if not found.runs:
        return (f"DIR {directory}: no capture found (no rank*.pt.trace.json, no *_ascend_pt "
                f"folder); give the --profile-save-path of a profiled run.")
    asked = []
    if ranks:
        asked.append(f"--ranks {' '.join(ranks)}")
    if steps:
        asked.append(f"--steps {steps}")
    if asked:
        return (f"{' and '.join(asked)}: no capture under {directory} matches; run "
                f"`mindspeed-prof summary {directory} --steps` to see its ranks and steps.")
    return (f"DIR {directory}: no capture with a timeline file (torch trace or "
            f"{NPU_TIMELINE}); run `mindspeed-prof check {directory}` to see why.")
