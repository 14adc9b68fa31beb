"""Figure 7 (window end, shapes + stack): the iterations around the stop of a 6-step window.

The heavy case: ``--profile-record-shapes --profile-with-stack`` over 6 recorded iterations, as
Megatron's own ``--use-pytorch-profiler`` records (shapes and stacks on). The megatron-core GPT
is made bigger than figures 3-4's (hidden 512, sequence 256: a normal step of about 0.4 s of
CPU) so that the trace's cost relative to a step is the one measured on the CPU Megatron loop
(issue 15: 6.0x). Three ways, windows alternating in one process:

* ``thread``: mindspeed_prof's default (``async``): the trace is written by a thread of the
  rank (kineto's save holds the GIL, so it mostly stalls the loop anyway);
* ``hand``: a hand-written ``torch.profiler`` loop exporting from ``on_trace_ready``.

Per window: the window-end step (the profiler stops and the trace is handed to the exporter)
and the two steps after it, each against that window's normal step, in wall time and in the
rank's CPU time (its threads; a forked child's CPU is reported beside it). Medians over windows.
"""

import os
import resource
import shutil
import tempfile

import torch


from .common import Row, clocks_ns, figure_main, interleave_all, median, since_ns, spread_text
from .model import TinyGPT
from .profiled import hold, hooked, release

TARGET = 1.5
ACTIVE = 6
BIG = ["--hidden-size", "512", "--ffn-hidden-size", "2048", "--seq-length", "256",
       "--max-position-embeddings", "256"]
LABELS = {"thread": "async, trace written by a thread (default)",
          "hand": "hand-written torch.profiler, reference"}


def _window(save_dir, counter, lead):
    """A manager whose shapes+stack window warms up at loop counter ``counter + lead``."""
    from mindspeed_prof import ProfilerConfig, ProfilerManager

    start = counter + 1 + lead + 1
    config = ProfilerConfig(profile=True, profile_step_start=start,
                            profile_step_end=start + ACTIVE, profile_backend="torch",
                            profile_save_path=save_dir, profile_record_shapes=True,
                            profile_with_stack=True)
    manager = ProfilerManager(config, rank=0, world_size=1)
    manager.arm(first_iteration=counter + 1, train_iters=None)
    hold(manager)
    return manager


def _hand(save_path):
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=ACTIVE, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(save_path),
        record_shapes=True, with_stack=True)


def window_step(model, j, lead, counter, wrapped, hand=None):
    """Loop step ``j`` of a window: through the hook (``wrapped``), or with ``hand``, a
    hand-written profiler started at step ``lead`` and stepped after each step from then on."""
    if hand is None:
        model.step(wrapped, counter)
        return
    if j == lead:
        hand.start()
    model.step(model.train_step, counter)
    if j >= lead:
        hand.step()


def _children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _trace_mb(folder):
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)
               if name.endswith(".pt.trace.json")) / 1e6


def measure(quick=False):
    windows, lead, after = (1, 2, 2) if quick else (7, 4, 2)
    model = TinyGPT(extra_args=() if quick else BIG)
    bare = model.train_step
    wrapped = hooked(bare)
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_stack_")
    counter = 0

    def run(mode):
        def window(i):
            nonlocal counter
            save = os.path.join(tmp, f"{mode}{i}")
            children = _children_cpu_s()
            if mode == "hand":
                os.makedirs(save)
                prof = _hand(os.path.join(save, "rank0.pt.trace.json"))
            else:
                manager = _window(save, counter, lead)
            walls, cpus, faults = [], [], []
            for j in range(lead + 1 + ACTIVE + after):
                faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
                start = clocks_ns()
                window_step(model, j, lead, counter, wrapped, prof if mode == "hand" else None)
                wall, cpu = since_ns(start)
                walls.append(wall)
                cpus.append(cpu)
                counter += 1
            if mode == "hand":
                prof.stop()
            else:
                release()
                manager.close("finished")  # waits for the export
            end = lead + ACTIVE  # the step whose end stops the profiler
            normal_wall, normal_cpu = median(walls[:lead]), median(cpus[:lead])
            result = {"end": walls[end] / normal_wall, "end_cpu": cpus[end] / normal_cpu,
                      "after1": walls[end + 1] / normal_wall,
                      "after1_cpu": cpus[end + 1] / normal_cpu,
                      # minor page faults of the step after vs a normal one: copy-on-write
                      # while a forked child still shares the rank's memory
                      "after1_faults": (faults[end + 2] - faults[end + 1])
                      - median([faults[k + 1] - faults[k] for k in range(lead - 1)]),
                      "after2": walls[end + 2] / normal_wall,
                      "normal_ms": normal_wall / 1e6, "normal_cpu_ms": normal_cpu / 1e6,
                      "child_cpu_s": _children_cpu_s() - children, "trace_mb": _trace_mb(save)}
            shutil.rmtree(save, ignore_errors=True)
            return result
        return window

    try:
        for _ in range(3):
            model.step(bare, counter)
            counter += 1
        series = interleave_all([run("thread"), run("hand")], windows,
                                warmup=0 if quick else 1)
    finally:
        model.close()
        shutil.rmtree(tmp, ignore_errors=True)

    rows = []
    for mode, runs in zip(("thread", "hand"), series):
        default = mode == "thread"
        context = (f"{len(runs)} windows of {ACTIVE} recorded steps, shapes + stack; normal step "
                   f"{median([r['normal_ms'] for r in runs]):.0f} ms wall, "
                   f"{median([r['normal_cpu_ms'] for r in runs]):.0f} ms CPU; trace "
                   f"{median([r['trace_mb'] for r in runs]):.0f} MB; CPU of forked export "
                   f"processes {median([r['child_cpu_s'] for r in runs]):.2f} s per window; "
                   f"extra page faults in the step after "
                   f"{median([r['after1_faults'] for r in runs]):.0f}")
        for key, what, gated in (
                ("end", "window-end step, wall", True),
                ("end_cpu", "window-end step, rank CPU", False),
                ("after1", "1st step after the window, wall", True),
                ("after1_cpu", "1st step after the window, rank CPU", False),
                ("after2", "2nd step after the window, wall", True)):
            values = [r[key] for r in runs]
            value = median(values)
            target = (TARGET if key == "end" else 1.2) if default and gated else None
            rows.append(Row(
                figure=f"7 window end, shapes+stack ({LABELS[mode]})",
                compared=f"{what} vs normal step", value=value, unit="x",
                spread=spread_text(values), target=f"<= {target}" if target else "",
                ok=(value <= target) if target else None, note=context))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
