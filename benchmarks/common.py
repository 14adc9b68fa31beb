"""What every figure shares: side-by-side timing, robust summaries, one result row.

Every figure is a ratio (or a difference) of two things measured in the same run, A and B
interleaved (ABAB...) after a warm-up, summarised by medians with a spread. Absolute times on a
shared 2-core VM mean little; what ran next to each other is what is compared.
"""

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS_DIR = os.path.join(REPO, "tests", "harness")
STANDIN_DIR = os.path.join(HARNESS_DIR, "megatron_standin")
# A worker prints its rows on one line starting with this, after whatever the model printed.
ROWS_PREFIX = "BENCHMARK_ROWS "


@dataclasses.dataclass
class Row:
    """One line of the results table."""

    figure: str      # "1 off", "2 armed", ...
    compared: str    # what was measured against what
    value: float
    unit: str        # "x" for ratios, else the unit of value
    spread: str      # e.g. "IQR 0.99-1.01" or "min-max 0.98-1.02"
    target: str      # e.g. "<= 1.03", "" for information only
    ok: object = None  # True / False against the target, None for information only
    note: str = ""
    failed: bool = False  # the figure did not run; note says why

    @property
    def verdict(self):
        if self.failed:
            return "ERROR"
        return {True: "pass", False: "MISS", None: "info"}[self.ok]

    def measured(self):
        if self.failed:
            return "-"
        if self.unit == "x":
            return f"{self.value:.3f}x"
        if self.unit in ("count",):
            return f"{self.value:.0f}"
        if abs(self.value) >= 100:
            return f"{self.value:.0f} {self.unit}"
        return f"{self.value:.3g} {self.unit}"


def median(values):
    return statistics.median(values)


def quantile(values, q):
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def spread_text(values, fmt="{:.3f}"):
    """Inter-quartile range for 8+ samples, else the full range; says which."""
    if len(values) >= 8:
        return f"IQR {fmt.format(quantile(values, 0.25))}-{fmt.format(quantile(values, 0.75))}"
    return f"min-max {fmt.format(min(values))}-{fmt.format(max(values))}"


def interleave(run_a, run_b, repetitions, warmup=1):
    """Call ``run_a(i)`` and ``run_b(i)`` alternately (AB, then BA, so neither always goes
    first); return their results as two lists, warm-up rounds dropped."""
    return interleave_all([run_a, run_b], repetitions, warmup)


def interleave_all(runners, repetitions, warmup=1):
    """Round-robin over ``runners`` (``fn(i) -> result``), the starting runner rotating each
    round; one list of results per runner, warm-up rounds dropped."""
    results = [[] for _ in runners]
    for i in range(warmup + repetitions):
        shift = i % len(runners)
        for k in range(len(runners)):
            index = (k + shift) % len(runners)
            value = runners[index](i)
            if i >= warmup:
                results[index].append(value)
    return results


def now_ns():
    return time.perf_counter_ns()


def clocks_ns():
    """(wall, process CPU) now. CPU time is the estimator for work that may be preempted: on a
    shared machine other jobs stretch wall time at random, not the CPU time a step needs."""
    return time.perf_counter_ns(), time.process_time_ns()


def since_ns(start):
    wall, cpu = clocks_ns()
    return wall - start[0], cpu - start[1]


def clean_env(**overrides):
    """This interpreter's environment without profiling switches, one intra-op thread (the
    harness's setting: stable timings on 2 cores, and a core left for background export)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MINDSPEED_PROF_", "HARNESS_", "FAKE_TORCH_NPU"))}
    # PYTHONFAULTHANDLER: a reader that crashes (SIGSEGV, SIGABRT) prints every thread's
    # Python stack, so a figure that did not run says where (CI, stop 40: a silent SIGABRT)
    env.update(OMP_NUM_THREADS="1", TORCHDYNAMO_DISABLE="1", CUDA_DEVICE_MAX_CONNECTIONS="1",
               PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", PYTHONFAULTHANDLER="1")
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def run_worker(module, args=(), timeout=2400, env=None):
    """Run ``python -m benchmarks.<module> ARGS`` (one model per process) and return its rows.

    ``timeout``: figure 5's full run (1 GB, then 0.25 -> 8 GB next to msprof-analyze) takes
    10-20 min on 2 shared cores; the limit only stops a hung figure."""
    command = [sys.executable, "-m", f"benchmarks.{module}", *map(str, args)]
    done = subprocess.run(command, cwd=REPO, env=env or clean_env(), capture_output=True,
                          text=True, timeout=timeout)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(ROWS_PREFIX)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode})\n"
                           f"--- stdout ---\n{done.stdout[-3000:]}\n"
                           f"--- stderr ---\n{done.stderr[-3000:]}")
    return [Row(**row) for row in json.loads(lines[-1][len(ROWS_PREFIX):])]


def emit_rows(rows):
    """A worker's last word: its rows as one JSON line for :func:`run_worker`."""
    sys.stdout.flush()
    print(ROWS_PREFIX + json.dumps([dataclasses.asdict(r) for r in rows]), flush=True)


def figure_main(measure, doc):
    """``python -m benchmarks.<figure> [--quick]``: measure one figure and emit its rows."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    emit_rows(measure(parser.parse_args().quick))
