"""The two ways a window is profiled in figures 3 and 4: through mindspeed_prof's ``train_step``
hook, and by a hand-written ``torch.profiler`` loop with the same settings.

Loop counters are 0-based as in Megatron's loop; the hook numbers iterations as the log does
(counter + 1). A window opened at counter ``c`` has its warm-up iteration at ``c`` and records
counters ``c+1 .. c+active``; the profiler stops and exports inside the last of those.
"""

import torch

from mindspeed_prof import ProfilerConfig, ProfilerManager
from mindspeed_prof.patches.megatron_loop import mindspeed_prof_train_step_wrapper
from mindspeed_prof.patches.state import state


def hooked(train_step):
    """``train_step`` as the patched Megatron loop calls it."""
    return mindspeed_prof_train_step_wrapper(train_step)


def hook_window(save_dir, counter, active, analyse="async", lead=0):
    """Arm a manager (as the patched ``train()`` does) whose window records ``active`` steps,
    warming up at loop counter ``counter + lead``; the hook then reads it from the state."""
    first_logged = counter + 1
    start = first_logged + lead + 1
    config = ProfilerConfig(profile=True, profile_step_start=start,
                            profile_step_end=start + active, profile_backend="torch",
                            profile_save_path=save_dir, profile_analyse=analyse)
    manager = ProfilerManager(config, rank=0, world_size=1)
    manager.arm(first_iteration=first_logged, train_iters=None)
    hold(manager)
    return manager


def hold(manager):
    """Hand the hooks a driver as a profiled ``train()`` does: idle ranks keep the null one."""
    from mindspeed_prof.drivers.base import NULL_DRIVER

    state.manager = NULL_DRIVER if manager.idle else manager
    state.training = True


def release():
    from mindspeed_prof.drivers.base import NULL_DRIVER

    state.manager, state.training = NULL_DRIVER, False


def end_hook_window(manager):
    """``train()``'s finally: wait for the export, write the manifest, forget the manager."""
    release()
    manager.close("finished")


def hand_written(save_path, active):
    """What a user would write with torch.profiler and the same settings as the hook's backend:
    CPU activity, one warm-up step, ``active`` recorded steps, no shapes/memory/stack/flops/
    modules, the chrome trace exported when the schedule says so."""
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=active, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(save_path),
        record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
        with_modules=False)
