"""Figure 8 (captures armed, no anomaly): what --profile-on-slow-step / --profile-on-straggler
cost a step when nothing is anomalous, side by side with the flag off.

Two parts, each interleaved (ABAB...) in one run:

- **the hook per step** (one process, as figure 2): Megatron's ``train_step`` with an empty body
  through ``mindspeed_prof_train_step_wrapper``, on rank 0 of a one-rank job, with profiling on
  and its window far ahead, without and with a capture rule (the unit clock on every step, the
  rules judged at every 10th, ``--profile-trigger-poll``'s default; no collective in a one-rank
  job, so this is the arithmetic alone);
- **the poll's one collective** (two processes over gloo on 127.0.0.1): ``begin``/``end`` of a
  real recorder on both ranks with ``--profile-trigger-poll 1`` (a poll at every unit), for the
  trigger file alone (its broadcast, as before), the slow-step rule (the same broadcast, with
  the rule's evidence), the straggler rule (one all-gather instead) and profiling on without
  either (no poll): the difference is the poll's cost, paid once every poll interval. Also a
  one-float ``all_reduce`` without and with the ``Work.wait`` timing the straggler rule installs.
"""

import gc
import os
import socket
import sys
import tempfile

from .common import Row, figure_main, interleave, interleave_all, median, now_ns, spread_text

FAR = 10**8
POLL = 10
HOOK_TARGET_US = 2.0


def _manager(save, **knobs):
    from mindspeed_prof import ProfilerConfig, ProfilerManager

    config = ProfilerConfig(profile=True, profile_ranks=(0,), profile_step_start=FAR,
                            profile_step_end=FAR + 1, profile_backend="torch",
                            profile_save_path=save, **knobs)
    manager = ProfilerManager(config, rank=0, world_size=1)
    manager.arm(first_iteration=1, train_iters=2 * FAR)
    return manager


def _hook_rows(quick, tmp):
    from .hook_cost import _loop_0_16, train_step
    from .profiled import hold, release
    from mindspeed_prof.patches.megatron_loop import mindspeed_prof_train_step_wrapper

    n, reps = (20_000, 3) if quick else (200_000, 15)
    wrapped = mindspeed_prof_train_step_wrapper(train_step)
    off = _manager(tmp + "/off")
    on = _manager(tmp + "/on", profile_on_slow_step=NEVER, profile_trigger_poll=POLL,
                  profile_capture_warmup=0)
    # each side runs with its own manager in the hooks' hands
    def side(manager, base):
        def run(i):
            hold(manager)
            try:
                return _loop_0_16(wrapped, n, base + i * n)
            finally:
                release()
        return run

    a, b = interleave(side(off, 10), side(on, 10), reps, warmup=2)
    judged = on.recorder.poll.poller.spike.seen.judged
    off.close("finished")
    on.close("finished")
    added = [(tb - ta) / n / 1000 for ta, tb in zip(a, b)]
    value = median(added)
    return [Row(figure="8 captures", compared="hook per step: --profile-on-slow-step on vs off "
                "(rank 0, no anomaly, rules judged every 10th step, one-rank job)",
                value=value, unit="us/step", spread=spread_text(added, "{:.3f}"),
                target=f"<= {HOOK_TARGET_US:g} us", ok=value <= HOOK_TARGET_US,
                note=f"{reps} batches of {n} calls each side; flag off {median(a) / n:.0f} ns "
                     f"per call; {judged} steps judged, no capture")]


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Factors no jitter reaches: the rules judge as they would at any factor, and never capture.
NEVER = 1000.0
CASES = (
    ("profiling on, no trigger file, no rule (no poll)", {}),
    ("--profile-trigger-file alone (its broadcast)", {"profile_trigger_file": "T"}),
    ("--profile-on-slow-step (the same broadcast)", {"profile_on_slow_step": NEVER}),
    ("--profile-on-straggler (one all-gather)", {"profile_on_straggler": NEVER}),
    ("both rules and the trigger file (one all-gather)",
     {"profile_on_slow_step": NEVER, "profile_on_straggler": NEVER, "profile_trigger_file": "T"}),
)


