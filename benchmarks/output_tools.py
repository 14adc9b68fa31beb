"""Figure 5 (check + summary): throughput against the read floor, peak memory, time next to
msprof-analyze at every size, past one machine.

A save path of >= 1 GB (4 ranks; trace_view.json and kernel_details.csv grown from the real
samples, see ``output_data``) is written under the temp folder. Each round runs, as separate
process trees reading the same page-cached files: the floor (``cat`` of every file to
/dev/null), our readers in the order a user runs them (``check --json`` with an empty cache,
``summary --json`` after it, ``check`` again, and ``summary`` alone with an empty cache), and
``msprof-analyze cluster -m all``; the three sides rotate which goes first, after one untimed
round. ``READERS_BASELINE=<checkout>`` adds the readers of that checkout (no cache) to the same
rounds. Per run: wall time and CPU time of the tree; peak memory comes from one more, sampled,
run of each (the largest sum of PSS over the tree: forked workers share pages). MB/s is input
bytes / wall time: all bytes for ``check``, the tables ``summary`` reads for ``summary``; each
is also given as a fraction of the floor's rate. msprof-analyze's text mode reads only
step_trace_time.csv and the communication files, so the time ratio flatters it.

Then the scaling series (``output_series``: 0.25 -> 8 GB at 8 ranks per GB, and 8 ranks of
250 MB) and the many-node layout (``output_nodes``: nodes checked as separate processes,
their reports merged). On a machine shared with other jobs the wall times swing with their
load (each row's note gives the load average); ratios within one round, and CPU times, are
what the load does not stretch.
"""

import os
import shutil
import tempfile

from .common import Row, clean_env, figure_main, interleave_all, median, spread_text
from .output_data import generate
from .output_nodes import nodes_rows
from .output_run import (MB, MIB, baseline_env, floor_command, load, msprof_command, must_pass,
                         reader_command, timed, warm_page_cache, with_cache)
from .output_series import series_rows

WORKERS_ENV = "MINDSPEED_PROF_OUTPUT_WORKERS"  # mindspeed_prof.output.parallel's override
WIDE_POOL = 4
TARGET_CHECK_MBPS = 1000
TARGET_SUMMARY_MBPS = 1000
TARGET_RSS_MIB = 256
FIGURE = "5 check+summary"


def _sides(data, tmp, env):
    """The runners of one round: floor, ours (the four runs in a user's order), msprof-analyze,
    and the baseline's check + summary when ``READERS_BASELINE`` names one."""
    msprof_out = os.path.join(tmp, "msprof")
    old_env = baseline_env(env)

    def floor(i):
        return must_pass(timed(floor_command(data), env), floor_command(data))

    def ours(i):
        cold, alone = (tempfile.mkdtemp(dir=tmp, prefix=p) for p in ("cache_", "alone_"))
        runs = {}
        for key, name, folder in (("check", "check", cold), ("summary_after", "summary", cold),
                                  ("check_again", "check", cold),
                                  ("summary_cold", "summary", alone)):
            command = reader_command(name, data)
            runs[key] = must_pass(timed(command, with_cache(env, folder)), command,
                                  check_ok=name == "check")
        shutil.rmtree(cold)
        shutil.rmtree(alone)
        return runs

    def msprof(i):
        shutil.rmtree(msprof_out, ignore_errors=True)
        got = timed(msprof_command(data, msprof_out), env)
        if not os.path.isdir(msprof_out):
            raise RuntimeError(f"msprof-analyze wrote nothing (exit {got.code})\n{got.err[-2000:]}")
        return got

    def old(i):
        return {name: must_pass(timed(reader_command(name, data), old_env),
                                reader_command(name, data), check_ok=name == "check")
                for name in ("check", "summary")}

    sides = {"floor": floor, "ours": ours, "msprof": msprof}
    if old_env is not None:
        sides["old"] = old
    return sides


def _memory(data, tmp, env, quick):
    """Peak PSS of each command with an empty cache, and with the pool 4 readers wide (not in
    quick mode: a pool needs more than its bytes)."""
    peaks = {}
    for name in ("check", "summary"):
        command = reader_command(name, data)
        widths = ((name, {}),) if quick else ((name, {}),
                                              (f"{name}_wide", {WORKERS_ENV: str(WIDE_POOL)}))
        for key, extra in widths:
            folder = tempfile.mkdtemp(dir=tmp)
            peaks[key] = timed(command, dict(with_cache(env, folder), **extra), sample=True)
            shutil.rmtree(folder)
    return peaks


