"""Figure 2 (armed, idle): what the ``train_step`` hook adds to a step when it does nothing.

A timeit-style micro-benchmark in one process: Megatron's ``train_step`` signature with an empty
body, called bare and through ``mindspeed_prof_train_step_wrapper`` with a live manager, in
alternating batches of many calls (garbage collector off, as timeit does). The difference per call
is the hook's cost per training step, for each idle state: rank not selected, selected but
before its window, selected and after it. Megatron-LM 0.16 passes ``iteration=``; up to 0.15 the
hook reads ``get_args().curr_iteration`` instead, measured as its own row.
"""

import gc
import importlib.machinery
import sys
import tempfile
import types

from .common import Row, figure_main, interleave, median, now_ns, spread_text
from mindspeed_prof import ProfilerConfig, ProfilerManager
from mindspeed_prof.patches.megatron_loop import mindspeed_prof_train_step_wrapper
from .profiled import hold, release

TARGET_US = 1.0
FAR = 10**8  # a window start no loop counter here reaches


def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config,
               forward_backward_func, iteration=None):
    return None


def train_step_0_15(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler,
                    config, forward_backward_func):
    return None


def _loop_0_16(fn, n, base):
    gc.disable()
    try:
        start = now_ns()
        for i in range(base, base + n):
            fn(None, None, None, None, None, None, None, iteration=i)
        return now_ns() - start
    finally:
        gc.enable()


def _loop_0_15(fn, n, base, args):
    gc.disable()
    try:
        start = now_ns()
        for i in range(base, base + n):
            args.curr_iteration = i
            fn(None, None, None, None, None, None, None)
        return now_ns() - start
    finally:
        gc.enable()


def _manager(save_dir, rank, ranks, start=FAR):
    config = ProfilerConfig(profile=True, profile_ranks=ranks, profile_step_start=start,
                            profile_step_end=start + 1, profile_backend="torch",
                            profile_save_path=save_dir)
    manager = ProfilerManager(config, rank=rank, world_size=2)
    manager.arm(first_iteration=1, train_iters=2 * FAR)
    return manager


def _past_window(manager, wrapped):
    """Run the (empty) window at iterations 1-2 so the manager is done with it."""
    hold(manager)
    for i in range(3):
        wrapped(None, None, None, None, None, None, None, iteration=i)
    return manager


def _added_ns(bare, wrapped, loop, n, reps, base):
    a, b = interleave(lambda i: loop(bare, n, base), lambda i: loop(wrapped, n, base), reps,
                      warmup=2)
    return [(tb - ta) / n for ta, tb in zip(a, b)], median(a) / n


def _loaded_module(name, package):
    """An empty module that looks imported to the import system: a spec no longer initialising
    (without it every ``from ... import`` raises and clears an AttributeError inside CPython)."""
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=package)
    module.__spec__._initializing = False
    if package:
        module.__path__ = []
    return module


def _megatron_args():
    """Megatron's global args where the hook looks them up (``megatron.training.global_vars``),
    in modules that are already imported, as they are by the time Megatron trains. Stand-ins, so
    this micro-benchmark need not import Megatron: what is measured is the hook's import
    statement and ``get_args()`` call, which cost the same whatever the modules hold."""
    class Args:
        curr_iteration = 0

    args = Args()
    names = ("megatron", "megatron.training", "megatron.training.global_vars")
    for name in names:
        if name in sys.modules:
            raise RuntimeError(f"{name} is already imported; run this figure in its own process")
        sys.modules[name] = _loaded_module(name, package=name != names[-1])
    sys.modules["megatron"].training = sys.modules["megatron.training"]
    sys.modules["megatron.training"].global_vars = sys.modules["megatron.training.global_vars"]
    sys.modules["megatron.training.global_vars"].get_args = lambda: args
    return args


def measure(quick=False):
    with tempfile.TemporaryDirectory(prefix="mindspeed_prof_bench_hook_") as tmp:
        return _measure(quick, tmp)


def _measure(quick, tmp):
    n, reps = (20_000, 3) if quick else (200_000, 15)
    wrapped = mindspeed_prof_train_step_wrapper(train_step)
    wrapped_0_15 = mindspeed_prof_train_step_wrapper(train_step_0_15)
    args = _megatron_args()
    loop_0_15 = (lambda fn, count, base: _loop_0_15(fn, count, base, args))
    cases = [
        ("profiling on, rank not selected", lambda: _manager(tmp + "/a", 0, (1,)),
         _loop_0_16, wrapped, train_step, 0),
        ("selected rank, before its window", lambda: _manager(tmp + "/b", 0, (0,)),
         _loop_0_16, wrapped, train_step, 0),
        ("selected rank, after its window",
         lambda: _past_window(_manager(tmp + "/c", 0, (0,), start=2), wrapped),
         _loop_0_16, wrapped, train_step, 10),
        ("rank not selected, Megatron <= 0.15 call", lambda: _manager(tmp + "/d", 0, (1,)),
         loop_0_15, wrapped_0_15, train_step_0_15, 0),
    ]
    rows = []
    for what, make, loop, hooked, bare, base in cases:
        manager = make()
        hold(manager)
        try:
            added, bare_ns = _added_ns(bare, hooked, loop, n, reps, base)
        finally:
            release()
            manager.close("finished")
        value = median(added) / 1000
        rows.append(Row(
            figure="2 armed, idle", compared=f"hook vs bare train_step: {what}",
            value=value, unit="us/step", spread=spread_text([x / 1000 for x in added], "{:.3f}"),
            target=f"<= {TARGET_US:g} us", ok=value <= TARGET_US,
            note=f"{reps} batches of {n} calls each side; bare call {bare_ns:.0f} ns"))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
