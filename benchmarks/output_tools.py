"""Figure 5 (check + summary): throughput and peak memory on a large save path, time next to
msprof-analyze at every size, and how time and memory grow with the size.

A save path of >= 1 GB (4 ranks; trace_view.json and kernel_details.csv grown from the real
samples, see ``output_data``) is written under the temp folder. ``mindspeed-prof check DIR
--json``, ``mindspeed-prof summary DIR --json`` and ``msprof-analyze cluster -d DIR -m all``
then run in turn (after one untimed round that warms the page cache), each a separate process
tree, so all three read the same cached files. Per run: wall time and CPU time of the tree.
Peak memory comes from one more run of each, the largest sum of PSS over the process tree
sampled every 20 ms (``check``/``summary`` read large files in forked worker processes: PSS
counts the pages they share with the parent once, where summing RSS would count them in every
worker); the sampler reads smaps and took 10 % of a 2-core machine, so timed runs do not sample. MB/s is input
bytes / wall time: all bytes for ``check`` (it reads every file), the tables ``summary`` reads
(kernel_details, step_trace_time, op_statistic) for ``summary``. msprof-analyze's text mode
reads only step_trace_time.csv and the communication files, so the time ratio flatters it.

The scaling series (``SERIES``, 8 ranks per GB: 0.25 GB in 2 ranks ... 8 GB in 64) runs the
three tools interleaved at each size on one folder whose ranks share two grown templates by
hard link (``output_data.generate_many``: the same bytes per rank, read as separate files).
On a machine shared with other jobs the wall times swing with their load; the ratios are
taken within one round, the CPU times are what the load does not stretch.
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
from .output_data import folder_bytes, generate, generate_many

WORKERS_ENV = "MINDSPEED_PROF_OUTPUT_WORKERS"  # mindspeed_prof.output.parallel's override
WIDE_POOL = 4
TARGET_CHECK_MBPS = 1000
TARGET_SUMMARY_MBPS = 600
TARGET_RSS_MIB = 256
# (GB, ranks): 8 ranks per GB, the growth of a job that adds ranks
SERIES = ((0.25, 2), (0.5, 4), (1, 8), (2, 16), (4, 32), (8, 64))
QUICK_SERIES = ((0.004, 1), (0.008, 2))
MB = 1e6
MIB = 2**20


def _tool(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def timed(command, env, sample=False):
    """Run ``command``. Returns wall seconds, CPU seconds (user + sys of the tree), peak memory
    of the tree (bytes: the largest sum of PSS over its processes; 0 unless ``sample``), the
    largest single-process RSS (bytes), exit code, stdout and stderr.

    Sampling reads every process's smaps each 20 ms, which on 2 cores took CPU from the command
    (check: 1.27 s sampled, 1.16 s not): timed runs do not sample, memory runs do."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        peak = 0
        root = psutil.Process(process.pid)
        while True:
            pid, status, usage = os.wait4(process.pid, 0 if not sample else os.WNOHANG)
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


def _commands(data, msprof_out):
    return {
        "check": [_tool("mindspeed-prof"), "check", data, "--json"],
        "summary": [_tool("mindspeed-prof"), "summary", data, "--json"],
        "msprof": [_tool("msprof-analyze"), "cluster", "-d", data, "-m", "all", "-o",
                   msprof_out],
    }


def _runner(commands, name, env, msprof_out, sample=False):
    def run(i):
        shutil.rmtree(msprof_out, ignore_errors=True)
        got = timed(commands[name], env, sample)
        if name != "msprof" and got.code != 0:
            raise RuntimeError(f"{' '.join(commands[name])} exited {got.code}\n"
                               f"{got.out[-2000:]}\n{got.err[-2000:]}")
        if name == "msprof" and not os.path.isdir(msprof_out):
            raise RuntimeError(f"msprof-analyze wrote nothing (exit {got.code})\n"
                               f"{got.err[-2000:]}")
        if name == "check" and not json.loads(got.out).get("ok"):
            raise RuntimeError(f"the generated data does not pass check:\n{got.out[:3000]}")
        return got
    return run