def measure(quick=False):
    total, ranks, reps = (8 * MB, 2, 1) if quick else (1.05e9, 4, 3)
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_output_")
    data = os.path.join(tmp, "save_path")
    env = clean_env()
    try:
        os.makedirs(data)
        written, summary_bytes = generate(data, total, ranks)
        warm_page_cache(data)
        load_before = load()
        sides = _sides(data, tmp, env)
        results = dict(zip(sides, interleave_all(list(sides.values()), reps,
                                                  warmup=0 if quick else 1)))
        peaks = _memory(data, tmp, env, quick)
        rows = _main_rows(results, peaks, written, summary_bytes, ranks, reps,
                          f"{load_before} -> {load()}")
        shutil.rmtree(data)
        rows += series_rows(tmp, env, quick)
        rows += nodes_rows(tmp, env, quick)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _main_rows(results, peaks, written, summary_bytes, ranks, reps, loads):
    def walls(side, key=None):
        return [(r[key] if key else r).wall for r in results[side]]

    def cpus(side, key=None):
        return [(r[key] if key else r).cpu for r in results[side]]

    floor = written / MB / median(walls("floor"))
    size = f"{written / MB:.0f} MB in {ranks} ranks"
    rows = [Row(figure=FIGURE, compared=f"read floor: `cat` of every file to /dev/null ({size})",
                value=floor, unit="MB/s",
                spread=spread_text([written / MB / t for t in walls("floor")], "{:.0f}"),
                target="", note=f"{reps} runs; {median(cpus('floor')):.2f} s CPU; load average "
                                f"{loads}; the page cache's rate on this machine, the most a "
                                f"reader of every byte can reach")]
    for key, nbytes, what, target in (
            ("check", written, "`check` throughput (every file, empty cache)", TARGET_CHECK_MBPS),
            ("summary_cold", summary_bytes, "`summary` throughput (its tables, empty cache)",
             TARGET_SUMMARY_MBPS),
            ("summary_after", summary_bytes, "`summary` throughput after `check` (its cache)",
             TARGET_SUMMARY_MBPS),
            ("check_again", written, "`check` again (unchanged files, its cache)",
             TARGET_CHECK_MBPS)):
        wall, cpu = median(walls("ours", key)), median(cpus("ours", key))
        rate = nbytes / MB / wall
        rows.append(Row(
            figure=FIGURE, compared=what, value=rate, unit="MB/s",
            spread=spread_text([nbytes / MB / t for t in walls("ours", key)], "{:.0f}"),
            target=f">= {target} MB/s", ok=rate >= target,
            note=(f"{reps} runs; {nbytes / MB:.0f} MB in {wall:.2f} s wall, {cpu:.2f} s CPU "
                  f"({nbytes / MB / cpu:.0f} MB per CPU-second, {cpu / wall:.2f} cores busy of "
                  f"{os.cpu_count()}); {rate / floor:.3f} of the read floor; start-up "
                  f"included")))
    for name in ("check", "summary"):
        for key, what in ((name, f"`{name}` peak memory (PSS of its processes)"),
                          (f"{name}_wide", f"`{name}` peak memory with {WIDE_POOL} reader "
                                           f"processes (>= 4 cores)")):
            if key not in peaks:
                continue
            value = peaks[key].peak / MIB
            rows.append(Row(figure=FIGURE, compared=what, value=value, unit="MiB",
                            spread="1 run", target=f"<= {TARGET_RSS_MIB} MiB",
                            ok=value <= TARGET_RSS_MIB,
                            note=f"empty cache; largest sum of PSS, sampled every 20 ms; largest "
                                 f"single process RSS {peaks[key].max_rss / MIB:.0f} MiB"))
    msprof = walls("msprof")
    for keys, what, target in ((("check", "summary_after"),
                                "check + summary time vs msprof-analyze cluster -m all", "< 1x"),
                               (("check", "summary_cold"),
                                "check + summary, no cache (each reads), vs msprof-analyze", "")):
        ours = [a + b for a, b in zip(walls("ours", keys[0]), walls("ours", keys[1]))]
        ratio = median(ours) / median(msprof)
        rows.append(Row(
            figure=FIGURE, compared=what, value=ratio, unit="x",
            spread=spread_text([a / b for a, b in zip(ours, msprof)]), target=target,
            ok=ratio < 1 if target else None,
            note=(f"ours {median(ours):.2f} s, msprof-analyze {median(msprof):.2f} s "
                  f"({median(cpus('msprof')):.2f} s CPU); in text mode msprof-analyze reads "
                  f"only step_trace_time.csv and communication*.json")))
    if "old" in results:
        old = [a + b for a, b in zip(walls("old", "check"), walls("old", "summary"))]
        new = [a + b for a, b in zip(walls("ours", "check"), walls("ours", "summary_after"))]
        rows.append(Row(
            figure=FIGURE, compared="check + summary: these readers vs $READERS_BASELINE's",
            value=median(new) / median(old), unit="x",
            spread=spread_text([a / b for a, b in zip(new, old)]), target="",
            note=(f"baseline check {median(walls('old', 'check')):.2f} s "
                  f"({median(cpus('old', 'check')):.2f} s CPU), summary "
                  f"{median(walls('old', 'summary')):.2f} s ({median(cpus('old', 'summary')):.2f}"
                  f" s CPU); these: check {median(walls('ours', 'check')):.2f} s "
                  f"({median(cpus('ours', 'check')):.2f} s CPU), summary after it "
                  f"{median(walls('ours', 'summary_after')):.2f} s")))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
