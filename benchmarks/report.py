"""The report's cost beside check's: ``mindspeed-prof report`` and ``check --json`` on the same
files, side by side in one run (ABAB..., 3 rounds after a warm-up), each as its own process tree
with an empty cache; then report after check (check's cache, as a user runs them); and the
size of a simulated 1,024-rank job's report against its printed bound.

    python -m benchmarks.report [--quick] [--mb 64,256]

Data: the real Ascend samples grown to the given size (4 ranks, ``output_data.generate``, as
figure 5), and a simulated 1,024-rank torch job (``tests/output_fixtures/simulated_job``: one
small trace per rank). Time: wall seconds; memory: the peak PSS of the process tree, sampled
in separate runs (sampling costs CPU on 2 cores). The report reads what check reads, then
summary's numbers from check's cache, then communication.json / the traces' collectives, so
from an empty cache it costs check's time plus summary's plus the page; the row says how much.

The full series (64 ranks, 8 GB, as figure 5's) is ``python -m benchmarks.report --parts check
--mb 1024,8192 --ranks 64`` (ranks past 8 share their tables by hard links, as figure 5's
``generate_many``); HTA on bigger traces: ``--parts hta --hta PYTHON --hta-steps 100,400,1600``.
"""

import argparse
import itertools
import os
import re
import sys
import tempfile

from .common import REPO, Row, emit_rows, interleave_all, median, spread_text
from .output_data import generate, generate_many
from .output_run import MIB, must_pass, timed, tool, warm_page_cache, with_cache

ROUNDS = 3
fresh = itertools.count()  # cache folder names, one per timed run
FIGURE = "9 report"


def _commands(data, out):
    return {"check": [tool("mindspeed-prof"), "check", data, "--json"],
            "report": [tool("mindspeed-prof"), "report", data, "-o", out]}


def _pair(data, tmp, env, rounds, label):
    """Rows comparing report with check on ``data``."""
    out = os.path.join(tmp, "r.html")
    commands = _commands(data, out)

    def runner(name, sample=False):
        def run(_):
            cache = os.path.join(tmp, f"cache{next(fresh)}")
            os.makedirs(cache)
            got = timed(commands[name], with_cache(env, cache), sample=sample)
            return must_pass(got, commands[name], check_ok=None)
        return run

    check, report = interleave_all([runner("check"), runner("report")], rounds)
    ratio = [r.wall / c.wall for c, r in zip(check, report)]
    check_m, report_m = interleave_all([runner("check", True), runner("report", True)],
                                       max(1, rounds - 1), warmup=0)
    memory = [r.peak / c.peak for c, r in zip(check_m, report_m) if c.peak]
    # as a user runs them: check, then report with check's cache
    warm = []
    for _ in range(rounds):
        cache = os.path.join(tmp, f"cache{next(fresh)}")
        os.makedirs(cache)
        must_pass(timed(commands["check"], with_cache(env, cache)), commands["check"], None)
        warm.append(must_pass(timed(commands["report"], with_cache(env, cache)),
                              commands["report"], None).wall)
    check_s = median([c.wall for c in check])
    return [
        Row(FIGURE, f"report / check, empty cache, {label}", median(ratio), "x",
            spread_text(ratio), "", None,
            f"report {median([r.wall for r in report]):.2f} s, check {check_s:.2f} s"),
        Row(FIGURE, f"report after check (its cache) / check, {label}",
            median(warm) / check_s, "x", spread_text([w / check_s for w in warm]), "", None,
            f"report {median(warm):.2f} s from check's cache"),
        Row(FIGURE, f"report / check, peak PSS, {label}", median(memory) if memory else 0.0,
            "x", spread_text(memory) if memory else "-", "", None,
            f"report {max(r.peak for r in report_m) / MIB:.0f} MiB, check "
            f"{max(c.peak for c in check_m) / MIB:.0f} MiB"),
    ]


def _simulated(tmp, env, ranks):
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from output_fixtures.simulated_job import simulated_job

    data = simulated_job(os.path.join(tmp, f"sim{ranks}"), ranks=ranks, slow={7: "compute"})
    out = os.path.join(tmp, f"sim{ranks}.html")
    cache = os.path.join(tmp, "simcache")
    os.makedirs(cache)
    got = must_pass(timed(_commands(data, out)["report"], with_cache(env, cache)), ["report"])
    bound = float(re.search(r"bound ([\d.]+) MiB", got.out).group(1))
    size = os.path.getsize(out) / MIB
    return data, Row(FIGURE, f"report size, simulated {ranks}-rank torch job", size, "MiB", "-",
                     f"<= {bound:.1f} MiB (printed bound)", size <= bound,
                     f"written in {got.wall:.1f} s; plotly.js is 4.6 MiB of it")


