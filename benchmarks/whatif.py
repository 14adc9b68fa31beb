"""``mindspeed-prof whatif`` beside the paper's published analyzer
(ByteDance-Seed/StragglerAnalysis, ``analyzer/wia.py``) on its trace AR (117k ops), side by side
in one run (issue 38 §4).

Both run as their own process (bytecode cached, as installed), rounds interleaved (theirs,
ours, then ours first), on the same file: wall and CPU time of the whole process (interpreter
start, reading, analysis, output), and the analysis alone (theirs: its own ``e2e`` timer with
``--verbose``; ours: ``analyse()`` timed in this process); peak PSS of each in sampled runs.
Then the table grown to 10x (its steps repeated under new step numbers) for linearity (our
analysis CPU time at 10x / at 1x, target <= 13, linear being 10: CPU, as other jobs on a shared
machine stretch wall time at random) and memory (our peak at 10x / at 1x). Where to find the
artifact: STRAGGLER_ANALYSIS_PATH (a checkout) and STRAGGLER_ANALYSIS_PYTHON (a Python where its
analyzer runs: pandas<2.2, numpy<2, pyarrow<16). Without them (and in --quick), our side only,
on the simulated pipeline job of the tests, grown alike.
"""

import json
import os
import statistics
import sys
import tempfile
import time

from .common import REPO, Row, clean_env, figure_main, interleave_all
from .output_run import MIB, timed

FIGURE = "11 whatif"
CHECKOUT = os.environ.get("STRAGGLER_ANALYSIS_PATH", "")
THEIR_PYTHON = os.environ.get("STRAGGLER_ANALYSIS_PYTHON", "")
ROUNDS, QUICK_ROUNDS = 5, 1
GROW = 10


def _artifact():
    data = os.path.join(CHECKOUT, "data")
    ok = (CHECKOUT and os.path.isfile(os.path.join(data, "trace-AR.parquet"))
          and THEIR_PYTHON and os.path.exists(THEIR_PYTHON))
    return (os.path.join(data, "trace-AR.parquet"), os.path.join(data, "meta-AR.yaml")) \
        if ok else None


def _toy(tmp):
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from output_fixtures import whatif_job

    from mindspeed_prof.output.whatif.table import write_parquet

    path = os.path.join(tmp, "trace-toy.parquet")
    ops = whatif_job.play(pp=4, dp=4, microbatches=8, steps=range(20),
                            slow_worker=(1, 0, 1.8), jitter=0.05)
    write_parquet(whatif_job.as_table(ops), path)
    return path, None


def grown(path, tmp, times):
    """The table with its steps repeated ``times`` times under new step numbers."""
    import numpy as np

    from mindspeed_prof.output.whatif.table import OpTable, read_parquet, write_parquet

    table = read_parquet(path)
    span = int(table.step.max()) + 1
    parts = {name: [] for name in ("dp_rank", "stage", "rank", "step", "optype", "start_ts",
                                   "duration", "seq_id", "mc", "mb_id", "gmc")}
    for k in range(times):
        for name in parts:
            value = getattr(table, name)
            parts[name].append(value.astype(np.int64) + k * span if name == "step" else value)
    out = os.path.join(tmp, f"trace-x{times}.parquet")
    write_parquet(OpTable.from_columns({k: np.concatenate(v) for k, v in parts.items()},
                                       table.optypes), out)
    return out


def ours(path, meta):
    return [sys.executable, "-m", "mindspeed_prof.cli", "whatif", path, "--json",
            *(["--meta", meta] if meta else [])]


def theirs(path, meta, out):
    return [THEIR_PYTHON, "analyzer/wia.py", "--trace", path, "--metadata", meta,
            "--dump-dir", out, "--verbose"]


def _run(command, env, cwd=None, sample=False):
    here = os.getcwd()
    os.chdir(cwd or REPO)
    try:
        got = timed(command, env, sample=sample)
    finally:
        os.chdir(here)
    if got.code != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({got.code}): {got.err[-2000:]}")
    return got


def _their_e2e(text):
    for line in text.splitlines():
        if "Time of `e2e`" in line:
            return float(line.rsplit(":", 1)[1].split()[0])
    return float("nan")


