"""Figure 5, past one machine: a job of many nodes checked node by node, then merged.

One save path of ``NODES`` x ``RANKS`` ranks (``output_data.generate_many``, hard-linked
templates); each "node" is a separate process, ``check DIR --node I/N --report FILE`` with a
cache of its own (as on its own machine), run ``os.cpu_count()`` at a time; then
``merge`` of the reports. The same folder is checked and summarised on one machine. Rows: the
merged verdict and summary against one machine's (equal or not), and the time a job takes
when its nodes run at once (the slowest node, then the merge) against one machine reading
everything. On this machine the nodes share its cores, so their own times are under the load
of their siblings: what a real node pays is at most that.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

from mindspeed_prof.output.cache import RACY_SECONDS

from .common import Row
from .output_data import folder_bytes, generate_many
from .output_run import load, must_pass, reader_command, timed, tool, with_cache

NODES, RANKS, TOTAL = 64, 8, 4e9
QUICK = (2, 2, 8e6)
FIGURE = "5 check+summary"


def nodes_rows(tmp, env, quick):
    nodes, ranks, total = QUICK if quick else (NODES, RANKS, TOTAL)
    data = os.path.join(tmp, "job")
    os.makedirs(data)
    generate_many(data, total, nodes * ranks)
    if not quick:
        time.sleep(RACY_SECONDS + 0.5)  # the links' ctime: let the cache trust the files
    loads = load()
    one = {}
    folder = tempfile.mkdtemp(dir=tmp)
    for name in ("check", "summary"):
        command = reader_command(name, data)
        one[name] = must_pass(timed(command, with_cache(env, folder)), command,
                              check_ok=None if name == "check" else False)
    reports = os.path.join(tmp, "reports")
    walls = _run_nodes(data, reports, nodes, env, tmp)
    merged = timed([tool("mindspeed-prof"), "merge", "--json",
                    *sorted(os.path.join(reports, n) for n in os.listdir(reports))], env)
    result = json.loads(merged.out)
    equal = (result["check"] == json.loads(one["check"].out)
             and result["summary"] == json.loads(one["summary"].out))
    size = f"{folder_bytes(data) / 1e9:.2f} GB" if total >= 1e8 else f"{total / 1e6:.0f} MB"
    layout = f"{nodes} nodes x {ranks} ranks ({size})"
    single = one["check"].wall + one["summary"].wall
    job = max(walls) + merged.wall
    rows = [
        Row(figure=FIGURE, compared=f"{layout}: merged node reports == one machine's check + "
                                    f"summary", value=1.0 if equal else 0.0, unit="",
            spread="1 run", target="1 (equal)", ok=equal,
            note=f"check --json and summary --json of one machine against merge --json's "
                 f"check and summary, compared whole; {len(result['check']['ranks'])} ranks"),
        Row(figure=FIGURE, compared=f"{layout}: the job judged node by node (slowest node + "
                                    f"merge) vs one machine reading it all",
            value=job / single, unit="x", spread=f"node min-max {min(walls):.2f}-"
                                                 f"{max(walls):.2f} s",
            target="", note=(f"one machine: check {one['check'].wall:.1f} s + summary "
                             f"{one['summary'].wall:.1f} s; nodes (check + report of their "
                             f"{ranks} ranks, {os.cpu_count()} at a time here) median "
                             f"{sorted(walls)[len(walls) // 2]:.2f} s, merge of {nodes} "
                             f"reports {merged.wall:.2f} s ({merged.cpu:.2f} s CPU); load "
                             f"{loads} -> {load()}")),
    ]
    shutil.rmtree(data)
    return rows


def _run_nodes(data, reports, nodes, env, tmp):
    """Each node's wall time; ``cpu_count`` nodes at a time, each with its own cache."""
    pending, running, walls = list(range(nodes)), {}, []
    width = os.cpu_count() or 1
    while pending or running:
        while pending and len(running) < width:
            index = pending.pop(0)
            cache = tempfile.mkdtemp(dir=tmp, prefix=f"node{index}_")
            command = [tool("mindspeed-prof"), "check", data, "--node", f"{index}/{nodes}",
                       "--report", os.path.join(reports, "node{node}.json"), "--json"]
            running[index] = (subprocess.Popen(command, env=with_cache(env, cache),
                                               stdout=subprocess.DEVNULL,
                                               stderr=subprocess.PIPE), time.perf_counter())
        for index, (process, started) in list(running.items()):
            if process.poll() is None:
                continue
            if process.returncode not in (0, 1):
                raise RuntimeError(f"node {index} exited {process.returncode}: "
                                   f"{process.stderr.read()[-2000:]}")
            walls.append(time.perf_counter() - started)
            del running[index]
        time.sleep(0.005)
    return walls
