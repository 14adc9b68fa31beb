"""Figure 5's scaling series: check + summary next to msprof-analyze from 0.25 to 8 GB (8 ranks
per GB, the growth of a job that adds ranks) and on 8 big ranks of 250 MB each.

Each size is one folder whose ranks share two grown templates by hard link
(``output_data.generate_many``: the same bytes per rank, read as separate files, each its own
cache entry). At each size, ROUNDS interleaved rounds (the side that goes first rotating): the
floor, ``check`` with an empty cache then ``summary`` after it, msprof-analyze, and
``$READERS_BASELINE``'s readers when set; each round's ratio pairs that round's runs, the row
gives their median and min-max. Then one sampled run of ``check`` and of ``summary``, each
with an empty cache, for peak memory.
"""

import dataclasses
import os
import shutil
import statistics
import tempfile
import time

from mindspeed_prof.output.cache import RACY_SECONDS

from .common import Row, interleave_all
from .output_data import folder_bytes, generate_many
from .output_run import (MIB, baseline_env, floor_command, load, msprof_command, must_pass,
                         reader_command, timed, warm_page_cache, with_cache)

SERIES = ((0.25, 2), (0.5, 4), (1, 8), (2, 16), (4, 32), (8, 64))
BIG_RANKS = (2.0, 8)  # 8 ranks of 250 MB: few big ranks
QUICK_SERIES = ((0.008, 2),)  # one size: each size costs an msprof-analyze run (~8 s of CPU)
ROUNDS = 3  # per size: the ratio's median and min-max (one round in quick mode)
TARGET_RSS_MIB = 256
FIGURE = "5 check+summary"


def series_rows(tmp, env, quick):
    series = QUICK_SERIES if quick else SERIES
    measured = _measure(tmp, "scaling", series, env, quick)
    # quick mode (the smoke test) leaves the big ranks out: one msprof-analyze run less
    big = None if quick else _measure(tmp, "big_ranks", [BIG_RANKS], env, quick)[0]
    return _rows(measured, big)


def _measure(tmp, name, sizes, env, quick):
    """[(GB, ranks, bytes, {side: Timed}, load)] for each (GB, ranks)."""
    largest, most = max(sizes)
    root = os.path.join(tmp, name)
    os.makedirs(root)
    generate_many(root, largest * 1e9, most)
    captures = sorted(os.listdir(root), key=lambda n: int(n.split("_")[0][len("rank"):]))
    measured = []
    for size, count in sizes:
        data = os.path.join(tmp, f"{name}_{size}")
        os.makedirs(data)
        for capture in captures[:count]:  # hard links: the same bytes, no copy
            shutil.copytree(os.path.join(root, capture), os.path.join(data, capture),
                            copy_function=os.link)
        warm_page_cache(data)
        if not quick:  # a link changes the file's ctime: the cache stores nothing so recent
            time.sleep(RACY_SECONDS + 0.5)
        loads = load()
        got = _round(tmp, data, env, 1 if quick else ROUNDS)
        for side in ("check", "summary_cold"):
            folder = tempfile.mkdtemp(dir=tmp)
            peak = timed(reader_command(side.split("_")[0], data), with_cache(env, folder),
                         sample=True).peak
            for run in got[side]:
                run.peak = peak
            shutil.rmtree(folder)
        measured.append((size, count, folder_bytes(data), got, f"{loads} -> {load()}"))
        shutil.rmtree(data)
    shutil.rmtree(root)
    return measured


def _round(tmp, data, env, rounds):
    """``rounds`` interleaved rounds of every side; {side: [Timed per round]}."""
    msprof_out = os.path.join(tmp, "msprof")
    old_env = baseline_env(env)

    def floor(i):
        return {"floor": must_pass(timed(floor_command(data), env), floor_command(data))}

    def ours(i):
        folder, got = tempfile.mkdtemp(dir=tmp), {}
        for key, name in (("check", "check"), ("summary", "summary")):
            command = reader_command(name, data)
            got[key] = must_pass(timed(command, with_cache(env, folder)), command,
                                 check_ok=name == "check")
        shutil.rmtree(folder)
        return got

    def msprof(i):
        shutil.rmtree(msprof_out, ignore_errors=True)
        return {"msprof": timed(msprof_command(data, msprof_out), env)}

    def old(i):
        return {f"old_{name}": must_pass(timed(reader_command(name, data), old_env),
                                         reader_command(name, data))
                for name in ("check", "summary")}

    sides = [floor, ours, msprof] + ([old] if old_env is not None else [])
    got = {}
    for results in interleave_all(sides, rounds, warmup=0):
        for result in results:
            for key, value in result.items():
                got.setdefault(key, []).append(value)
    got["summary_cold"] = [dataclasses.replace(t) for t in got["summary"]]  # peak: apart
    return got


