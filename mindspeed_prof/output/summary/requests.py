"""Per-request rows of an inference profile (DESIGN §6), for ``summary``.

An inference window lands in ``req_{first}-{last}/`` folders, usually one request per capture
(the request driver opens a session per request). Each ``ProfilerStep#N`` of such a capture is
request N: its latency is the step's duration, its forwards are the ``prefill``/``decode``
ranges inside the step, and its top operators are those of the capture (for a capture holding
several requests, of all of them: the row says so).
"""

import os

from ...layout import parse_window_dir
from ...config.units import REQUEST
from ..read import jsonstream
from ..read.errors import CorruptFile
from ..read.tracescan import STEP_PREFIX, step_number, to_float

FORWARD_RANGES = ("prefill", "decode")
TOP_OPS = 3
# torch_npu's timeline, where the record_function ranges of a capture land
NPU_TIMELINE = os.path.join("ASCEND_PROFILER_OUTPUT", "trace_view.json")


def in_request_folder(rel):
    """True when a capture lies under a ``req_…/`` folder."""
    return any((parse_window_dir(part) or (None,))[0] is REQUEST
               for part in rel.split(os.sep)[:-1])


def request_rows(backend, path, rel, partial):
    """One row per request (step) of one capture; ``partial`` is its RankSummary (steps, ops or
    kernels already read). Forwards are None when the capture has no timeline to count in."""
    timeline = path if backend == "torch" else os.path.join(path, NPU_TIMELINE)
    spans, forwards, note = _forwards_per_step(timeline)
    items = partial.ops if backend == "torch" else partial.kernels
    top = [i.name for i in sorted(items.values(), key=lambda i: (-i.total_us, i.name))[:TOP_OPS]]
    steps = [s for s in partial.steps if s.get("step") is not None]
    shared = len({s["step"] for s in steps}) > 1
    rows = []
    for step in steps:
        n = step["step"]
        counts = forwards.get(n) if spans is not None else None
        rows.append({
            "request": n, "device": step.get("device"), "latency_us": step.get("step_time"),
            "forwards": sum(counts.values()) if counts is not None else None,
            "prefill": counts.get("prefill") if counts is not None else None,
            "decode": counts.get("decode") if counts is not None else None,
            "top_ops": top, "top_ops_of": "capture" if shared else "request", "source": rel,
        })
    if note:
        partial.notes.append(f"{rel}: {note}")
    return rows


def _forwards_per_step(timeline):
    """(step spans, {step: {range: count}}, note): ranges assigned to the step they start in."""
    if not os.path.isfile(timeline):
        return None, {}, None
    spans, marks = [], []
    try:
        for event in jsonstream.complete_events(timeline):
            name, ts = event.get("name"), to_float(event.get("ts"))
            if not isinstance(name, str) or ts is None:
                continue
            if name in FORWARD_RANGES and not str(event.get("cat", "")).startswith("gpu"):
                marks.append((ts, name))
            elif name.startswith(STEP_PREFIX):
                n, dur = step_number(name), to_float(event.get("dur"))
                if n is not None and dur is not None:
                    spans.append((ts, ts + dur, n))
    except (CorruptFile, OSError, ValueError) as exc:
        return None, {}, f"forwards not counted ({exc})"
    counts = {n: {r: 0 for r in FORWARD_RANGES} for _, _, n in spans}
    for ts, name in marks:
        for start, end, n in spans:
            if start <= ts <= end:
                counts[n][name] += 1
                break
    return spans, counts, None
