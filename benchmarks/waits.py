"""Figure 12: what the wait analysis (``output/waits``) adds to ``summary``, side by side.

On figure 5's 64-rank data (the real Ascend samples grown, hard-linked between ranks: each
rank's communication.json is the collectives the analysis matches) and on a simulated 64-rank
synchronous torch job (``tests/output_fixtures/simulated_job``, TP=8 x DP=8, one slow rank),
ROUNDS interleaved rounds (the first side rotating) of ``summary DIR --json`` after ``check``
(its cache: the user's order) with the wait analysis and without it (the same command with
``output/waits`` switched off in the process: no communication.json read, no matching). The
added CPU time over summary's own is the result (wall time beside it: on a shared machine it
is stretched at random); then one sampled run of each for peak memory (the largest PSS sum of
the process tree).

    python -m benchmarks.waits              # figure 5's 64 ranks at 1 GB, and the torch job
    python -m benchmarks.waits --gb 8       # the series' 8 GB point
    python -m benchmarks.waits --quick      # smoke: 4 ranks, a few MB
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from mindspeed_prof.output.cache import RACY_SECONDS

from .common import Row, clean_env, emit_rows, interleave_all
from .output_data import folder_bytes, generate_many
from .output_run import MIB, load, must_pass, timed, tool, warm_page_cache, with_cache

FIGURE = "12 waits"
RANKS, QUICK_RANKS = 64, 4
DEFAULT_GB, QUICK_GB = 1.0, 0.004
ROUNDS = 5
TARGET_ADDED = 0.5  # at most half of summary's own time
# summary with the wait analysis switched off in its process (the baseline side)
WITHOUT = ("from mindspeed_prof.output.summary import directory, npu_collectives;"
           "directory.waits_of = lambda summary: None;"
           "npu_collectives.read = lambda path: [];"
           "from mindspeed_prof import cli; import sys;"
           "sys.exit(cli.main(['summary', sys.argv[1], '--json']))")


def _torch_job(tmp, ranks):
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from output_fixtures.simulated_job import simulated_job

    return simulated_job(os.path.join(tmp, "torch"), ranks=ranks, slow={ranks // 2: "compute"},
                         tp=8 if ranks >= 8 else 1, hosts=8, steps=tuple(range(5, 25)))


def measure_one(tmp, name, data, env, rounds, quick):
    warm_page_cache(data)
    if not quick:  # a new file's ctime is too recent for the cache to store it
        time.sleep(RACY_SECONDS + 0.5)
    cache = tempfile.mkdtemp(dir=tmp)
    cached = with_cache(env, cache)
    check = [tool("mindspeed-prof"), "check", data, "--json"]
    must_pass(timed(check, cached), check)  # fills the cache: summary after check
    with_waits = [tool("mindspeed-prof"), "summary", data, "--json"]
    without = [sys.executable, "-c", WITHOUT, data]

    def ours(i):
        return {"with": must_pass(timed(with_waits, cached), with_waits),
                "without": must_pass(timed(without, cached), without)}

    runs = interleave_all([ours], rounds, warmup=1)[0]
    peaks = {"with": timed(with_waits, cached, sample=True).peak,
             "without": timed(without, cached, sample=True).peak}
    shutil.rmtree(cache)
    return {"name": name, "bytes": folder_bytes(data), "runs": runs, "peaks": peaks,
            "load": load()}


def rows_for(results, ranks):
    rows = []
    for r in results:
        # CPU time: on a shared machine wall time is stretched at random (the rows' note
        # gives the wall medians too)
        added = [(x["with"].cpu - x["without"].cpu) / x["without"].cpu for x in r["runs"]]
        wall = [(x["with"].wall - x["without"].wall) / x["without"].wall for x in r["runs"]]
        median = statistics.median(added)
        plain = statistics.median(x["without"].wall for x in r["runs"])
        full = statistics.median(x["with"].wall for x in r["runs"])
        rows.append(Row(
            figure=FIGURE, compared=f"CPU time the wait analysis adds to summary (after check), "
                                    f"{r['name']}, {ranks} ranks, {r['bytes'] / 1e9:.2f} GB",
            value=median, unit="x", spread=f"min-max {min(added):.3f}-{max(added):.3f}",
            target=f"<= {TARGET_ADDED}x", ok=median <= TARGET_ADDED,
            note=(f"{len(r['runs'])} rounds, wall medians: summary {full:.2f} s with the "
                  f"waits, {plain:.2f} s without (wall added {statistics.median(wall):+.3f}x); "
                  f"load {r['load']}")))
        grew = (r["peaks"]["with"] - r["peaks"]["without"]) / MIB
        rows.append(Row(
            figure=FIGURE, compared=f"peak memory added by the wait analysis, {r['name']}",
            value=grew, unit="MiB", spread="", target="flat (<= 16 MiB)", ok=grew <= 16,
            note=f"largest PSS sum of the process tree: {r['peaks']['with'] / MIB:.0f} MiB "
                 f"with, {r['peaks']['without'] / MIB:.0f} MiB without"))
    return rows


def measure(quick=False, gb=None):
    env = clean_env()
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_waits_")
    ranks = QUICK_RANKS if quick else RANKS
    rounds = 1 if quick else ROUNDS
    try:
        npu = os.path.join(tmp, "npu")
        os.makedirs(npu)
        generate_many(npu, (gb or (QUICK_GB if quick else DEFAULT_GB)) * 1e9, ranks)
        results = [measure_one(tmp, "NPU (figure 5's data)", npu, env, rounds, quick),
                   measure_one(tmp, "torch (simulated synchronous job, 20 steps)",
                               _torch_job(tmp, ranks), env, rounds, quick)]
        return rows_for(results, ranks)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gb", type=float, default=None, help="size of the NPU data in GB")
    args = parser.parse_args()
    emit_rows(measure(args.quick, args.gb))


if __name__ == "__main__":
    main()
