"""``summary`` of the captures a run took by itself: the anomalous rank beside its reference.

A capture's manifest window says why it was taken (``trigger``, see ``anomaly.py``). Per capture:

- **straggler**: the rule profiled the straggler and one median rank (the reference) over the
  same units: their step breakdowns side by side, and the operators (torch: self time) or
  kernels (NPU) whose time per step grew most from the reference to the straggler;
- **slow step**: every selected rank recorded the same units; the anomalous rank is the one
  that computed longest in them (step time minus communication), the reference the median of
  the others. A capture of one rank has nothing beside it: its steps stand against the median
  step time that fired it.

Each capture's files are read again here (captures are few and short); the rest of ``summary``
is unchanged.
"""

from dataclasses import dataclass, field

from ...control.capture_words import describe
from ..read import jobruns, jsonstream
from ..read.discover import discover
from ..read.errors import CorruptFile
from ..read.windows import manifest_window
from .directory import read_capture

RULES = ("slow step", "straggler")
# Events of a torch trace that are a collective running: torch's gloo/nccl annotations (on the
# backend's own thread) and NCCL kernels. The wait for the other ranks is inside them.
COMMUNICATION = ("gloo:", "nccl:", "hccl:", "ncclkernel", "nccldevkernel")


@dataclass
class Capture:
    dir: str
    start: int
    trigger: dict
    unit: str = "iteration"
    runs: dict = field(default_factory=dict)  # rank -> [discover.Run]


def compare_captures(path, top=10):
    """Per capture taken by a rule: the comparison described in the module docstring."""
    found = discover(path)
    manifests = jobruns.newest_per_rank(found.manifests).chosen
    captures = {}
    for run in found.runs:
        manifest = manifests.get(run.rank)
        window = manifest_window(run, manifest) if manifest is not None else None
        trigger = window.get("trigger") if isinstance(window, dict) else None
        if not isinstance(trigger, dict) or trigger.get("rule") not in RULES:
            continue
        key = (str(window.get("dir")), window.get("start"))
        capture = captures.get(key)
        if capture is None:
            shared = {k: v for k, v in trigger.items() if k != "this_rank"}
            capture = captures[key] = Capture(key[0], key[1], shared,
                                              str(manifest.data.get("unit") or "iteration"))
        capture.runs.setdefault(run.rank, []).append(run)
    return [_compare(c, top) for c in sorted(captures.values(),
                                              key=lambda c: (c.start or 0, c.dir))]


def _read(capture):
    """rank -> the RankSummary of its runs in this capture."""
    read = {}
    for rank, runs in capture.runs.items():
        parts = [read_capture(r.backend, r.path, r.rel, rank) for r in runs]
        summary = parts[0]
        for part in parts[1:]:  # one session per unit (requests, RL steps): one folder each
            summary.steps.extend(part.steps)
            for attribute in ("ops", "kernels"):
                for name, item in getattr(part, attribute).items():
                    mine = getattr(summary, attribute).setdefault(name, item)
                    if mine is not item:
                        mine.total_us += item.total_us
                        mine.count += item.count
            summary.notes.extend(part.notes)
        read[rank] = summary
    return read


def _communication_us(runs):
    """Microseconds of collectives in these torch traces (the events COMMUNICATION names)."""
    total = 0.0
    for run in runs:
        if run.backend != "torch":
            continue
        try:
            for batch in jsonstream.iter_event_batches(run.path):
                for event in batch:
                    if isinstance(event, dict) and event.get("ph") == "X" and str(
                            event.get("name", "")).lower().startswith(COMMUNICATION):
                        total += float(event.get("dur") or 0.0)
        except (CorruptFile, OSError, ValueError):
            continue  # summary's own reading says what is wrong with the file
    return total


def _compute_us(summary, runs=()):
    """Mean time per step spent computing: NPU's Computing, else the step minus the time the
    trace shows in collectives."""
    breakdown = summary.breakdown()
    if breakdown.get("Computing") is not None:
        return breakdown["Computing"]
    step = breakdown.get("step_time")
    if step is None or not summary.steps:
        return None
    return step - _communication_us(runs) / len(summary.steps)


def _pick(trigger, read, runs):
    """(anomalous rank, reference rank or None) for this capture."""
    if trigger.get("rule") == "straggler":
        return trigger.get("straggler"), trigger.get("reference")
    timed = sorted((c, r) for r, c in ((r, _compute_us(s, runs[r])) for r, s in read.items())
                   if c is not None)
    if not timed:
        return (min(read) if read else None), None
    anomalous = timed[-1][1]
    others = timed[:-1]
    return anomalous, (others[(len(others) - 1) // 2][1] if others else None)


def _side(rank, summary, runs):
    steps = len(summary.steps)
    return {"rank": rank, "steps": sorted(s["step"] for s in summary.steps
                                          if s.get("step") is not None),
            "breakdown_us": summary.breakdown(), "compute_us": _compute_us(summary, runs),
            "backend": summary.backend, "notes": summary.notes[:3],
            "_per_step": {f"{kind}:{item.name}": (kind, item, item.total_us / steps)
                          for kind, items in (("op", summary.ops), ("kernel", summary.kernels))
                          for item in items.values()} if steps else {}}


def _compare(capture, top):
    read = _read(capture)
    trigger = capture.trigger
    anomalous, reference = _pick(trigger, read, capture.runs)
    result = {"dir": capture.dir, "start": capture.start, "rule": trigger.get("rule"),
              "capture": trigger.get("capture"), "why": describe(trigger, capture.unit),
              "trigger": trigger, "anomalous": None, "reference": None, "grew": [],
              "notes": []}
    if anomalous not in read:
        result["notes"].append(f"rank {anomalous}'s capture is not under this directory")
        return result
    numbers = trigger.get("per_rank_s") if isinstance(trigger.get("per_rank_s"), dict) else {}
    mine = _side(anomalous, read[anomalous], capture.runs[anomalous])
    mine["judged_s"] = numbers.get(str(anomalous))
    result["anomalous"] = mine
    if reference is None or reference not in read:
        result["notes"].append("no reference rank recorded this capture: " + (
            f"its steps against the median {trigger.get('median_s')} s that fired it"
            if trigger.get("rule") == "slow step" else f"rank {reference}'s capture is absent"))
        result["anomalous"]["vs_median"] = _vs_median(mine, trigger)
    else:
        theirs = _side(reference, read[reference], capture.runs[reference])
        theirs["judged_s"] = numbers.get(str(reference))
        result["reference"] = theirs
        result["grew"] = _grew(mine["_per_step"], theirs["_per_step"], top)
        theirs.pop("_per_step")
    mine.pop("_per_step")
    return result


def _vs_median(side, trigger):
    median = trigger.get("median_s")
    step = side["breakdown_us"].get("step_time")
    if not isinstance(median, (int, float)) or not median or step is None:
        return None
    return round(step / 1e6 / median, 3)


def _grew(mine, theirs, top):
    """The operators and kernels whose time per step grew most from the reference."""
    rows = []
    for key in set(mine) | set(theirs):
        kind, item, _ = mine.get(key) or theirs[key]
        a = mine[key][2] if key in mine else 0.0
        b = theirs[key][2] if key in theirs else 0.0
        rows.append({"name": item.name, "kind": kind, "type": item.kind,
                     "anomalous_us_per_step": a, "reference_us_per_step": b,
                     "grew_us_per_step": a - b})
    rows.sort(key=lambda r: (-r["grew_us_per_step"], r["name"]))
    return [r for r in rows if r["grew_us_per_step"] > 0][:top]
