"""Where the window-end step goes: ``python -m benchmarks.window_end_breakdown [--stack]``.

A diagnostic, not part of the table: the same windows as figure 4 (or, with ``--stack``, figure
7's 6-step shapes + stack windows on its bigger model), with the functions that run at the
window's end timed per call and per thread (main thread = time the training loop waits).
Prints milliseconds per window, medians over the windows. Ways: ``async`` (default: export
thread), ``sync`` and a hand-written loop.
"""

import argparse
import functools
import os
import shutil
import statistics
import tempfile
import threading
import time

import torch.autograd.profiler as autograd_profiler
import torch.profiler.profiler as torch_profiler

from mindspeed_prof.recording import recorder as recorder_module
from mindspeed_prof.recording import manifest as manifest_module
from mindspeed_prof.backends import torch_backend

from .model import TinyGPT
from .profiled import end_hook_window, hand_written, hook_window, hooked
from . import window_end_stack
from .window_end import ACTIVE

PHASES = [
    (torch_profiler._KinetoProfile, "stop_trace", "torch: stop kineto, collect events"),
    (autograd_profiler, "_disable_profiler", "torch: of which kineto result building"),
    (torch_profiler._KinetoProfile, "export_chrome_trace", "torch: write the chrome trace"),
    (torch_backend.TorchBackend, "_on_trace_ready", "backend: trace-ready callback"),
    (recorder_module.WindowRecorder, "_on_saved", "recorder: file list + status"),
    (manifest_module.Manifest, "save", "manifest: write JSON"),
]
_records = []


def _timed(cls, name, label):
    original = getattr(cls, name, None)
    if original is None:  # moved or renamed since: time the rest
        return

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.perf_counter_ns()
        try:
            return original(*args, **kwargs)
        finally:
            main = threading.current_thread() is threading.main_thread()
            _records.append((label, main, (time.perf_counter_ns() - start) / 1e6))

    setattr(cls, name, timed)


def main(windows=6, lead=4, stack=False):
    for cls, name, label in PHASES:
        _timed(cls, name, label)
    active = window_end_stack.ACTIVE if stack else ACTIVE
    model = TinyGPT(extra_args=window_end_stack.BIG if stack else ())
    bare = model.train_step
    wrapped = hooked(bare)
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_breakdown_")
    counter = 0
    per_mode = {}
    try:
        for _ in range(5):
            model.step(bare, counter)
            counter += 1
        for i in range(windows):
            for mode in ("async", "sync", "hand"):
                _records.clear()
                save = os.path.join(tmp, f"{mode}{i}")
                if mode == "hand":
                    os.makedirs(save)
                    trace = os.path.join(save, "rank0.pt.trace.json")
                    prof = (window_end_stack._hand(trace) if stack
                            else hand_written(trace, ACTIVE))
                elif stack:
                    if mode == "sync":
                        continue  # as "async" here: the save holds the GIL either way
                    manager = window_end_stack._window(save, counter, lead)
                else:
                    manager = hook_window(save, counter, ACTIVE,
                                          analyse="sync" if mode == "sync" else "async",
                                          lead=lead)
                for j in range(lead + 1 + active + 1):
                    start = time.perf_counter_ns()
                    window_end_stack.window_step(model, j, lead, counter, wrapped,
                                                 prof if mode == "hand" else None)
                    if j == lead + active:
                        step_ms = (time.perf_counter_ns() - start) / 1e6
                        # only what ran during the window-end step
                        during = list(_records)
                    counter += 1
                if mode == "hand":
                    prof.stop()
                else:
                    end_hook_window(manager)
                totals = {"window-end step": step_ms}
                for label, main, ms in during:
                    key = f"{label} ({'main' if main else 'export thread'})"
                    totals[key] = totals.get(key, 0.0) + ms
                per_mode.setdefault(mode, []).append(totals)
                shutil.rmtree(save, ignore_errors=True)
    finally:
        model.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for mode, runs in per_mode.items():
        print(f"\n{mode}: ms during the window-end step, median of {len(runs)} windows")
        keys = sorted({k for run in runs for k in run}, key=lambda k: k != "window-end step")
        for key in keys:
            print(f"  {statistics.median([run.get(key, 0.0) for run in runs]):8.2f}  {key}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", action="store_true",
                        help="figure 7's windows: 6 steps, shapes + stack, bigger model")
    parser.add_argument("--windows", type=int, default=6)
    options = parser.parse_args()
    main(windows=options.windows, stack=options.stack)