def _our_analysis(path, meta, repeats):
    """Median (wall, CPU) seconds of ``analyse()`` on the table at ``path``."""
    from mindspeed_prof.output.whatif import analysis, source

    table, job, _ = source.load(path, meta)
    analysis.analyse(table, job, path)  # warm-up: imports, first allocations
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        analysis.analyse(table, job, path)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def measure(quick):
    rows = []
    rounds = QUICK_ROUNDS if quick else ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        found = None if quick else _artifact()
        path, meta = found if found else _toy(tmp)
        label = "AR (117k ops)" if found else "simulated 4x4 job"
        ours_env = clean_env(PYTHONPATH=REPO)
        their_env = clean_env(PYTHONPATH=f"{CHECKOUT}:{os.path.join(CHECKOUT, 'analyzer')}")
        for env in (ours_env, their_env):  # both as installed: compiled once, after warm-up
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        runners = [lambda i: _run(ours(path, meta), ours_env)]
        if found:
            runners.append(lambda i: _run(theirs(path, meta, os.path.join(tmp, f"r{i}")),
                                          their_env, cwd=CHECKOUT))
        results = interleave_all(runners, rounds)
        our_wall = statistics.median(r.wall for r in results[0])
        our_cpu = statistics.median(r.cpu for r in results[0])
        our_s = json.loads(results[0][-1].out)["slowdown"]
        our_analysis, our_analysis_cpu = _our_analysis(path, meta, rounds)
        our_peak = _run(ours(path, meta), ours_env, sample=True).peak
        if found:
            their_wall = statistics.median(r.wall for r in results[1])
            their_cpu = statistics.median(r.cpu for r in results[1])
            their_analysis = statistics.median(_their_e2e(r.err + r.out) for r in results[1])
            their_peak = _run(theirs(path, meta, os.path.join(tmp, "m")), their_env,
                              cwd=CHECKOUT, sample=True).peak
            with open(os.path.join(tmp, "r0", "AR.json")) as handle:
                their_s = json.load(handle)["blocking_slowdown"]
            spread = [t.wall / o.wall for t, o in zip(results[1], results[0])]
            rows += [
                Row(FIGURE, f"theirs / ours, process wall, {label}", their_wall / our_wall, "x",
                    f"min-max {min(spread):.2f}-{max(spread):.2f}", ">= 5",
                    their_wall / our_wall >= 5,
                    f"theirs {their_wall:.2f} s, ours {our_wall:.2f} s"),
                Row(FIGURE, f"theirs / ours, process CPU, {label}", their_cpu / our_cpu, "x", "-",
                    ">= 5", their_cpu / our_cpu >= 5,
                    f"theirs {their_cpu:.2f} s, ours {our_cpu:.2f} s"),
                Row(FIGURE, f"theirs / ours, analysis alone, {label}",
                    their_analysis / our_analysis, "x", "-", ">= 5",
                    their_analysis / our_analysis >= 5,
                    f"theirs' e2e timer {their_analysis:.3f} s, our analyse() "
                    f"{our_analysis:.3f} s"),
                Row(FIGURE, f"S ours / theirs, {label}", our_s / their_s, "x", "-",
                    "within 1 %", abs(our_s / their_s - 1) <= 0.01,
                    f"ours {our_s:.6f}, theirs {their_s:.6f}"),
                Row(FIGURE, f"peak PSS ours / theirs, {label}", our_peak / their_peak, "x", "-",
                    "", None, f"ours {our_peak / MIB:.0f} MiB, theirs {their_peak / MIB:.0f} MiB"),
            ]
        else:
            rows.append(Row(FIGURE, f"ours, process wall, {label}", our_wall, "s", "-", "",
                            None, "the artifact was not found (STRAGGLER_ANALYSIS_PATH/_PYTHON)"
                            if not quick else "quick: our side only"))
        big = grown(path, tmp, GROW)
        _, big_cpu = _our_analysis(big, meta, 3)
        big_run = _run(ours(big, meta), ours_env, sample=True)
        rows += [
            Row(FIGURE, f"ours at {GROW}x / at 1x, analysis CPU time, {label}",
                big_cpu / our_analysis_cpu, "x", "-", f"<= {GROW * 1.3:.0f} (linear: {GROW})",
                big_cpu / our_analysis_cpu <= GROW * 1.3,
                f"{our_analysis_cpu:.3f} s -> {big_cpu:.3f} s"),
            Row(FIGURE, f"ours at {GROW}x / at 1x, peak PSS, {label}",
                big_run.peak / our_peak if our_peak else 0.0, "x", "-", "<= 2",
                bool(our_peak) and big_run.peak / our_peak <= 2,
                f"{our_peak / MIB:.0f} MiB -> {big_run.peak / MIB:.0f} MiB; process wall "
                f"{big_run.wall:.2f} s"),
        ]
        if found:
            big_theirs = _run(theirs(big, meta, os.path.join(tmp, "big")), their_env,
                              cwd=CHECKOUT, sample=True)
            rows.append(Row(FIGURE, f"theirs / ours at {GROW}x, process wall, {label}",
                            big_theirs.wall / big_run.wall, "x", "-", "", None,
                            f"theirs {big_theirs.wall:.2f} s ({big_theirs.peak / MIB:.0f} MiB), "
                            f"ours {big_run.wall:.2f} s"))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