HTA_SCRIPT = ("import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
              "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)\n")


def _hta(tmp, env, hta_python, steps, rounds):
    """HTA 0.5.0's temporal breakdown (trace load included) vs our report, on the same
    8 ranks of CUDA-shaped traces (simulated: kernels on a stream, an NCCL kernel per step)."""
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from output_fixtures.simulated_job import simulated_job

    data = simulated_job(os.path.join(tmp, f"cuda{steps}"), ranks=8, steps=range(steps),
                         slow={5: "compute"}, device=True, kernels=50)
    size = sum(os.path.getsize(os.path.join(data, n)) for n in os.listdir(data))
    warm_page_cache(data)
    hta = [hta_python, "-c", HTA_SCRIPT, data]
    ours = _commands(data, os.path.join(tmp, "cuda.html"))["report"]

    def runner(command, sample=False):
        def run(_):
            cache = os.path.join(tmp, f"cache{next(fresh)}")
            os.makedirs(cache)
            return must_pass(timed(command, with_cache(env, cache), sample=sample), command)
        return run

    theirs, mine = interleave_all([runner(hta), runner(ours)], rounds)
    theirs_m, mine_m = interleave_all([runner(hta, True), runner(ours, True)], 1, warmup=0)
    ratio = [m.wall / t.wall for t, m in zip(theirs, mine)]
    label = f"8 ranks x {steps} steps, {size / 1e6:.0f} MB of traces"
    return [
        Row(FIGURE, f"report / HTA temporal breakdown, time, {label}", median(ratio), "x",
            spread_text(ratio), "", None,
            f"report {median([m.wall for m in mine]):.2f} s, HTA "
            f"{median([t.wall for t in theirs]):.2f} s (load + breakdown)"),
        Row(FIGURE, f"report / HTA temporal breakdown, peak PSS, {label}",
            mine_m[0].peak / theirs_m[0].peak, "x", "-", "", None,
            f"report {mine_m[0].peak / MIB:.0f} MiB, HTA {theirs_m[0].peak / MIB:.0f} MiB"),
    ]


def measure(quick, sizes_mb=(64, 256), ranks=4, hta_python=None, hta_steps=(100, 800),
            parts=("size", "check", "hta")):
    env = dict(os.environ)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp:
        if hta_python and "hta" in parts:
            for steps in ((10,) if quick else hta_steps):
                rows += _hta(tmp, env, hta_python, steps, 1 if quick else ROUNDS)
        if "size" in parts or "check" in parts:
            data, row = _simulated(tmp, env, 64 if quick else 1024)
            rows.append(row)
        if "check" in parts:
            rows += _pair(data, tmp, env, 1 if quick else ROUNDS,
                          f"{'64' if quick else '1,024'} small torch traces")
        for mb in ((4,) if quick else sizes_mb) if "check" in parts else ():
            folder = os.path.join(tmp, f"npu{mb}")
            # many ranks: figure 5's way, tables hard-linked between ranks (fast to make)
            total, _ = (generate_many if ranks > 8 else generate)(folder, mb * 1e6, ranks=ranks)
            warm_page_cache(folder)
            rows += _pair(folder, tmp, env, 1 if quick else ROUNDS,
                          f"NPU {total / 1e6:.0f} MB, {ranks} ranks")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mb", default="64,256", help="NPU data sizes in MB (default 64,256)")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--hta", metavar="PYTHON", default=os.environ.get("HTA_PYTHON"),
                        help="A Python with HolisticTraceAnalysis==0.5.0 (never a dependency "
                             "of ours: e.g. /tmp/hta-venv/bin/python): adds HTA's temporal "
                             "breakdown beside the report")
    parser.add_argument("--hta-steps", default="100,800",
                        help="steps of the 8 CUDA-shaped traces (100: 13 MB in all)")
    parser.add_argument("--parts", default="size,check,hta",
                        help="which rows: size (1,024-rank report), check, hta")
    args = parser.parse_args()
    emit_rows(measure(args.quick, tuple(int(x) for x in args.mb.split(",")), args.ranks,
                      args.hta, tuple(int(x) for x in args.hta_steps.split(",")),
                      tuple(args.parts.split(","))))


if __name__ == "__main__":
    main()
