"""Figure 5 (check + summary): throughput and peak memory on a large save path, and time next
to msprof-analyze.

A save path of >= 1 GB (4 ranks; trace_view.json and kernel_details.csv grown from the real
samples, see ``output_data``) is written under the temp folder. ``mindspeed-prof check DIR
--json``, ``mindspeed-prof summary DIR --json`` and ``msprof-analyze cluster -d DIR -m all``
then run in turn (after one untimed round that warms the page cache), each a separate process
tree, so all three read the same cached files. Per run: wall time, and peak memory as the
largest sum of PSS over the process tree sampled every 20 ms (``check``/``summary`` read large
files in forked worker processes: PSS counts the pages they share with the parent once, where
summing RSS would count them in every worker). MB/s is input bytes / time: all bytes for
``check`` (it reads every file), the tables ``summary`` reads (kernel_details, step_trace_time,
op_statistic) for ``summary``. msprof-analyze's text mode reads only step_trace_time.csv and the
communication files, so the time ratio flatters it.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

from .common import Row, clean_env, figure_main, interleave_all, median, spread_text
from .output_data import generate

WORKERS_ENV = "MINDSPEED_PROF_OUTPUT_WORKERS"  # mindspeed_prof.output.parallel's override
WIDE_POOL = 4
TARGET_MBPS = 200
TARGET_RSS_MIB = 256
MB = 1e6
MIB = 2**20


def _tool(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def timed(command, env):
    """Run ``command``. Returns wall seconds, CPU seconds (user + sys of the tree), peak memory
    of the tree (bytes: the largest sum of PSS over its processes), the largest single-process
    RSS (bytes), exit code, stdout and stderr."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        peak = 0
        root = psutil.Process(process.pid)
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            try:
                tree = [root] + root.children(recursive=True)
                peak = max(peak, sum(_pss(p) for p in tree))
            except psutil.Error:
                pass
            time.sleep(0.02)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        # wait4's usage covers the child and the workers it waited for; ru_maxrss is the
        # largest of those processes, in KiB
        cpu = usage.ru_utime + usage.ru_stime
        out.seek(0)
        err.seek(0)
        return Timed(wall, cpu, peak, usage.ru_maxrss * 1024, process.returncode, out.read(),
                     err.read())


@dataclasses.dataclass
class Timed:
    wall: float
    cpu: float
    peak: int
    max_rss: int
    code: int
    out: str
    err: str


def _pss(process):
    """Proportional set size: pages shared by forked workers are counted once in the sum
    (summing RSS would count the parent's pages again in every worker)."""
    try:
        return process.memory_full_info().pss
    except psutil.Error:
        return 0


def measure(quick=False):
    total, ranks, reps = (8 * MB, 2, 1) if quick else (1.05e9, 4, 5)
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_output_")
    data, msprof_out = os.path.join(tmp, "save_path"), os.path.join(tmp, "msprof")
    env = clean_env()
    try:
        os.makedirs(data)
        written, summary_bytes = generate(data, total, ranks)
        commands = {
            "check": [_tool("mindspeed-prof"), "check", data, "--json"],
            "summary": [_tool("mindspeed-prof"), "summary", data, "--json"],
            "msprof": [_tool("msprof-analyze"), "cluster", "-d", data, "-m", "all", "-o",
                       msprof_out],
        }

        def runner(name):
            def run(i):
                shutil.rmtree(msprof_out, ignore_errors=True)
                got = timed(commands[name], env)
                if name != "msprof" and got.code != 0:
                    raise RuntimeError(f"{' '.join(commands[name])} exited {got.code}\n"
                                       f"{got.out[-2000:]}\n{got.err[-2000:]}")
                if name == "msprof" and not os.path.isdir(msprof_out):
                    raise RuntimeError(f"msprof-analyze wrote nothing (exit {got.code})\n"
                                       f"{got.err[-2000:]}")
                if name == "check" and not json.loads(got.out).get("ok"):
                    raise RuntimeError(f"the generated data does not pass check:\n"
                                       f"{got.out[:3000]}")
                return got
            return run

        names = ("check", "summary", "msprof")
        results = dict(zip(names, interleave_all([runner(n) for n in names], reps,
                                                 warmup=0 if quick else 1)))
        # The reader pool is as wide as the cores (at most 4): on this 2-core machine it has 2
        # processes, on any training host 4. Memory per process does not depend on the cores.
        wide_env = dict(env, **{WORKERS_ENV: str(WIDE_POOL)})
        wide = {} if quick else {name: timed(commands[name], wide_env).peak / MIB
                                 for name in ("check", "summary")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def times(name):
        return [r.wall for r in results[name]]

    def cpu(name):
        return median([r.cpu for r in results[name]])

    def peaks(name):
        return [r.peak / MIB for r in results[name]]

    def max_rss(name):
        return median([r.max_rss / MIB for r in results[name]])

    rows = []
    size = f"{written / MB:.0f} MB in {ranks} ranks"
    for name, nbytes, reads in (("check", written, "every file"),
                                ("summary", summary_bytes, "its tables")):
        rates = [nbytes / MB / t for t in times(name)]
        rate = nbytes / MB / median(times(name))
        rows.append(Row(
            figure="5 check+summary", compared=f"`{name}` throughput ({reads}, {size})",
            value=rate, unit="MB/s", spread=spread_text(rates, "{:.0f}"),
            target=f">= {TARGET_MBPS} MB/s", ok=rate >= TARGET_MBPS,
            note=(f"{reps} runs; {nbytes / MB:.0f} MB in {median(times(name)):.2f} s wall, "
                  f"{cpu(name):.2f} s CPU over all its processes ({nbytes / MB / cpu(name):.0f} "
                  f"MB per CPU-second); start-up included")))
        peak = median(peaks(name))
        rows.append(Row(
            figure="5 check+summary", compared=f"`{name}` peak memory (PSS of its processes)",
            value=peak, unit="MiB", spread=spread_text(peaks(name), "{:.0f}"),
            target=f"<= {TARGET_RSS_MIB} MiB", ok=peak <= TARGET_RSS_MIB,
            note=(f"largest sum of PSS over the command's processes, sampled every 20 ms; "
                  f"largest single process RSS {max_rss(name):.0f} MiB")))
        if name in wide:
            rows.append(Row(
                figure="5 check+summary",
                compared=f"`{name}` peak memory with {WIDE_POOL} reader processes (>= 4 cores)",
                value=wide[name], unit="MiB", spread="1 run", target=f"<= {TARGET_RSS_MIB} MiB",
                ok=wide[name] <= TARGET_RSS_MIB,
                note=f"{WORKERS_ENV}={WIDE_POOL}, the pool width output/parallel.py picks for "
                     f"4+ cores"))
    ours = [c + s for c, s in zip(times("check"), times("summary"))]
    ratio = median(ours) / median(times("msprof"))
    rows.append(Row(
        figure="5 check+summary", compared="check + summary time vs msprof-analyze cluster -m all",
        value=ratio, unit="x", spread=spread_text([a / b for a, b in zip(ours, times("msprof"))]),
        target="", ok=None,
        note=(f"msprof-analyze {median(times('msprof')):.2f} s, peak memory "
              f"{median(peaks('msprof')):.0f} MiB (PSS); in text mode it reads only step_trace_time.csv "
              f"and communication*.json, not trace_view.json or kernel_details.csv")))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
