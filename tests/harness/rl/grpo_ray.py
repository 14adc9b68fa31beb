"""The GRPO job of grpo.py with its roles as Ray actors, as verl runs them:
``python -m harness.rl.grpo_ray --config rl.yaml --steps 4 --report-dir D``.

The controller is Ray's driver (this process): it creates the actors, numbers the RL steps and
passes data between them, and computes nothing. Each actor is one role process; every method
call is one command, wrapped the way a verl worker method would be:

    with prof.step(global_step):      # the controller's step, sent with the call
        with prof.stage("update"):
            ...

so a role's RL step is entered once per method call (``role_profiler`` records each stage's
first occurrence in a step). Each actor also reports the threads its calls ran on: a profiler
session records only the thread that started it. A sync actor runs every call on its main
thread; with ``--max-concurrency N`` (a threaded actor) calls run on a pool of threads, which
works as long as each session starts and ends within one call (a selected stage's does).
"""

import argparse
import json
import os
import sys
import threading
import time

from harness.rl.grpo import ROLES, RoleWork, _free_port, rl_step

CALL_TIMEOUT_S = 180


def _cpu_device_mode():
    """The CPU harness's CUDA->CPU mode for this call: modes are thread-local, and a threaded
    actor runs calls on Ray's pool threads, which never entered it (the main thread has)."""
    import contextlib

    from harness import cpu_shim

    if threading.current_thread() is threading.main_thread():
        return contextlib.nullcontext()
    return cpu_shim.CpuDeviceMode()


class RoleActor:
    """One role process (a Ray actor): a verl-style worker whose methods are the commands."""

    def __init__(self, role, rank, world_size, port, config, total_steps):
        self.work = RoleWork(role, rank, world_size, port, config, total_steps)
        self.work.report["threads"] = []

    def call(self, step, command, payload=None):
        work = self.work
        with _cpu_device_mode(), work.prof.step(step):
            with work.prof.stage(command):
                result = work.run(command, payload, step)
        if step not in work.report["steps"]:
            work.report["steps"].append(step)
        work.report["stages"].append([step, command])
        thread = threading.current_thread().name
        if thread not in work.report["threads"]:
            work.report["threads"].append(thread)
        return result

    def finish(self, report_dir):
        self.work.finish(report_dir)
        return os.getpid()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="Role YAML for mindspeed_prof.")
    parser.add_argument("--steps", type=int, default=4, help="RL steps.")
    parser.add_argument("--report-dir", required=True)
    parser.add_argument("--max-concurrency", type=int, default=1,
                        help="Ray's per-actor threads: above 1, calls may run on any of them.")
    args = parser.parse_args(argv)
    os.makedirs(args.report_dir, exist_ok=True)
    import ray

    started = time.time()
    # Logical CPUs: one per role process, whatever this machine has.
    ray.init(num_cpus=sum(n for _, n in ROLES), include_dashboard=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    remote = ray.remote(RoleActor)
    actors = {}
    for role, world_size in ROLES:
        port = _free_port()
        for rank in range(world_size):
            actors[(role, rank)] = remote.options(
                num_cpus=1, name=f"{role}{rank}", max_concurrency=args.max_concurrency).remote(
                role, rank, world_size, port, args.config, args.steps)
    pids = {}
    try:
        for step in range(1, args.steps + 1):
            def ask(role, command, payload=None):
                calls = [actor.call.remote(step, command, payload)
                         for (name, _), actor in sorted(actors.items()) if name == role]
                return ray.get(calls, timeout=CALL_TIMEOUT_S)[0]
            rl_step(ask)
        done = {key: actor.finish.remote(args.report_dir) for key, actor in actors.items()}
        pids = {f"{role}{rank}": ray.get(ref, timeout=CALL_TIMEOUT_S)
                for (role, rank), ref in done.items()}
    finally:
        ray.shutdown()
    print(json.dumps({"driver_pid": os.getpid(), "actor_pids": pids,
                      "seconds": round(time.time() - started, 1)}))
    return 0 if len(pids) == len(actors) else 1


if __name__ == "__main__":
    sys.exit(main())
