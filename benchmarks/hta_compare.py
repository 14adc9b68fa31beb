"""HTA 0.5.0's ``TraceDiff.compare_traces`` against ``mindspeed-prof diff`` on two save paths of
torch traces (issue 30 §4; figure 10 with ``--hta``).

The traces are real torch.profiler CPU traces of a small model (``tests/output_fixtures``),
grown to the size asked by repeating their steps (timestamps shifted past the previous copy,
``ProfilerStep#N`` renumbered, flow ids moved on), one file per rank with its
``distributedInfo``; B is A with every ``aten::mm`` 1.5x longer. Both tools compare every
rank and every step: HTA is asked for all of them (its default is the first rank's first
iteration). HTA runs in its own interpreter, ``$HTA_PYTHON`` (default /tmp/hta-venv/bin/python,
``pip install HolisticTraceAnalysis==0.5.0`` there; never this project's dependency). Each side
with its wall time, CPU and peak memory (sampled PSS of its process tree), in interleaved
rounds; the rows are ratios ours / HTA's.
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from .common import REPO, Row, interleave_all
from .output_run import MIB, must_pass, timed, tool, with_cache

FIGURE = "10 timeline+diff"
HTA_PYTHON = os.environ.get("HTA_PYTHON", "/tmp/hta-venv/bin/python")
SIZES = ((2, 50e6),)  # (ranks, bytes per rank)
QUICK_SIZES = ((2, 2e6),)
ROUNDS = 3
HTA_SCRIPT = r"""
import sys
from hta.trace_diff import TraceDiff
a, b, ranks, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")]
frame = TraceDiff.compare_traces(a, b, control_rank=list(range(ranks)), test_rank=list(range(ranks)),
                                 control_iteration=steps, test_iteration=steps)
top = frame.sort_values("diff_duration", ascending=False).head(1)
print("TOP", top.index[0] if "name" not in top.columns else top["name"].iloc[0],
      float(top["diff_duration"].iloc[0]))
