"""A profiled run's per-op table, from the schedule marks its windows recorded.

The run's ranks are found as ``timeline`` finds them (one window: ``output/timeline/choose``),
their clocks aligned on the steps every rank recorded (``timeline/clock``), and each rank's
place (DP rank, stage) read from its manifest's parallel layout (Megatron's rank order). The
paper's table has one worker per (DP rank, stage): of the tensor/context-parallel ranks of a
worker, the first (tp 0, cp 0) is kept. A mark belongs to the ``ProfilerStep#N`` it starts in
(a device-side copy that spills past its step's host end still belongs to that step); on an NPU
capture, where a mark is there twice (host and device stream), the device's copy is kept.
"""

import bisect
import os
from typing import Any, Dict, List, Optional, Tuple

from ...config import schedule_marks as sm
from ...errors import ConfigError
from ..read import jobruns, jsonstream, tracescan
from ...layout import parse_window_dir
from ..read.discover import discover
from ..read.roles import role_roots
from ..read.errors import CorruptFile
from ..timeline import choose, clock
from .rows import Mark, Worker, rows_of, table_of
from .schema import JobMeta
from .table import OpTable

NO_MARKS = ("the capture has no microbatch marks (forward-compute stage=... ranges); record a "
            "window with mindspeed_prof at this version (its patches mark Megatron's pipeline "
            "schedule inside every window) and run this again; where its steps are marked but "
            "not their microbatches: " + sm.NO_MICROBATCHES)


def from_capture(directory: str) -> Tuple[OpTable, JobMeta, List[str]]:
    _one_window(directory)
    selection = choose.select(directory)
    notes = list(selection.notes)
    found = discover(selection.root)
    manifests = jobruns.choose(found.manifests).chosen
    alignment = clock.align({t.rank: t.steps() for t in selection.tracks},
                            {t.rank: t.host for t in selection.tracks}, selection.steps)
    sizes, workers = _workers(selection, manifests, directory, notes)
    marks: Dict[Worker, List[Mark]] = {}
    for (dp, stage), track in sorted(workers.items()):
        found_marks = _rank_marks(track, alignment.offsets_us.get(track.rank, 0.0), notes)
        if found_marks:
            marks[(dp, stage, track.rank)] = found_marks
    if not marks:
        raise ConfigError(f"DIR {directory}: {NO_MARKS}.")
    stages_seen = {m_stage for (_, m_stage, _) in marks}
    pp = max(sizes["pp"], max(stages_seen) + 1)
    rows, row_notes = rows_of(marks, pp, use_dp=sizes["dp"] * sizes["cp"] > 1)
    notes += row_notes
    chunks = max((m.chunk or 0 for ms in marks.values() for m in ms), default=0) + 1
    trial = _trial(manifests, directory)
    meta = JobMeta(trial_name=trial, run_id=0, dp_size=sizes["dp"], dsp_size=sizes["cp"],
                   pp_size=pp, tp_size=sizes["tp"], vpp_size=chunks,
                   world_size=sizes["dp"] * sizes["cp"] * pp * sizes["tp"])
    if alignment.aligned_on:
        notes.append(f"clocks aligned on the {alignment.aligned_on}.")
    return table_of(rows), meta, notes


def _one_window(directory: str) -> None:
    """What ``timeline``'s selection would refuse, said for the schedule's table: RL roles (no
    pipeline schedule to replay) and several windows (read one: a window's folder)."""
    if not os.path.isdir(directory):
        raise ConfigError(f"DIR {directory} is not a directory; give the --profile-save-path of "
                          f"the profiled run.")
    roots = role_roots(directory)
    if roots and not (len(roots) == 1 and roots[0].rel == "."):
        raise ConfigError(f"DIR {directory} holds RL role output; the schedule's table is a "
                          f"training run's: give a Megatron training run's --profile-save-path.")
    windows = sorted({os.path.join(*parts[:i + 1]) for run in discover(directory).runs
                      for parts in [run.rel.split(os.sep)[:-1]] for i in range(len(parts))
                      if parse_window_dir(parts[i]) is not None})
    if len(windows) > 1:
        raise ConfigError(f"DIR {directory} holds {len(windows)} windows ({', '.join(windows[:4])}"
                          f"{' ...' if len(windows) > 4 else ''}); the table is one window's: "
                          f"give its folder (e.g. {os.path.join(directory, windows[0])}).")


