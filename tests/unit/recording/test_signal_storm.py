"""SIGTERM and SIGINT end a profiled loop within the flush bound wherever they land (DESIGN §7
"Signals", STYLE 12): sent at random moments into short-unit loops of every unit (iterations
with a window every 2, RL steps and requests with a session each, engine steps with a window
every 3), hundreds of times, not at one chosen point.

Most signals go to processes whose host notes SIGTERM itself and catches Ctrl-C (a server that
shuts down on its own), so one process takes a signal per round, each round with a new profiler
and save path; a few go to plain scripts, which the signal ends. Each round must end within the
flush bound and leave a manifest that parses and says how the run ended.

``SIGNAL_STORM_ROUNDS=N`` (default 50) sets the rounds per unit for a longer soak;
``SIGNAL_STORM_SEED`` replays one; ``SIGNAL_STORM_TREE`` runs the storm against another checkout
(a worktree of an older commit: how many signals hung it)."""

import concurrent.futures
import glob
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from mindspeed_prof.recording.exits import SIGNAL_FLUSH_TIMEOUT_S

pytestmark = [pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals"),
              pytest.mark.slow]  # 8 child interpreters, ~40 s on 2 quiet cores: CI, not between edits

UNITS = ("iteration", "rl-step", "request", "engine-step")
ROUNDS = int(os.environ.get("SIGNAL_STORM_ROUNDS", "50"))
SCRIPTS = max(1, ROUNDS // 10)  # plain scripts per unit, each ended by its one signal (each
# pays the profiler's first start, ~2 s of CPU: the rounds take most of the signals)
# From the signal to the round's end (or the process's): the flush's own bound, and the
# interpreter's exit on a machine loaded several times over (a few seconds when quiet).
BOUND_S = SIGNAL_FLUSH_TIMEOUT_S + 40
CHILD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "helpers",
                     "signal_storm.py")
START_S = 240  # a child's start (torch's import, the first profiler) on 2 loaded cores
HOW = {"SIGTERM": ("signal", "SIGTERM"), "SIGINT": ("interrupted", None)}