def _warm_cache(root):
    """Read every file once, so that every timed run reads from the page cache."""
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                while handle.read(1 << 24):
                    pass


NAMES = ("check", "summary", "msprof")


def measure(quick=False):
    total, ranks, reps = (8 * MB, 2, 1) if quick else (1.05e9, 4, 3)
    series = QUICK_SERIES if quick else SERIES
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_output_")
    data, msprof_out = os.path.join(tmp, "save_path"), os.path.join(tmp, "msprof")
    env = clean_env()
    try:
        os.makedirs(data)
        written, summary_bytes = generate(data, total, ranks)
        commands = _commands(data, msprof_out)
        results = dict(zip(NAMES, interleave_all(
            [_runner(commands, n, env, msprof_out) for n in NAMES], reps,
            warmup=0 if quick else 1)))
        memory = {n: _runner(commands, n, env, msprof_out, sample=True)(0) for n in NAMES}
        # The reader pool is as wide as the cores (at most 4): on this 2-core machine it has 2
        # processes, on any training host 4. Memory per process does not depend on the cores.
        wide_env = dict(env, **{WORKERS_ENV: str(WIDE_POOL)})
        wide = {} if quick else {name: timed(commands[name], wide_env, sample=True).peak / MIB
                                 for name in ("check", "summary")}
        shutil.rmtree(data)
        scaling = _scaling(tmp, series, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = _main_rows(results, memory, wide, written, summary_bytes, ranks, reps)
    return rows + _scaling_rows(scaling)


def _main_rows(results, memory, wide, written, summary_bytes, ranks, reps):
    def times(name):
        return [r.wall for r in results[name]]

    def cpu(name):
        return median([r.cpu for r in results[name]])

    def peak(name):
        return memory[name].peak / MIB

    def max_rss(name):
        return memory[name].max_rss / MIB

    rows = []
    size = f"{written / MB:.0f} MB in {ranks} ranks"
    for name, nbytes, reads, target in (("check", written, "every file", TARGET_CHECK_MBPS),
                                        ("summary", summary_bytes, "its tables",
                                         TARGET_SUMMARY_MBPS)):
        rates = [nbytes / MB / t for t in times(name)]
        rate = nbytes / MB / median(times(name))
        cores = cpu(name) / median(times(name))
        rows.append(Row(
            figure="5 check+summary", compared=f"`{name}` throughput ({reads}, {size})",
            value=rate, unit="MB/s", spread=spread_text(rates, "{:.0f}"),
            target=f">= {target} MB/s", ok=rate >= target,
            note=(f"{reps} runs; {nbytes / MB:.0f} MB in {median(times(name)):.2f} s wall, "
                  f"{cpu(name):.2f} s CPU over all its processes ({nbytes / MB / cpu(name):.0f} "
                  f"MB per CPU-second, {cores:.2f} cores busy of {os.cpu_count()}); start-up "
                  f"included")))
        rows.append(Row(
            figure="5 check+summary", compared=f"`{name}` peak memory (PSS of its processes)",
            value=peak(name), unit="MiB", spread="1 run", target=f"<= {TARGET_RSS_MIB} MiB",
            ok=peak(name) <= TARGET_RSS_MIB,
            note=(f"largest sum of PSS over the command's processes, sampled every 20 ms in a "
                  f"run of its own (the timed runs do not sample); largest single process RSS "
                  f"{max_rss(name):.0f} MiB")))
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
        target="< 1x", ok=ratio < 1,
        note=(f"msprof-analyze {median(times('msprof')):.2f} s, peak memory "
              f"{peak('msprof'):.0f} MiB (PSS); in text mode it reads only "
              f"step_trace_time.csv and communication*.json, not trace_view.json or "
              f"kernel_details.csv")))
    return rows