"""


def _template(tmp):
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from output_fixtures.torch_traces import torch_trace

    path = torch_trace(os.path.join(tmp, "template"), rank=0, start=1, end=11)
    with open(path) as handle:
        return json.load(handle)


def grow(template, rank, world, nbytes, slower=1.0):
    """A trace of about ``nbytes``: the template's steps repeated; ``slower`` stretches
    aten::mm. Returns (the trace as a dict, its step numbers)."""
    events = template["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    timed_events = [e for e in events if e.get("ph") != "M" and "ts" in e]
    first = min(e["ts"] for e in timed_events)
    last = max(e["ts"] + e.get("dur", 0) for e in timed_events)
    period = last - first + 1000.0
    block = len(json.dumps(timed_events))
    copies = max(1, int(nbytes // block))
    steps = sorted({int(e["name"].split("#")[1]) for e in timed_events
                    if str(e.get("name", "")).startswith("ProfilerStep#")})
    span = steps[-1] - steps[0] + 1
    out = list(meta)
    for copy in range(copies):
        for event in timed_events:
            event = dict(event, ts=event["ts"] + copy * period)
            name = str(event.get("name", ""))
            if name.startswith("ProfilerStep#"):
                event["name"] = f"ProfilerStep#{int(name.split('#')[1]) + copy * span}"
            elif name == "aten::mm" and "dur" in event:
                event["dur"] = event["dur"] * slower
            if isinstance(event.get("id"), int):
                event["id"] = event["id"] + copy * 1_000_000
            out.append(event)
    trace = {k: v for k, v in template.items() if k != "traceEvents"}
    trace["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": world}
    trace["traceEvents"] = out
    numbers = [n + copy * span for copy in range(copies) for n in steps]
    return trace, numbers


def write_pair(tmp, ranks, per_rank):
    template = _template(tmp)
    folders = []
    for label, slower in (("a", 1.0), ("b", 1.5)):
        folder = os.path.join(tmp, f"hta_{label}")
        os.makedirs(folder)
        for rank in range(ranks):
            trace, steps = grow(template, rank, ranks, per_rank, slower)
            name = f"rank{rank}.{1_000_000 + rank}.pt.trace.json"
            with open(os.path.join(folder, name), "w") as handle:
                json.dump(trace, handle)
        folders.append(folder)
    return folders, steps


def hta_rows(tmp, env, quick):
    if not os.path.exists(HTA_PYTHON):
        return [Row(figure=FIGURE, compared="HTA trace_diff vs diff", value=float("nan"),
                    unit="", spread="", target="", note=f"not run: no {HTA_PYTHON} (set "
                    f"$HTA_PYTHON to a venv with HolisticTraceAnalysis==0.5.0)")]
    rows = []
    for ranks, per_rank in (QUICK_SIZES if quick else SIZES):
        (a, b), steps = write_pair(tmp, ranks, per_rank)
        nbytes = sum(os.path.getsize(os.path.join(d, f)) for d in (a, b) for f in os.listdir(d))
        script = os.path.join(tmp, "hta_diff.py")
        with open(script, "w") as handle:
            handle.write(HTA_SCRIPT)
        hta = [HTA_PYTHON, script, a, b, str(ranks), ",".join(map(str, steps))]
        ours = [tool("mindspeed-prof"), "diff", a, b, "--json"]

        def run_hta(i):
            return must_pass(timed(hta, env), hta)

        def run_ours(i):
            folder = tempfile.mkdtemp(dir=tmp)
            got = must_pass(timed(ours, with_cache(env, folder)), ours)
            shutil.rmtree(folder)
            return got

        got_hta, got_ours = interleave_all([run_hta, run_ours], 1 if quick else ROUNDS,
                                           warmup=0)
        folder = tempfile.mkdtemp(dir=tmp)
        peak_ours = timed(ours, with_cache(env, folder), sample=True).peak
        peak_hta = timed(hta, env, sample=True).peak
        ratios = [o.wall / h.wall for o, h in zip(got_ours, got_hta)]
        top_ours = json.loads(got_ours[0].out)["grew"][0]
        top_hta = [ln for ln in got_hta[0].out.splitlines() if ln.startswith("TOP")]
        size = f"{nbytes / 1e6:.0f} MB of torch traces ({ranks} ranks x 2 runs, " \
               f"{len(steps)} steps)"
        rows.append(Row(
            figure=FIGURE, compared=f"diff / HTA 0.5.0 TraceDiff.compare_traces, time, {size}",
            value=statistics.median(ratios), unit="x",
            spread=f"min-max {min(ratios):.2f}-{max(ratios):.2f}", target="< 1x",
            ok=statistics.median(ratios) < 1,
            note=(f"{len(ratios)} rounds, medians: diff "
                  f"{statistics.median(g.wall for g in got_ours):.2f} s "
                  f"({statistics.median(g.cpu for g in got_ours):.1f} s CPU), HTA "
                  f"{statistics.median(g.wall for g in got_hta):.2f} s "
                  f"({statistics.median(g.cpu for g in got_hta):.1f} s CPU); both name "
                  f"{top_ours['name']} first (ours +{top_ours['change_us']:.0f} µs per step of "
                  f"one rank; HTA: {top_hta[0][4:] if top_hta else '?'} µs in total)")))
        rows.append(Row(
            figure=FIGURE, compared=f"diff / HTA trace_diff, peak memory, {size}",
            value=peak_ours / peak_hta if peak_hta else float("nan"), unit="x", spread="",
            target="< 1x", ok=bool(peak_hta) and peak_ours < peak_hta,
            note=f"peak PSS of the process tree: diff {peak_ours / MIB:.0f} MiB, HTA "
                 f"{peak_hta / MIB:.0f} MiB"))
        shutil.rmtree(folder)
        for d in (a, b):
            shutil.rmtree(d)
    return rows


if __name__ == "__main__":
    from .common import clean_env, emit_rows

    work = tempfile.mkdtemp(prefix="mindspeed_prof_bench_hta_")
    try:
        quick = "--quick" in sys.argv
        started = time.monotonic()
        emit_rows(hta_rows(work, clean_env(), quick))
    finally:
        shutil.rmtree(work, ignore_errors=True)
