"""Figure 10: ``timeline`` and ``diff`` next to ``check`` on the same files (issue 30 §4).

The data is figure 5's series (``output_series``): the real Ascend samples grown to the size
asked, 8 ranks per GB, their tables hard-linked between ranks. At each size, ROUNDS
interleaved rounds (the first side rotating) of, each with the cache it is meant to see:
``check --json`` with an empty cache; ``timeline DIR -o merged.json.gz`` with an empty cache;
``timeline`` after that check (its steps' scans from the cache: the user's order); where the C
rewrite is built, the same ``timeline`` on its Python path (``MINDSPEED_PROF_PURE=1``, an empty
cache), so that both columns come from the same rounds; ``diff DIR
DIR --json`` with an empty cache (both sides the same files: the second from the cache the
first filled, so it costs what one summary costs). Then one sampled run of each for peak
memory (the largest PSS sum of the process tree). ``READERS_BASELINE=<checkout>`` adds that
checkout's ``timeline`` (cache off) to every round, for before/after ratios in one run. Rows: each command's time over check's in
the same round (median, min-max), CPU per GB from the smallest to the largest size, peak
memory against 256 MiB, and the merged file's size.

    python -m benchmarks.output_analysis                 # 0.25 and 0.5 GB (2 and 4 ranks)
    python -m benchmarks.output_analysis --gb 0.25,0.5,1,2,4,8   # figure 5's full series
    python -m benchmarks.output_analysis --quick         # smoke: 4 and 8 MB

With ``--hta``, also HTA 0.5.0's ``TraceDiff.compare_traces`` against ``diff`` on two save
paths of torch traces (``hta_compare``), HTA run from ``$HTA_PYTHON`` (default
/tmp/hta-venv/bin/python: never a dependency of this project).
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

from mindspeed_prof.output.cache import RACY_SECONDS
from mindspeed_prof.output.timeline import write
from mindspeed_prof.output.timeline.write import PURE_ENV

from .common import Row, clean_env, emit_rows, interleave_all
from .output_data import folder_bytes, generate_many
from .output_run import (MIB, baseline_env, load, must_pass, timed, tool, warm_page_cache,
                         with_cache)

FIGURE = "10 timeline+diff"
DEFAULT_GB = (0.25, 0.5)
QUICK_GB = (0.004, 0.008)
RANKS_PER_GB = 8
ROUNDS = 3
TARGET_RSS_MIB = 256


def commands(data, out):
    exe = tool("mindspeed-prof")
    return {"check": [exe, "check", data, "--json"],
            "timeline": [exe, "timeline", data, "-o", out],
            "diff": [exe, "diff", data, data, "--json"]}


def measure_size(tmp, gb, env, rounds, quick):
    ranks = max(1, round(gb * RANKS_PER_GB))
    data = os.path.join(tmp, f"data_{gb}")
    os.makedirs(data)
    generate_many(data, gb * 1e9, ranks)
    warm_page_cache(data)
    if not quick:  # a hard link changes the file's ctime: the cache stores nothing so recent
        time.sleep(RACY_SECONDS + 0.5)
    out = os.path.join(tmp, "merged.json.gz")
    cmd = commands(data, out)
    base = baseline_env(env)  # $READERS_BASELINE's timeline (cache off), in the same rounds
    native = write.native()  # built: its Python path (MINDSPEED_PROF_PURE=1) in every round too
    loads = load()

    def ours(i):
        cold, warm = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
        got = {"check": must_pass(timed(cmd["check"], with_cache(env, warm)), cmd["check"],
                                  check_ok=True)}
        got["timeline_after_check"] = must_pass(timed(cmd["timeline"], with_cache(env, warm)),
                                                cmd["timeline"])
        got["timeline"] = must_pass(timed(cmd["timeline"], with_cache(env, cold)),
                                    cmd["timeline"])
        if native is not None:  # the same command on the Python path, its own empty cache
            pure_cache = tempfile.mkdtemp(dir=tmp)
            got["timeline_pure"] = must_pass(timed(cmd["timeline"], with_cache(
                {**env, PURE_ENV: "1"}, pure_cache)), cmd["timeline"])
            shutil.rmtree(pure_cache)
        if base is not None:
            got["timeline_baseline"] = must_pass(timed(cmd["timeline"], base), cmd["timeline"])
        shutil.rmtree(cold)
        cold = tempfile.mkdtemp(dir=tmp)
        got["diff"] = must_pass(timed(cmd["diff"], with_cache(env, cold)), cmd["diff"])
        for folder in (cold, warm):
            shutil.rmtree(folder)
        return got

    # the sides run in one function, so each round's ratios pair runs made one after another
    results = interleave_all([ours], rounds, warmup=0)[0]
    peaks = {}
    for name in ("check", "timeline", "diff"):
        folder = tempfile.mkdtemp(dir=tmp)
        peaks[name] = timed(cmd[name], with_cache(env, folder), sample=True).peak
        shutil.rmtree(folder)
    merged = os.path.getsize(out)
    nbytes = folder_bytes(data)
    shutil.rmtree(data)
    return {"gb": gb, "ranks": ranks, "bytes": nbytes, "runs": results, "peaks": peaks,
            "merged": merged, "load": f"{loads} -> {load()}"}


def _size(nbytes):
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.0f} MB"


def _ratio(runs, key, attr="wall"):
    values = [getattr(r[key], attr) / getattr(r["check"], attr) for r in runs]
    return statistics.median(values), min(values), max(values)


def _median(runs, key, attr="wall"):
    return statistics.median(getattr(r[key], attr) for r in runs)


def rows_for(sizes):
    rows = []
    for s in sizes:
        size = f"{_size(s['bytes'])} in {s['ranks']} ranks"
        keys = (("timeline", "timeline (empty cache)"),
                ("timeline_after_check", "timeline after check (steps from the cache)"),
                ("diff", "diff DIR DIR (empty cache)"))
        if "timeline_pure" in s["runs"][0]:
            keys += (("timeline_pure", "timeline, Python path (MINDSPEED_PROF_PURE=1, empty "
                                       "cache)"),)
        if "timeline_baseline" in s["runs"][0]:
            keys += (("timeline_baseline", "$READERS_BASELINE's timeline (no cache)"),)
        for key, what in keys:
            median, low, high = _ratio(s["runs"], key)
            cpu, _, _ = _ratio(s["runs"], key, "cpu")
            rows.append(Row(
                figure=FIGURE, compared=f"{what} / check (empty cache), {size}",
                value=median, unit="x", spread=f"min-max {low:.2f}-{high:.2f}",
                target="<= 1x", ok=median <= 1,
                note=(f"{len(s['runs'])} rounds, medians: {key} {_median(s['runs'], key):.2f} s "
                      f"({_median(s['runs'], key, 'cpu'):.1f} s CPU, {cpu:.2f}x check's CPU), "
                      f"check {_median(s['runs'], 'check'):.2f} s "
                      f"({_median(s['runs'], 'check', 'cpu'):.1f} s CPU); merged file "
                      f"{s['merged'] / 1e6:.1f} MB; load {s['load']}")))
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        for key in ("timeline", "diff"):
            per_gb = [_median(s["runs"], key, "cpu") / (s["bytes"] / 1e9) for s in (first, last)]
            rows.append(Row(
                figure=FIGURE,
                compared=f"CPU per GB of {key}, {_size(last['bytes'])} vs "
                         f"{_size(first['bytes'])} (time linear in bytes)",
                value=per_gb[1] / per_gb[0], unit="x", spread="medians", target="<= 1.2x",
                ok=per_gb[1] / per_gb[0] <= 1.2,
                note=f"s of CPU per GB: {per_gb[0]:.2f} -> {per_gb[1]:.2f}"))
    peaks = {k: max(s["peaks"][k] for s in sizes) / MIB for k in ("check", "timeline", "diff")}
    rows.append(Row(
        figure=FIGURE, compared="peak memory of timeline / diff (empty cache), every size",
        value=max(peaks["timeline"], peaks["diff"]), unit="MiB", spread="",
        target=f"<= {TARGET_RSS_MIB} MiB",
        ok=max(peaks["timeline"], peaks["diff"]) <= TARGET_RSS_MIB,
        note="largest PSS sum of the process tree per size: " + "; ".join(
            f"{_size(s['bytes'])}: timeline {s['peaks']['timeline'] / MIB:.0f}, diff "
            f"{s['peaks']['diff'] / MIB:.0f}, check {s['peaks']['check'] / MIB:.0f} MiB"
            for s in sizes)))
    return rows


def measure(quick=False, gbs=None, hta=False):
    env = clean_env()
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_analysis_")
    try:
        sizes = [measure_size(tmp, gb, env, 1 if quick else ROUNDS, quick)
                 for gb in (gbs or (QUICK_GB if quick else DEFAULT_GB))]
        rows = rows_for(sizes)
        if hta:
            from .hta_compare import hta_rows
            rows += hta_rows(tmp, env, quick)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gb", default=None, help="sizes in GB, comma-separated "
                                                   "(default 0.25,0.5; figure 5: 0.25,...,8)")
    parser.add_argument("--hta", action="store_true",
                        help="also HTA's trace_diff against diff (needs $HTA_PYTHON)")
    args = parser.parse_args()
    gbs = [float(x) for x in args.gb.split(",")] if args.gb else None
    emit_rows(measure(args.quick, gbs, args.hta))


if __name__ == "__main__":
    main()
