"""Figure 3 (in the window): step time under mindspeed_prof vs a hand-written torch.profiler loop.

Both profile the same small megatron-core GPT in this process with identical settings (CPU
activity, one warm-up step, the same number of recorded steps, no extras). Windows alternate,
hook / hand-written / hook ..., each followed by unprofiled steps; the recorded steps before the
export step are compared (the export step is figure 4's business).
"""

import argparse
import os
import shutil
import tempfile

from .common import Row, emit_rows, interleave, median, now_ns, spread_text
from .model import TinyGPT
from .profiled import end_hook_window, hand_written, hook_window, hooked

TARGET = 1.03


def measure(quick=False):
    pairs, active = (2, 3) if quick else (16, 8)
    model = TinyGPT()
    bare = model.train_step
    wrapped = hooked(bare)
    counter = 0
    unprofiled = []
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_window_")

    def normal(n, record=True):
        nonlocal counter
        for _ in range(n):
            start = now_ns()
            model.step(bare, counter)
            if record:
                unprofiled.append(now_ns() - start)
            counter += 1

    def by_hand(i):
        nonlocal counter
        prof = hand_written(os.path.join(tmp, f"hand{i}.pt.trace.json"), active)
        times = []
        prof.start()
        for _ in range(active + 1):
            start = now_ns()
            model.step(bare, counter)
            prof.step()
            times.append(now_ns() - start)
            counter += 1
        prof.stop()
        normal(3)
        return times[1:active]

    def by_hook(i):
        nonlocal counter
        manager = hook_window(os.path.join(tmp, f"hook{i}"), counter, active)
        times = []
        for _ in range(active + 1):
            start = now_ns()
            model.step(wrapped, counter)
            times.append(now_ns() - start)
            counter += 1
        end_hook_window(manager)
        normal(3)
        return times[1:active]

    try:
        normal(5, record=False)
        a_runs, b_runs = interleave(by_hand, by_hook, pairs, warmup=0 if quick else 1)
    finally:
        model.close()
        shutil.rmtree(tmp, ignore_errors=True)
    a_steps = [t for run in a_runs for t in run]
    b_steps = [t for run in b_runs for t in run]
    ratio = median(b_steps) / median(a_steps)
    per_window = [median(b) / median(a) for a, b in zip(a_runs, b_runs)]
    profiler_cost = median(a_steps) / median(unprofiled)
    return [Row(
        figure="3 in window",
        compared="recorded step: mindspeed_prof hook vs hand-written torch.profiler loop",
        value=ratio, unit="x", spread=spread_text(per_window), target=f"<= {TARGET}",
        ok=ratio <= TARGET,
        note=(f"{len(a_steps)} recorded steps each side over {pairs} window pairs; hand-written "
              f"step {median(a_steps) / 1e6:.1f} ms; torch.profiler itself costs "
              f"{profiler_cost:.2f}x an unprofiled step ({median(unprofiled) / 1e6:.1f} ms)"))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    emit_rows(measure(parser.parse_args().quick))


if __name__ == "__main__":
    main()
