"""A short-unit loop of one unit kind that a test sends SIGTERM and SIGINT into at random moments.

    python tests/helpers/signal_storm.py UNIT SAVE_ROOT MODE

UNIT: ``iteration`` (``mindspeed_prof.profile``, a window every 2 iterations), ``rl-step``
(``role_profiler``, a session per RL step, a stage inside), ``request`` (the request driver, a
session per request) or ``engine-step`` (the engine-step driver, a window every 3 steps).

MODE ``rounds``: the host has a SIGTERM handler of its own that only notes the signal (as a
server that shuts down by itself does), and Ctrl-C is caught around the loop; after each signal
the loop leaves its profiler and starts a new one in a new save path, ``SAVE_ROOT/{k}``. The
program prints ``armed k`` once round k's profiler is recording units and ``ended k`` once the
signal ended the round, so one process receives many signals. MODE ``die``: one round with
Python's own handlers; the signal ends the process as it would any script. MODE ``fork``: many
such scripts, forked one after another from this process (see ``fork_scripts``).

Only public entry points are used, so the same program runs against older trees:
``SIGNAL_STORM_TREE=/path/to/checkout`` imports mindspeed_prof from there (a worktree of an older
commit) instead of the installed one.
"""

import faulthandler
import os
import signal
import sys
import time

import torch


def _import_from(tree: str) -> None:
    """mindspeed_prof (and its arguments/, patches/ folders) from ``tree``, ahead of the
    installed copy."""
    import importlib.util

    folders = {"mindspeed_prof": "mindspeed_prof", "mindspeed_prof.arguments": "arguments",
               "mindspeed_prof.patches": "patches"}

    class Tree:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name not in folders:
                return None
            folder = os.path.join(tree, folders[name])
            return importlib.util.spec_from_file_location(
                name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])

    sys.meta_path.insert(0, Tree)


if os.environ.get("SIGNAL_STORM_TREE"):
    _import_from(os.environ["SIGNAL_STORM_TREE"])

from mindspeed_prof import ProfilerConfig, profile, role_profiler
from mindspeed_prof.drivers.engine import EngineStepDriver
from mindspeed_prof.drivers.inference import RequestDriver

MAX_UNITS = 5000  # a round the parent never signals ends the program here
_x: list = []  # made on first use: MODE fork runs no torch operator before it forks


def say(line: str) -> None:
    """One line in one write: a forked script and this process share the pipe, and print()
    writes the text and its newline apart."""
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())


def work() -> None:
    if not _x:
        _x.append(torch.randn(32, 32))
    torch.mm(_x[0], _x[0]).sum()


def config(save: str, **window) -> ProfilerConfig:
    return ProfilerConfig(profile=True, profile_save_path=save, profile_backend="torch",
                          profile_ranks=(0,), **window)


class Round:
    """Round ``k``: its profiler, units until told to stop, then the profiler left."""

    stop = False  # the host's own SIGTERM handler sets it

    def __init__(self, unit: str, save: str, k: int) -> None:
        self.unit, self.save, self.k = unit, save, k

    def armed(self) -> None:
        say(f"armed {self.k}")

    def run(self) -> None:
        getattr(self, self.unit.replace("-", "_"))()

    def units(self):
        for n in range(1, MAX_UNITS + 1):
            if Round.stop:
                return
            yield n
        sys.exit(f"round {self.k}: no signal came in {MAX_UNITS} units")

    def iteration(self) -> None:
        with profile(config(self.save, profile_step_start=2, profile_step_end=3,
                            profile_every=2), rank=0, world_size=1) as prof:
            self.armed()
            for _ in self.units():
                work()
                prof.step()

    def rl_step(self) -> None:
        with role_profiler("actor", config(self.save, profile_step_start=1,
                                           profile_step_end=-1), rank=0, world_size=1) as prof:
            self.armed()
            for n in self.units():
                with prof.step(n):
                    with prof.stage("generate"):
                        work()
                    work()

    def request(self) -> None:
        driver = RequestDriver(config(self.save, profile_step_start=1, profile_step_end=-1))
        driver.arm()
        try:
            self.armed()
            for _ in self.units():
                with driver.request():
                    work()
        finally:
            driver.close(*_how(sys.exc_info()))

    def engine_step(self) -> None:
        driver = EngineStepDriver(config(self.save, profile_step_start=2, profile_step_end=4,
                                         profile_every=3))
        driver.arm()
        try:
            self.armed()
            for n in self.units():
                with driver.step(n):
                    with driver.forward(prefill=1, decode=0, tokens=8):
                        work()
        finally:
            driver.close(*_how(sys.exc_info()))


def _how(exc_info):
    from mindspeed_prof.recording.exits import exit_reason

    return exit_reason(exc_info[0], exc_info[1])


def main(unit: str, root: str, mode: str) -> None:
    faulthandler.register(signal.SIGUSR1)  # a process that hangs shows where, when asked
    signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the parent's shell did
    if mode == "die":
        Round(unit, os.path.join(root, "0"), 0).run()
        return
    if mode == "fork":
        fork_scripts(unit, root)
        return

    def host_handler(signum, frame):
        Round.stop = True

    signal.signal(signal.SIGTERM, host_handler)
    for k in range(10 ** 6):
        Round.stop = False
        try:
            Round(unit, os.path.join(root, str(k)), k).run()
        except KeyboardInterrupt:
            pass
        say(f"ended {k}")
        time.sleep(0)


def fork_scripts(unit: str, root: str) -> None:
    """MODE ``fork``: for each ``go k`` line on stdin, fork a plain script (as MODE ``die``, with
    this process's torch import spared) and say ``forked k PID``, then ``exited k CODE`` (minus
    the signal that ended it). Nothing of mindspeed_prof is armed here before a fork."""
    for line in sys.stdin:
        k = int(line.split()[1])
        sys.stdout.flush()  # nothing of this process printed twice by the fork
        pid = os.fork()
        if pid == 0:
            _script(Round(unit, os.path.join(root, str(k)), k))
        say(f"forked {k} {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"exited {k} "
            f"{-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)}")


def _script(round_: Round) -> None:
    """The forked child ends as a script would: exit handlers run, an uncaught Ctrl-C printed
    and re-raised as the signal, anything else an exit code."""
    import atexit
    import traceback

    code = 0
    try:
        round_.run()
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - the child's end, said on its stderr
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        if code == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


if __name__ == "__main__":
    main(*sys.argv[1:4])
