"""Figure 3 (in the window): step time under mindspeed_prof vs a hand-written torch.profiler loop.

Both profile the same small megatron-core GPT in this process with identical settings (CPU
activity, one warm-up step, the same number of recorded steps, no extras). Windows alternate,
hook / hand-written / hook ..., each followed by unprofiled steps; the recorded steps before the
export step are compared (the export step is figure 4's business). Compared is the process CPU
time per step (no thread but the main one runs during those steps, so it is the step's work,
whatever other jobs on a shared machine do to wall time); the wall-time ratio is in the note. A
second hand-written series, in the same rotation, gives the A/A ratio: the noise to read it by.
"""

import os
import shutil
import tempfile

from .common import Row, clocks_ns, figure_main, interleave_all, median, since_ns, spread_text
from .model import TinyGPT
from .profiled import end_hook_window, hand_written, hook_window, hooked

TARGET = 1.03


def measure(quick=False, model=None):
    """``model``: a TinyGPT to share with another figure (this one then leaves it open)."""
    rounds, active = (2, 3) if quick else (16, 8)
    owned = model is None
    model = TinyGPT() if owned else model
    bare = model.train_step
    wrapped = hooked(bare)
    counter = 0
    unprofiled = []
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_window_")

    def normal(n, record=True):
        nonlocal counter
        for _ in range(n):
            start = clocks_ns()
            model.step(bare, counter)
            if record:
                unprofiled.append(since_ns(start))
            counter += 1

    def by_hand(i):
        nonlocal counter
        prof = hand_written(os.path.join(tmp, f"hand{i}.pt.trace.json"), active)
        times = []
        prof.start()
        for _ in range(active + 1):
            start = clocks_ns()
            model.step(bare, counter)
            prof.step()
            times.append(since_ns(start))
            counter += 1
        prof.stop()
        normal(3)
        return times[1:active]

    def by_hook(i):
        nonlocal counter
        manager = hook_window(os.path.join(tmp, f"hook{i}"), counter, active)
        times = []
        for _ in range(active + 1):
            start = clocks_ns()
            model.step(wrapped, counter)
            times.append(since_ns(start))
            counter += 1
        end_hook_window(manager)
        normal(3)
        return times[1:active]

    try:
        normal(5, record=False)
        a_runs, b_runs, aa_runs = interleave_all([by_hand, by_hook, by_hand], rounds,
                                                 warmup=0 if quick else 1)
    finally:
        if owned:
            model.close()
        shutil.rmtree(tmp, ignore_errors=True)
    def steps(runs, clock):
        return [t[clock] for run in runs for t in run]

    def per_window(clock, other=None):
        return [median([t[clock] for t in b]) / median([t[clock] for t in a])
                for a, b in zip(a_runs, other or b_runs)]

    cpu, wall = 1, 0
    ratio = median(steps(b_runs, cpu)) / median(steps(a_runs, cpu))
    wall_ratio = median(steps(b_runs, wall)) / median(steps(a_runs, wall))
    aa_ratio = median(steps(aa_runs, cpu)) / median(steps(a_runs, cpu))
    plain = [t[cpu] for t in unprofiled]
    return [Row(
        figure="3 in window",
        compared="recorded step (CPU time): mindspeed_prof hook vs hand-written torch.profiler",
        value=ratio, unit="x", spread=spread_text(per_window(cpu)), target=f"<= {TARGET}",
        ok=ratio <= TARGET,
        note=(f"{len(steps(a_runs, cpu))} recorded steps each side over {rounds} rounds; "
              f"hand-written step {median(steps(a_runs, cpu)) / 1e6:.1f} ms CPU, torch.profiler "
              f"itself costing {median(steps(a_runs, cpu)) / median(plain):.2f}x an unprofiled "
              f"step ({median(plain) / 1e6:.1f} ms); A/A (hand-written vs hand-written) "
              f"{aa_ratio:.3f} ({spread_text(per_window(cpu, aa_runs))}); wall-time ratio "
              f"{wall_ratio:.3f} ({spread_text(per_window(wall))})"))]


if __name__ == "__main__":
    figure_main(measure, __doc__)