class Child:
    """One storm program (tests/helpers/signal_storm.py); its ``armed k``, ``ended k``,
    ``forked k PID`` and ``exited k CODE`` lines arrive on a queue."""

    def __init__(self, unit, root, mode, stdin=False):
        self.root = root
        self.log = open(f"{root}.log", "w")
        self.proc = subprocess.Popen([sys.executable, CHILD, unit, root, mode],
                                     stdin=subprocess.PIPE if stdin else None,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith(("armed ", "ended ", "forked ", "exited ")):
                self.lines.put(line.strip())
        self.lines.put("eof")

    def expect(self, line, timeout):
        """The line that is ``line`` (or starts with it, ending in a space) when one came within
        ``timeout`` seconds, else None."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if got == line or (line.endswith(" ") and got.startswith(line)):
                return got
            if got == "eof":
                return None

    def hung(self):
        """Ask for its stacks (faulthandler), then kill it."""
        self.proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        with open(f"{self.root}.log") as handle:
            return handle.read()[-8000:]

    def lost(self, result):
        """The round did not end: the process hung (its stacks kept) or died (its log kept)."""
        if self.proc.poll() is None:
            result["hung"] = self.hung()
        else:
            self.close()
            with open(f"{self.root}.log") as handle:
                result["crashed"] = handle.read()[-4000:]
        return None

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def random_delay(rng):
    """Seconds from a round's start to its signal: half land on the first unit (the first
    session's start, the manifest's first writes), half anywhere in the next half second."""
    return rng.uniform(0, 0.05) if rng.random() < 0.5 else rng.uniform(0, 0.6)


def storm_rounds(unit, folder, rounds, seed):
    """Send one signal per round into ``rounds`` rounds; a process that hangs is replaced."""
    rng = random.Random(seed)
    results, child, started = [], None, 0
    try:
        for k in range(rounds):
            if child is None:
                child = Child(unit, os.path.join(folder, f"{unit}-{started}"), "rounds")
                started, first = started + 1, k
                if not child.expect("armed 0", START_S):
                    raise AssertionError(f"{unit}: the storm program did not start:\n"
                                         f"{child.hung()}")
            elif not child.expect(f"armed {k - first}", BOUND_S):
                # the last signal's round ended, but the process went no further
                results[-1].pop("seconds", None)
                child = child.lost(results[-1])
                continue
            name = rng.choice(("SIGTERM", "SIGINT"))
            time.sleep(random_delay(rng))
            sent = time.monotonic()
            child.proc.send_signal(getattr(signal, name))
            ended = child.expect(f"ended {k - first}", BOUND_S)
            result = {"unit": unit, "signal": name, "save": os.path.join(child.root,
                                                                         str(k - first))}
            if ended:
                result["seconds"] = time.monotonic() - sent
            else:
                child = child.lost(result)
            results.append(result)
    finally:
        if child is not None:
            child.close()
    return results


def storm_scripts(unit, folder, count, seed):
    """One signal into each of ``count`` plain scripts (forked by one storm program): each must
    end its process."""
    rng = random.Random(seed)
    results = []
    child = Child(unit, os.path.join(folder, f"{unit}-scripts"), "fork", stdin=True)
    try:
        for k in range(count):
            child.proc.stdin.write(f"go {k}\n")
            child.proc.stdin.flush()
            forked = child.expect(f"forked {k} ", START_S)
            if not forked or not child.expect(f"armed {k}", START_S):
                raise AssertionError(f"{unit}: script {k} did not start:\n{child.hung()}")
            name = rng.choice(list(HOW))
            time.sleep(random_delay(rng))
            sent = time.monotonic()
            os.kill(int(forked.split()[2]), getattr(signal, name))
            result = {"unit": unit, "signal": name, "save": os.path.join(child.root, str(k))}
            exited = child.expect(f"exited {k} ", BOUND_S)
            if exited:
                result["seconds"] = time.monotonic() - sent
                result["returncode"] = int(exited.split()[2])
            else:
                os.kill(int(forked.split()[2]), signal.SIGUSR1)  # its stacks, in the log
                time.sleep(1)
                os.kill(int(forked.split()[2]), signal.SIGKILL)
                child.expect(f"exited {k} ", BOUND_S)
                result["hung"] = open(f"{child.root}.log").read()[-8000:]
            results.append(result)
    finally:
        child.close()
    return results


def manifest_problem(result):
    """Why the manifest the round left does not say how the run ended (None: it does)."""
    paths = glob.glob(os.path.join(result["save"], "**", "profile_manifest_rank0*.json"),
                      recursive=True)
    if len(paths) != 1:
        return f"{len(paths)} manifests"
    try:
        with open(paths[0]) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        return f"unreadable: {exc}"
    reason, detail = HOW[result["signal"]]
    end = data.get("exit") or {}
    if end.get("reason") != reason or (detail is not None and end.get("detail") != detail):
        return f"exit {data.get('exit')!r}, status {data.get('status')!r}"
    running = [w for w in data.get("windows", []) if w.get("status") == "running"]
    if data.get("status") in ("armed", "running") or running:
        return f"status {data.get('status')!r} after the end, windows {running}"
    return None


def test_sigterm_and_sigint_at_random_moments_end_every_units_loop_within_the_flush_bound(
        tmp_path):
    seed = int(os.environ.get("SIGNAL_STORM_SEED", time.time_ns() % 10 ** 6))
    jobs = [(storm_rounds, unit, str(tmp_path), ROUNDS, seed + i)
            for i, unit in enumerate(UNITS)]
    jobs += [(storm_scripts, unit, str(tmp_path), SCRIPTS, seed + 10 + i)
             for i, unit in enumerate(UNITS)]
    with concurrent.futures.ThreadPoolExecutor(len(UNITS)) as pool:
        done = [pool.submit(*job) for job in jobs]
        results = [result for future in done for result in future.result()]
    hung = [r for r in results if "hung" in r]
    crashed = [r for r in results if "crashed" in r]
    wrong = [(r["unit"], r["signal"], r["save"], manifest_problem(r)) for r in results
             if "seconds" in r and manifest_problem(r)]
    died_wrongly = [r for r in results if "returncode" in r and r["returncode"] not in
                    ((-signal.SIGTERM,) if r["signal"] == "SIGTERM" else (-signal.SIGINT, 1))]
    longest = max((r["seconds"] for r in results if "seconds" in r), default=None)
    flushes = [r["seconds"] for r in results if "seconds" in r and "returncode" not in r]
    exits = [r["seconds"] for r in results if "seconds" in r and "returncode" in r]
    per_unit = {unit: f"{sum('hung' in r for r in results if r['unit'] == unit)}/"
                      f"{sum(r['unit'] == unit for r in results)}" for unit in UNITS}
    summary = (f"{len(results)} signals (seed {seed}): {len(hung)} hung (per unit {per_unit}), "
               f"{len(crashed)} crashed, {len(wrong)} manifests wrong; longest round end "
               f"{max(flushes, default=0):.2f} s, longest process exit "
               f"{max(exits, default=0):.2f} s")
    slowest = sorted((r for r in results if "seconds" in r), key=lambda r: -r["seconds"])[:3]
    print(summary + "; slowest: " + ", ".join(
        f"{r['unit']} {r['signal']} {r['seconds']:.2f} s" for r in slowest))
    assert not hung, summary + "\n" + "\n\n".join(
        f"{r['unit']} {r['signal']}:\n{r['hung']}" for r in hung[:3])
    assert not crashed, summary + "\n" + "\n\n".join(
        f"{r['unit']} {r['signal']}:\n{r['crashed']}" for r in crashed[:3])
    assert not wrong, summary + f"\n{wrong[:10]}"
    assert not died_wrongly, died_wrongly
    assert longest is not None and longest < BOUND_S
