"""Reading what the profiler wrote, for assertions."""

import glob
import json
import os
import re

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
