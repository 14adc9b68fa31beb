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
    with open(os.path.join(directory, f"profile_manifest_rank{rank}.json")) as handle:
        return json.load(handle)
