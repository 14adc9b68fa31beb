"""Figure 5 (check + summary): throughput and peak memory on a large save path, and time next
to msprof-analyze.

A save path of >= 1 GB (4 ranks; trace_view.json and kernel_details.csv grown from the real
samples, see ``output_data``) is written under the temp folder. ``mindspeed-prof check DIR
--json``, ``mindspeed-prof summary DIR --json`` and ``msprof-analyze cluster -d DIR -m all``
then run in turn (after one untimed round that warms the page cache), each a separate process
tree, so all three read the same cached files. Per run: wall time, and peak RSS as the largest
sum over the process tree sampled every 20 ms (``check``/``summary`` may read files in worker
processes; the sum is what the machine must hold). MB/s is input bytes / time: all bytes for
``check`` (it reads every file), the tables ``summary`` reads (kernel_details, step_trace_time,
op_statistic) for ``summary``. msprof-analyze's text mode reads only step_trace_time.csv and the
communication files, so the time ratio flatters it.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

from .common import Row, clean_env, emit_rows, interleave_all, median, spread_text
from .output_data import generate

TARGET_MBPS = 200
TARGET_RSS_MIB = 256
MB = 1e6
MIB = 2**20


def _tool(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def timed(command, env):
    """Run ``command``: wall seconds, CPU seconds (the tree's user + sys), peak tree RSS
    (bytes), exit code, stdout and stderr text."""
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
                peak = max(peak, sum(_rss(p) for p in tree))
            except psutil.Error:
                pass
            time.sleep(0.02)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        # wait4's usage covers the child and the workers it waited for
        cpu = usage.ru_utime + usage.ru_stime
        return wall, cpu, peak, process.returncode, out.read(), err.read()


def _rss(process):
    try:
        return process.memory_info().rss
    except psutil.Error:
        return 0


def measure(quick=False):
    total, ranks, reps = (8 * MB, 2, 1) if quick else (1.05e9, 4, 3)
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
                wall, cpu, peak, code, out, err = timed(commands[name], env)
                if name != "msprof" and code != 0:
                    raise RuntimeError(f"{' '.join(commands[name])} exited {code}\n{out[-2000:]}"
                                       f"\n{err[-2000:]}")
                if name == "msprof" and not os.path.isdir(msprof_out):
                    raise RuntimeError(f"msprof-analyze wrote nothing (exit {code})\n{err[-2000:]}")
                if name == "check" and not json.loads(out).get("ok"):
                    raise RuntimeError(f"the generated data does not pass check:\n{out[:3000]}")
                return wall, cpu, peak
            return run

        names = ("check", "summary", "msprof")
        results = dict(zip(names, interleave_all([runner(n) for n in names], reps,
                                                 warmup=0 if quick else 1)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def times(name):
        return [w for w, _, _ in results[name]]

    def cpu(name):
        return median([c for _, c, _ in results[name]])

    def peaks(name):
        return [p / MIB for _, _, p in results[name]]

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
                  f"{cpu(name):.2f} s CPU over all its processes; start-up included")))
        peak = median(peaks(name))
        rows.append(Row(
            figure="5 check+summary", compared=f"`{name}` peak RSS (process tree)",
            value=peak, unit="MiB", spread=spread_text(peaks(name), "{:.0f}"),
            target=f"<= {TARGET_RSS_MIB} MiB", ok=peak <= TARGET_RSS_MIB,
            note="largest sum of RSS over the command's processes, sampled every 20 ms"))
    ours = [c + s for c, s in zip(times("check"), times("summary"))]
    ratio = median(ours) / median(times("msprof"))
    rows.append(Row(
        figure="5 check+summary", compared="check + summary time vs msprof-analyze cluster -m all",
        value=ratio, unit="x", spread=spread_text([a / b for a, b in zip(ours, times("msprof"))]),
        target="", ok=None,
        note=(f"msprof-analyze {median(times('msprof')):.2f} s, peak RSS "
              f"{median(peaks('msprof')):.0f} MiB; in text mode it reads only step_trace_time.csv "
              f"and communication*.json, not trace_view.json or kernel_details.csv")))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    emit_rows(measure(parser.parse_args().quick))


if __name__ == "__main__":
    main()
