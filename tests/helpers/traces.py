"""Reading what the profiler wrote, for assertions."""

import glob
import json
import os
import re

from mindspeed_prof.config import schedule_marks as sm

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def torch_traces(directory):
    return sorted(glob.glob(os.path.join(directory, "**", "*.pt.trace.json"), recursive=True))


def step_ids(trace_path):
    with open(trace_path) as handle:
        events = json.load(handle)["traceEvents"]
    return sorted({int(m.group(1)) for e in events
                   if (m := STEP.match(str(e.get("name", ""))))})


def manifest(directory, rank):
    """Rank ``rank``'s newest manifest (a run whose plain name was taken writes
    ``profile_manifest_rank{R}.{run}.json``)."""
    found = []
    for path in glob.glob(os.path.join(directory, f"profile_manifest_rank{rank}*.json")):
        if re.match(rf"^profile_manifest_rank{rank}(\.[A-Za-z0-9_-]+)?\.json$",
                    os.path.basename(path)):
            with open(path) as handle:
                data = json.load(handle)
            found.append((data.get("started_at") or "", data.get("started_ns") or 0, path, data))
    if not found:
        raise FileNotFoundError(f"no profile_manifest_rank{rank}*.json in {directory}")
    return max(found, key=lambda item: item[:3])[3]


def marks_by_step(trace):
    """step -> [marks in start order] of one torch trace."""
    with open(trace) as handle:
        events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in events
                   if e["name"].startswith("ProfilerStep#"))
    found = {}
    for event in sorted(events, key=lambda e: e["ts"]):
        mark = sm.parse(event["name"])
        if mark is not None:
            step = next(n for start, end, n in steps if start <= event["ts"] <= end)
            found.setdefault(step, []).append(mark)
    return found
