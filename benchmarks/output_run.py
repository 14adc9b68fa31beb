"""Figure 5's instruments: run a command as its own process tree and time it, the commands
compared, and the read floor (the page cache handing the same folder's bytes to ``cat``).

The readers remember what they read (``mindspeed_prof/output/cache.py``): every timed run gets
the cache folder it is meant to see, a fresh one for a cold read, the previous run's for a
warm one, so no run is helped by another unless the row says so.
"""

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time

import psutil

CACHE_ENV = "MINDSPEED_PROF_CACHE"
BASELINE_ENV = "READERS_BASELINE"  # a checkout of older readers, timed beside these
MB = 1e6
MIB = 2**20


@dataclasses.dataclass
class Timed:
    wall: float
    cpu: float
    peak: int
    max_rss: int
    code: int
    out: str
    err: str


def tool(name):
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


def _pss(process):
    """Proportional set size: pages shared by forked workers are counted once in the sum
    (summing RSS would count the parent's pages again in every worker)."""
    try:
        return process.memory_full_info().pss
    except psutil.Error:
        return 0


def floor_command(data):
    """Every file of the folder through ``cat`` to /dev/null: the page cache's rate, the most
    any reader of every byte can reach on this machine."""
    return ["bash", "-c", 'find "$0" -type f -print0 | xargs -0 cat > /dev/null', data]


def reader_command(name, data, *extra):
    return [tool("mindspeed-prof"), name, data, "--json", *extra]


def msprof_command(data, out):
    return [tool("msprof-analyze"), "cluster", "-d", data, "-m", "all", "-o", out]


def with_cache(env, folder):
    return dict(env, **{CACHE_ENV: folder})


def baseline_env(env):
    """The environment that runs the readers of ``$READERS_BASELINE`` (None when unset)."""
    checkout = os.environ.get(BASELINE_ENV)
    if not checkout:
        return None
    return dict(env, PYTHONPATH=os.path.abspath(checkout), **{CACHE_ENV: "off"})


def must_pass(got, command, check_ok=False):
    import json

    if got.code not in (0,) and not (check_ok is None and got.code == 1):
        # stderr first: the cause (a traceback, a fatal error) is there, and the note that
        # carries this message upwards keeps only its start (run.py)
        how = f"exited {got.code}" if got.code >= 0 else \
            f"was killed by {signal.Signals(-got.code).name}"
        raise RuntimeError(f"{' '.join(command)} {how}\n--- stderr ---\n{got.err[-2000:]}\n"
                           f"--- stdout ---\n{got.out[-500:]}")
    if check_ok and not json.loads(got.out).get("ok"):
        raise RuntimeError(f"the generated data does not pass check:\n{got.out[:3000]}")
    return got


def warm_page_cache(root):
    """Read every file once, so that every timed run reads from the page cache."""
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                while handle.read(1 << 24):
                    pass


def load():
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"