def _workers(selection: Any, manifests: Dict[int, Any], directory: str,
             notes: List[str]) -> Tuple[Dict[str, int], Dict[Tuple[int, int], Any]]:
    """The parallel sizes and, per (DP rank, stage), the track kept for it."""
    sizes: Optional[Dict[str, int]] = None
    workers: Dict[Tuple[int, int], Any] = {}
    left_out = 0
    for track in selection.tracks:
        manifest = manifests.get(track.rank)
        data = manifest.data if manifest is not None and isinstance(manifest.data, dict) else {}
        coords = choose.coordinates(track.rank, data)
        if coords is None:
            continue
        sizes = sizes or choose._sizes(data)
        if coords["tp"] or coords["cp"] or (coords["dp"], coords["pp"]) in workers:
            left_out += 1
            continue
        workers[(coords["dp"], coords["pp"])] = track
    if sizes is None:
        raise ConfigError(f"DIR {directory}: no manifest names the parallel layout (DP and PP "
                          f"sizes: profile_manifest_rank*.json's 'parallel'), so no rank's DP "
                          f"rank is known; give the whole --profile-save-path of a run recorded "
                          f"with mindspeed_prof.")
    if left_out:
        notes.append(f"{left_out} tensor/context-parallel ranks left out: one rank per (DP rank, "
                     f"stage) is the table's worker (tp 0, cp 0 kept).")
    return sizes, workers


def _trial(manifests, directory) -> str:
    for manifest in manifests.values():
        run_id = manifest.data.get("run_id") if isinstance(manifest.data, dict) else None
        if isinstance(run_id, str) and run_id:
            return run_id
    name = os.path.basename(os.path.abspath(directory))
    return name or "run"


def _rank_marks(track, offset_us: float, notes: List[str]) -> List[Mark]:
    steps: List[Tuple[float, int]] = []
    by_pid: Dict[object, List[Tuple[sm.ScheduleMark, float, float]]] = {}
    names: Dict[object, str] = {}
    for capture in track.captures:
        shift = capture.base_ns / 1000.0 + offset_us
        try:
            for batch in jsonstream.iter_event_batches(capture.path):
                for event in batch:
                    _take(event, shift, steps, by_pid, names)
        except (CorruptFile, OSError) as exc:
            notes.append(f"{capture.rel}: {exc}; the marks read before it are kept")
    if not by_pid:
        return []
    pid = _device_copy(by_pid, names)
    steps.sort()
    starts = [s for s, _ in steps]
    out = []
    outside = 0
    for mark, start, end in by_pid[pid]:
        if mark.timer == sm.FORWARD_BACKWARD:
            continue
        at = bisect.bisect_right(starts, start) - 1
        if at < 0:
            outside += 1
            continue
        out.append(Mark(steps[at][1], mark.timer, start / 1e6, end / 1e6, mark.chunk, mark.mb))
    if outside:
        notes.append(f"rank {track.rank}: {outside} marks before its first recorded step left "
                     f"out.")
    return out


def _take(event, shift, steps, by_pid, names) -> None:
    if not isinstance(event, dict):
        return
    name = event.get("name")
    if not isinstance(name, str):
        return
    if event.get("ph") == "M":
        args = event.get("args")
        if name == "process_name" and isinstance(args, dict):
            names[event.get("pid")] = str(args.get("name"))
        return
    if event.get("ph") != "X":
        return
    ts, dur = tracescan.to_float(event.get("ts")), tracescan.to_float(event.get("dur"))
    if ts is None or dur is None or not (dur >= 0) or abs(ts) > 1e18:
        return
    if name.startswith(tracescan.STEP_PREFIX):
        number = tracescan.step_number(name)
        if number is not None and not str(event.get("cat", "")).startswith("gpu"):
            steps.append((ts + shift, number))
        return
    mark = sm.parse(name)
    if mark is not None and not str(event.get("cat", "")).startswith("gpu"):
        by_pid.setdefault(event.get("pid"), []).append((mark, ts + shift, ts + dur + shift))


def _device_copy(by_pid, names) -> object:
    """The process whose marks to keep: the NPU's (``Ascend Hardware``) when it has them (what
    the device spent), else the one with the most."""
    device = [pid for pid in by_pid if names.get(pid) == "Ascend Hardware"]
    if device:
        return device[0]
    return max(by_pid, key=lambda pid: len(by_pid[pid]))