def _rank_main(rank, port, tmp, units, reps, queue):
    import torch
    import torch.distributed as dist

    from mindspeed_prof import ProfilerConfig
    from mindspeed_prof.recording.recorder import WindowRecorder

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    recorders = []
    for index, (_, knobs) in enumerate(CASES):
        knobs = dict(knobs)
        if "profile_trigger_file" in knobs:
            knobs["profile_trigger_file"] = f"{tmp}/trigger{index}.json"
        config = ProfilerConfig(profile=True, profile_ranks=(0,), profile_step_start=FAR,
                                profile_step_end=FAR + 1, profile_backend="torch",
                                profile_save_path=f"{tmp}/case{index}",
                                profile_trigger_poll=1, profile_capture_warmup=0,
                                profile_max_captures=1, **knobs)
        recorder = WindowRecorder(config, rank=rank, world_size=2)
        recorder.arm(first=1, last=None)
        recorders.append(recorder)
    counters = [1] * len(CASES)

    def loop(index):
        def run(i):
            recorder, start = recorders[index], counters[index]
            dist.barrier()
            gc.disable()
            began = now_ns()
            for n in range(start, start + units):
                recorder.begin(n)
                recorder.end(n)
            elapsed = now_ns() - began
            gc.enable()
            counters[index] = start + units
            return elapsed / units
        return run

    per_unit = interleave_all([loop(i) for i in range(len(CASES))], reps, warmup=1)
    x = torch.zeros(1)

    def reduce(i):
        dist.barrier()
        began = now_ns()
        for _ in range(units):
            dist.all_reduce(x)
        return (now_ns() - began) / units

    from mindspeed_prof.control import exchange

    payload = {"request": None, "spike": None}
    calls = [lambda: dist.broadcast_object_list([payload], src=0),
             lambda: exchange.broadcast(payload, rank=rank, device=torch.device("cpu")),
             lambda: exchange.all_gather({"number": 0.1}, world_size=2,
                                         device=torch.device("cpu"))]

    def repeat(call):
        def run(i):
            dist.barrier()
            began = now_ns()
            for _ in range(units):
                call()
            return (now_ns() - began) / units
        return run

    raw = interleave_all([repeat(c) for c in calls] + [reduce], reps, warmup=1)
    for recorder in recorders:
        recorder.close("finished")
    dist.destroy_process_group()
    if rank == 0:
        queue.put((per_unit, raw))


def _poll_rows(quick, tmp):
    import torch.multiprocessing as mp

    units, reps = (50, 3) if quick else (400, 9)
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = _free_port()
    processes = [context.Process(target=_rank_main, args=(r, port, tmp, units, reps, queue))
                 for r in range(2)]
    for process in processes:
        process.start()
    per_unit, raw = queue.get(timeout=600)
    for process in processes:
        process.join(timeout=60)
    base = per_unit[0]
    rows = [Row(figure="8 captures", compared=f"2 ranks, gloo, a poll at every unit: {CASES[0][0]}",
                value=median(base) / 1000, unit="us/unit",
                spread=spread_text([v / 1000 for v in base], "{:.1f}"), target="",
                note=f"{reps} rounds of {units} units per case, interleaved; rank 0's times")]
    for (what, _), values in list(zip(CASES, per_unit))[1:]:
        added = [(b - a) / 1000 for a, b in zip(base, values)]
        value = median(added)
        rows.append(Row(figure="8 captures", compared=f"the poll's collective: {what}",
                        value=value, unit="us/poll", spread=spread_text(added, "{:.1f}"),
                        target="", note=f"per step at the default --profile-trigger-poll "
                                        f"{POLL}: {value / POLL:.1f} us"))
    reduce_us = median(raw[-1]) / 1000
    for what, values in zip(("broadcast_object_list (the trigger's broadcast before: 2 "
                             "collectives)", "exchange.broadcast (1 collective)",
                             "exchange.all_gather (1 collective)"), raw[:-1]):
        rows.append(Row(figure="8 captures", compared=f"one poll's exchange alone: {what}",
                        value=median(values) / 1000, unit="us",
                        spread=spread_text([v / 1000 for v in values], "{:.1f}"), target="",
                        note=f"{median(values) / 1000 / reduce_us:.2f}x a one-float all_reduce "
                             f"({reduce_us:.0f} us) in the same run"))
    return rows


def _wait_rows(quick):
    """The ``Work.wait`` timing alone: a one-rank gloo group, whose collectives never wait for
    anyone, so the difference is the wrapper's own cost per collective."""
    import torch
    import torch.distributed as dist

    from mindspeed_prof.control import collective_wait

    n, reps = (2_000, 3) if quick else (20_000, 15)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    x = torch.zeros(1)

    def reduce(timed):
        def run(i):
            if timed:
                collective_wait.install()
            gc.disable()
            began = now_ns()
            for _ in range(n):
                dist.all_reduce(x)
            elapsed = now_ns() - began
            gc.enable()
            if timed:
                collective_wait.uninstall()
            return elapsed / n
        return run

    plain, timed = interleave(reduce(False), reduce(True), reps, warmup=2)
    dist.destroy_process_group()
    added = [(b - a) / 1000 for a, b in zip(plain, timed)]
    return [Row(figure="8 captures", compared="Work.wait timing (--profile-on-straggler): "
                "one-float all_reduce with vs without, one-rank gloo group",
                value=median(added), unit="us/collective", spread=spread_text(added, "{:.2f}"),
                target="", note=f"{reps} batches of {n}; all_reduce without it "
                                f"{median(plain) / 1000:.1f} us")]


def measure(quick=False):
    with tempfile.TemporaryDirectory(prefix="mindspeed_prof_bench_captures_") as tmp:
        return _hook_rows(quick, tmp) + _wait_rows(quick) + _poll_rows(quick, tmp)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    figure_main(measure, __doc__)
