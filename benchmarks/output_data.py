"""A large save path for figure 5, made by scaling the real Ascend samples.

Each rank starts as the valid capture the output tests build from the real samples
(``tests/output_fixtures/samples.npu_capture``: profiler_info, ASCEND_PROFILER_OUTPUT with
trace_view.json, kernel_details.csv, step_trace_time.csv, communication*.json ...). Then
trace_view.json and kernel_details.csv are grown to the requested size by repeating their real
events and rows, one repetition per training step: timestamps shifted past the previous copy,
flow ids and ``ProfilerStep#N`` / ``Step Id`` renumbered, so every file stays valid and
self-consistent, and step_trace_time.csv gets one row per step. Rows the sample has ragged are
left out of the repetitions.
"""

import csv
import io
import json
import math
import os
import re
import shutil
import sys

from .common import REPO

OUTPUT = "ASCEND_PROFILER_OUTPUT"
TRACE_SHARE = 0.75  # of each rank's bytes; the rest is kernel_details.csv
SCALED = ("trace_view.json", "kernel_details.csv", "op_statistic.csv", "step_trace_time.csv")
_TOKEN = re.compile(r'"@@(TS|ID|STEP)(\d+)@@"')


def _samples():
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from output_fixtures import samples

    return samples


def _replace(path, text_chunks):
    """Write ``path`` anew from an iterable of strings (the samples are copied read-only)."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as handle:
        for chunk in text_chunks:
            handle.write(chunk)
    os.replace(tmp, path)


def _trace_template(events):
    """The non-metadata events as one JSON text with tokens where each copy differs."""
    body, first_ts, last_ts, steps = [], math.inf, -math.inf, []
    ids = []
    for index, event in enumerate(e for e in events if e.get("ph") != "M"):
        event = dict(event)
        if "ts" in event:
            ts = float(event["ts"])
            first_ts = min(first_ts, ts)
            last_ts = max(last_ts, ts + float(event.get("dur", 0) or 0))
            event["ts"] = f"@@TS{index}@@"
        if isinstance(event.get("id"), int):
            ids.append(event["id"])
            event["id"] = f"@@ID{index}@@"
        match = re.fullmatch(r"ProfilerStep#(\d+)", event.get("name", ""))
        if match:
            steps.append(int(match.group(1)))
            event["name"] = f"@@STEP{index}@@"
        body.append((index, event))
    originals = {i: e for i, e in enumerate(e for e in events if e.get("ph") != "M")}
    text = ",".join(json.dumps(e, separators=(",", ":")) for _, e in body)
    parts = _TOKEN.split(text)  # literal, kind, index, literal, kind, index, ...
    period = int(math.ceil(last_ts - first_ts)) + 1000
    # Flow ids come in two families in the sample (17.. and ~1.7e18, nanosecond-like); each
    # copy moves them on by the large family's span, which keeps them unique and within int64
    # as real traces are (shifting by the largest id passed 2**64 after ten copies).
    max_id = max(ids, default=0)
    large = [i for i in ids if i > max_id // 2]
    id_span = max(large) - min(large) + 1 if large else 0
    return parts, originals, period, id_span, min(steps, default=1)


def _trace_copy(parts, originals, copy, period, id_span):
    out = [parts[0]]
    shift = copy * period
    for i in range(1, len(parts), 3):
        kind, index = parts[i], int(parts[i + 1])
        original = originals[index]
        if kind == "TS":
            ts = str(original["ts"])
            whole, dot, frac = ts.partition(".")
            out.append(f'"{int(whole) + shift}{dot}{frac}"' if isinstance(original["ts"], str)
                       else json.dumps(original["ts"] + shift))
        elif kind == "ID":
            out.append(str(original["id"] + copy * id_span))
        else:
            step = int(original["name"].split("#")[1])
            out.append(f'"ProfilerStep#{step + copy}"')
        out.append(parts[i + 2])
    return "".join(out)


def scale_trace(path, target_bytes):
    """Grow trace_view.json to about ``target_bytes``; returns the number of steps (copies)."""
    with open(path) as handle:
        events = json.load(handle)
    meta = [e for e in events if e.get("ph") == "M"]
    parts, originals, period, id_span, _ = _trace_template(events)
    block = len(_trace_copy(parts, originals, 0, period, id_span))
    copies = max(1, math.ceil(target_bytes / (block + 1)))

    def chunks():
        yield "[" + ",".join(json.dumps(e, separators=(",", ":")) for e in meta)
        for copy in range(copies):
            yield "," + _trace_copy(parts, originals, copy, period, id_span)
        yield "]\n"

    _replace(path, chunks())
    return copies


def scale_kernels(path, target_bytes, steps):
    """Grow kernel_details.csv to about ``target_bytes`` spread over ``steps`` steps."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    start_col = header.index("Start Time(us)")
    step_col = header.index("Step Id") if "Step Id" in header else None
    starts = [float(r[start_col]) for r in body]
    ends = [float(r[start_col]) + float(r[header.index("Duration(us)")]) for r in body]
    period = int(math.ceil(max(ends) - min(starts))) + 1000
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(body)
    block = len(buffer.getvalue())
    copies = max(steps, math.ceil(target_bytes / block))
    per_step = max(1, copies // steps)

    def chunks():
        out = io.StringIO()
        out_writer = csv.writer(out, lineterminator="\n")
        out_writer.writerow(header)
        yield out.getvalue()
        for copy in range(copies):
            out.seek(0)
            out.truncate()
            for row in body:
                row = list(row)
                whole, dot, frac = row[start_col].partition(".")
                row[start_col] = f"{int(whole) + copy * period}{dot}{frac}"
                if step_col is not None:
                    row[step_col] = str(int(row[step_col]) + min(copy // per_step, steps - 1))
                out_writer.writerow(row)
            yield out.getvalue()

    _replace(path, chunks())
    return copies


def scale_step_trace(path, steps):
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, first = rows[0], rows[1]
    step_col = header.index("Step")

    def chunks():
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        for step in range(steps):
            row = list(first)
            row[step_col] = str(int(first[step_col]) + step)
            writer.writerow(row)
        yield out.getvalue()

    _replace(path, chunks())


def scale_op_statistic(path, copies):
    """op_statistic.csv aggregates kernel_details.csv: counts and totals grow with the copies."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    scaled = [header]
    for row in rows[1:]:
        row = list(row)
        for name in ("Count", "Total Time(us)"):
            column = header.index(name)
            value = float(row[column]) * copies
            row[column] = str(int(value)) if name == "Count" else f"{value:.3f}"
        scaled.append(row)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(scaled)
    _replace(path, [out.getvalue()])


def generate(root, total_bytes, ranks=4):
    """Write ``ranks`` captures totalling about ``total_bytes`` under ``root``; return the
    bytes written and the bytes of the files ``summary`` reads (kernel/step/op tables)."""
    samples = _samples()
    for rank in range(ranks):
        grow(os.path.join(samples.npu_capture(root, rank), OUTPUT), total_bytes / ranks)
    return folder_bytes(root), folder_bytes(root, SCALED[1:])


def grow(out, nbytes):
    """Grow one capture's ASCEND_PROFILER_OUTPUT ``out`` to about ``nbytes``."""
    steps = scale_trace(os.path.join(out, "trace_view.json"), nbytes * TRACE_SHARE)
    copies = scale_kernels(os.path.join(out, "kernel_details.csv"), nbytes * (1 - TRACE_SHARE),
                           steps)
    scale_op_statistic(os.path.join(out, "op_statistic.csv"), copies)
    scale_step_trace(os.path.join(out, "step_trace_time.csv"), steps)


def folder_bytes(root, names=None):
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            if names is None or name in names:
                total += os.path.getsize(os.path.join(folder, name))
    return total


def generate_many(root, total_bytes, ranks, templates=2):
    """Like ``generate`` for many ranks, fast: ``templates`` ranks are grown as ``generate``
    grows them, and every other rank is a fresh capture whose grown tables are hard links to
    those of template ``rank % templates`` (same bytes on disk, read as separate files).
    Returns what ``generate`` returns."""
    samples = _samples()
    per_rank = total_bytes / ranks
    shape = os.path.join(root, ".templates")
    os.makedirs(shape)
    sources = []
    for template in range(min(templates, ranks)):
        folder = os.path.join(shape, str(template))
        os.makedirs(folder)
        sources.append(os.path.join(samples.npu_capture(folder, template), OUTPUT))
        grow(sources[-1], per_rank)
    for rank in range(ranks):
        out = os.path.join(samples.npu_capture(root, rank), OUTPUT)
        for name in SCALED:
            os.remove(os.path.join(out, name))
            os.link(os.path.join(sources[rank % len(sources)], name), os.path.join(out, name))
    shutil.rmtree(shape)
    return folder_bytes(root), folder_bytes(root, SCALED[1:])