def _scaling(tmp, series, env):
    """[(GB, ranks, bytes, {name: Timed})] for each (GB, ranks), the three tools interleaved;
    their ``peak`` comes from one more, sampled, run of each."""
    largest, most = max(series)
    root = os.path.join(tmp, "scaling")
    os.makedirs(root)
    generate_many(root, largest * 1e9, most)
    captures = sorted(os.listdir(root), key=lambda n: int(n.split("_")[0][len("rank"):]))
    measured = []
    for size, count in series:
        data = os.path.join(tmp, f"size_{size}")
        os.makedirs(data)
        for name in captures[:count]:  # hard links: the same bytes, no copy
            shutil.copytree(os.path.join(root, name), os.path.join(data, name),
                            copy_function=os.link)
        msprof_out = os.path.join(tmp, "msprof")
        commands = _commands(data, msprof_out)
        _warm_cache(data)
        got = interleave_all([_runner(commands, n, env, msprof_out) for n in NAMES], 1,
                             warmup=0)
        timings = {n: g[0] for n, g in zip(NAMES, got)}
        for name in NAMES:
            timings[name].peak = _runner(commands, name, env, msprof_out, sample=True)(0).peak
        measured.append((size, count, folder_bytes(data), timings))
        shutil.rmtree(data)
    return measured


def _size(nbytes):
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.0f} MB"


def _scaling_rows(series):
    rows = []
    for size, ranks, nbytes, got in series:
        ours = got["check"].wall + got["summary"].wall
        rows.append(Row(
            figure="5 check+summary",
            compared=f"check + summary vs msprof-analyze, {_size(nbytes)} in {ranks} ranks",
            value=ours / got["msprof"].wall, unit="x", spread="1 round", target="< 1x",
            ok=ours < got["msprof"].wall,
            note=(f"check {got['check'].wall:.1f} s ({got['check'].cpu:.1f} s CPU, "
                  f"{got['check'].peak / MIB:.0f} MiB), summary {got['summary'].wall:.1f} s "
                  f"({got['summary'].cpu:.1f} s CPU, {got['summary'].peak / MIB:.0f} MiB), "
                  f"msprof-analyze {got['msprof'].wall:.1f} s ({got['msprof'].cpu:.1f} s CPU, "
                  f"{got['msprof'].peak / MIB:.0f} MiB)")))
    # Linear: CPU per GB at the largest size against the smallest size of >= 1 GB (start-up
    # weighs on smaller ones); CPU, not wall: the load of other jobs stretches wall time.
    big = [s for s in series if s[0] >= 1] or series
    per_gb = [(s[3]["check"].cpu + s[3]["summary"].cpu) / (s[2] / 1e9) for s in big]
    growth = per_gb[-1] / per_gb[0]
    rows.append(Row(
        figure="5 check+summary",
        compared=f"CPU per GB of check + summary, {_size(big[-1][2])} vs {_size(big[0][2])} "
                 f"(time linear in bytes)",
        value=growth, unit="x", spread="1 round", target="<= 1.2x", ok=growth <= 1.2,
        note="s of CPU per GB: " + ", ".join(f"{_size(s[2])} {v:.2f}"
                                              for s, v in zip(big, per_gb))))
    peaks = [max(s[3]["check"].peak, s[3]["summary"].peak) / MIB for s in series]
    rows.append(Row(
        figure="5 check+summary",
        compared=f"peak memory of check/summary from {_size(series[0][2])} to "
                 f"{_size(series[-1][2])} (flat with size)",
        value=max(peaks), unit="MiB", spread=f"min-max {min(peaks):.0f}-{max(peaks):.0f}",
        target=f"<= {TARGET_RSS_MIB} MiB", ok=max(peaks) <= TARGET_RSS_MIB,
        note="largest PSS sum of either command at each size: " + ", ".join(
            f"{p:.0f}" for p in peaks)))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