def _size(nbytes):
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.0f} MB"


def _median(runs, attr="wall"):
    return statistics.median(getattr(run, attr) for run in runs)


def _ratio_row(size, ranks, nbytes, got, loads):
    # each round's check + summary against the same round's msprof-analyze
    ratios = [(c.wall + s.wall) / m.wall for c, s, m in zip(got["check"], got["summary"],
                                                            got["msprof"])]
    check, summary, msprof = (_median(got[k]) for k in ("check", "summary", "msprof"))
    floor = nbytes / _median(got["floor"])
    old = ""
    if "old_check" in got:
        before = _median(got["old_check"]) + _median(got["old_summary"])
        old = (f"; $READERS_BASELINE's check + summary {before:.1f} s "
               f"({_median(got['old_check'], 'cpu') + _median(got['old_summary'], 'cpu'):.1f} s "
               f"CPU, {(check + summary) / before:.2f}x)")
    spread = f"min-max {min(ratios):.3f}-{max(ratios):.3f}" if len(ratios) > 1 else "1 round"
    return Row(
        figure=FIGURE,
        compared=f"check + summary vs msprof-analyze, {_size(nbytes)} in {ranks} ranks",
        value=statistics.median(ratios), unit="x", spread=spread, target="< 1x",
        ok=max(ratios) < 1,
        note=(f"{len(ratios)} rounds, medians: check {check:.2f} s "
              f"({_median(got['check'], 'cpu'):.1f} s CPU, {nbytes / check / 1e6:.0f} MB/s, "
              f"{nbytes / check / floor:.3f} of the floor's {floor / 1e6:.0f} MB/s, "
              f"{got['check'][0].peak / MIB:.0f} MiB), summary after it {summary:.2f} s "
              f"({_median(got['summary'], 'cpu'):.1f} s CPU; "
              f"{got['summary_cold'][0].peak / MIB:.0f} MiB with an empty cache), "
              f"msprof-analyze {msprof:.2f} s ({_median(got['msprof'], 'cpu'):.1f} s CPU){old}; "
              f"load {loads}"))


def _rows(series, big):
    rows = [_ratio_row(*s) for s in series]
    if big is not None:
        rows.append(_ratio_row(*big))
        rows[-1].compared = rows[-1].compared.replace("vs msprof-analyze,",
                                                      "vs msprof-analyze, few big ranks:")
    # Linear: CPU per GB at the largest size against the smallest size of >= 1 GB (start-up
    # weighs on smaller ones); CPU, not wall: the load of other jobs stretches wall time.
    large = [s for s in series if s[0] >= 1] or series
    per_gb = [(_median(s[3]["check"], "cpu") + _median(s[3]["summary"], "cpu")) / (s[2] / 1e9)
              for s in large]
    growth = per_gb[-1] / per_gb[0]
    rows.append(Row(
        figure=FIGURE,
        compared=f"CPU per GB of check + summary, {_size(large[-1][2])} vs {_size(large[0][2])} "
                 f"(time linear in bytes)",
        value=growth, unit="x", spread=f"medians of {len(large[0][3]['check'])} rounds",
        target="<= 1.2x", ok=growth <= 1.2,
        note="s of CPU per GB: " + ", ".join(f"{_size(s[2])} {v:.2f}"
                                              for s, v in zip(large, per_gb))))
    peaks = [max(s[3]["check"][0].peak, s[3]["summary_cold"][0].peak) / MIB
             for s in series + ([big] if big is not None else [])]
    rows.append(Row(
        figure=FIGURE,
        compared=f"peak memory of check/summary from {_size(series[0][2])} to "
                 f"{_size(series[-1][2])} (flat with size)",
        value=max(peaks), unit="MiB", spread=f"min-max {min(peaks):.0f}-{max(peaks):.0f}",
        target=f"<= {TARGET_RSS_MIB} MiB", ok=max(peaks) <= TARGET_RSS_MIB,
        note="largest PSS sum of either command (empty cache) at each size, then the 8 big "
             "ranks: " + ", ".join(f"{p:.0f}" for p in peaks)))
    return rows
