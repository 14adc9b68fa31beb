"""Figure 4 (window end): the steps around the profiler's stop on the profiled rank.

Megatron's default window (two recorded iterations) on the small megatron-core GPT, profiled
three ways whose windows alternate in one process: mindspeed_prof's hook with the default
``--profile-analyse async`` (the chrome trace is written by a forked child process), the hook
with ``sync`` (written inside the step), and, as the reference, a hand-written ``torch.profiler``
loop exporting from ``on_trace_ready``. Figure 7 does the heavy case (6 steps, shapes + stack). Each window is preceded by unprofiled steps (that window's
"normal" step) and followed by a few more. Reported, as medians over windows:

* the window-end step: the ``train_step`` call during which the profiler stops and exports;
* the first step after the window, which runs while an async export may still be writing.
"""

import os
import shutil
import tempfile

from .common import Row, figure_main, interleave_all, median, now_ns, spread_text
from .model import TinyGPT
from .profiled import end_hook_window, hand_written, hook_window, hooked

TARGET = 1.2
ACTIVE = 2  # Megatron's default window: --profile-step-start 10 --profile-step-end 12
LABELS = {"async": "async, default", "sync": "sync, for comparison",
          "hand": "hand-written torch.profiler, reference"}


def _trace_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)
               if name.endswith(".pt.trace.json"))


def _summary(times, lead):
    normal = median(times[:lead])
    end = lead + ACTIVE  # the step whose end stops the profiler
    return {"end": times[end] / normal, "after": times[end + 1] / normal,
            "recorded": median(times[lead + 1:end]) / normal, "normal_ms": normal / 1e6}


def measure(quick=False, model=None):
    """``model``: a TinyGPT to share with another figure (this one then leaves it open)."""
    windows, lead, after = (1, 4, 2) if quick else (10, 8, 3)
    steps = lead + 1 + ACTIVE + after
    owned = model is None
    model = TinyGPT() if owned else model
    bare = model.train_step
    wrapped = hooked(bare)
    counter = 0
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_end_")

    def by_hook(mode):
        def run(i):
            nonlocal counter
            save = os.path.join(tmp, f"{mode}{i}")
            manager = hook_window(save, counter, ACTIVE, analyse=mode, lead=lead)
            times = []
            for _ in range(steps):
                start = now_ns()
                model.step(wrapped, counter)
                times.append(now_ns() - start)
                counter += 1
            end_hook_window(manager)
            result = dict(_summary(times, lead), trace_mb=_trace_bytes(save) / 1e6)
            shutil.rmtree(save, ignore_errors=True)
            return result
        return run

    def by_hand(i):
        nonlocal counter
        save = os.path.join(tmp, f"hand{i}")
        os.makedirs(save)
        prof = hand_written(os.path.join(save, "rank0.pt.trace.json"), ACTIVE)
        times = []
        for j in range(steps):
            start = now_ns()
            if j == lead:
                prof.start()
            model.step(bare, counter)
            if j >= lead:
                prof.step()
            times.append(now_ns() - start)
            counter += 1
        prof.stop()
        result = dict(_summary(times, lead), trace_mb=_trace_bytes(save) / 1e6)
        shutil.rmtree(save, ignore_errors=True)
        return result

    try:
        for _ in range(5):
            model.step(wrapped, counter)
            counter += 1
        series = interleave_all([by_hook("async"), by_hook("sync"), by_hand], windows,
                                warmup=0 if quick else 1)
    finally:
        if owned:
            model.close()
        shutil.rmtree(tmp, ignore_errors=True)

    rows = []
    for mode, runs in zip(("async", "sync", "hand"), series):
        default = mode == "async"
        context = (f"{len(runs)} windows of {ACTIVE} recorded steps; normal step "
                   f"{median([r['normal_ms'] for r in runs]):.1f} ms; recorded step "
                   f"{median([r['recorded'] for r in runs]):.2f}x normal; trace "
                   f"{median([r['trace_mb'] for r in runs]):.1f} MB")
        for key, what in (("end", "window-end step (profiler stops, trace exported)"),
                          ("after", "first step after the window")):
            values = [r[key] for r in runs]
            value = median(values)
            rows.append(Row(
                figure=f"4 window end ({LABELS[mode]})", compared=f"{what} vs normal step",
                value=value, unit="x", spread=spread_text(values),
                target=f"<= {TARGET}" if default else "",
                ok=(value <= TARGET) if default else None, note=context))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
