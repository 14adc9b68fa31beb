"""Megatron-LM's own RL (``megatron/rl``, core_v0.15+, ``train_rl.py --perform-rl-step``).

Its ``train()`` collects rollouts (``rl_utils.get_environment_rollouts``, the dynamic inference
engine) and computes log-probs (``rl_utils.prepare_data_for_update``) inside the data-iterator
call that precedes ``train_step``: ``get_grpo_data_iterator`` (0.16+) or
``setup_grpo_data_iterator`` (0.15). The ``train_step`` hook alone would profile only the policy
update, so here the iteration begins at that data-iterator call (``step_begin`` is idempotent for
one iteration, the ``train_step`` hook's own call then does nothing) and the three parts are
labelled ranges of the iteration's session: ``stage:rollout``, ``stage:logprobs``,
``stage:update``. All three functions are module globals of ``rl_utils`` looked up at call time,
so wrapping the module attribute is enough. Without ``megatron.rl`` (the megatron-core wheel
lacks it) or without ``--perform-rl-step`` nothing here runs.

``rl_utils.rl_inference_interface_shutdown`` ends the process with ``os._exit(0)`` (0.19: its
front ends keep non-daemon threads). Megatron calls it at the end of ``pretrain`` (after
``train()`` returned and closed the driver, its last trace possibly still being exported in the
background) and on ``train()``'s own exit path (``--exit-interval``, ``--exit-duration-in-mins``,
the exit-signal handler), where ``train()``'s ``finally`` never runs. ``os._exit`` runs no
``finally``, no ``atexit`` and kills every thread: so the driver is closed (inside ``train()``)
and its export waited for, bounded, before the shutdown.
"""

import functools
import sys

from mindspeed_prof import log
from mindspeed_prof.drivers.roles import STAGE_RANGE
from mindspeed_prof.patches import sigterm
from mindspeed_prof.patches.state import registry, state

RL_UTILS = "megatron.rl.rl_utils"
ITERATORS = ("get_grpo_data_iterator", "setup_grpo_data_iterator")  # 0.16+, 0.15
UPDATE_RANGE = STAGE_RANGE.format(name="update")
SHUTDOWN = "rl_inference_interface_shutdown"
# How the manifest says the run ended when megatron.rl's shutdown runs inside train(): Megatron's
# exit path, which would sys.exit next, but os._exit(0) ends the process first.
SHUTDOWN_EXIT = ("sys.exit",
                 "exit code 0 (os._exit in megatron.rl's rl_inference_interface_shutdown)")


def _curr_iteration():
    from megatron.training.global_vars import get_args
    return get_args().curr_iteration


def mindspeed_prof_rl_iteration_wrapper(get_data_iterator):
    @functools.wraps(get_data_iterator)
    def rl_iteration_with_profiler(*args, **kwargs):
        if state.training:  # once per iteration, not per step of the work
            state.update_range = UPDATE_RANGE  # the train_step hook labels the update from now on
            state.manager.begin(_curr_iteration() + 1)  # the logged number, as train_step's hook
        return get_data_iterator(*args, **kwargs)

    return rl_iteration_with_profiler


def _stage_wrapper(stage):
    label = STAGE_RANGE.format(name=stage)

    def wrapper(func):
        @functools.wraps(func)
        def with_stage_range(*args, **kwargs):
            with state.manager.range(label):  # the null driver's range where nothing records
                return func(*args, **kwargs)

        return with_stage_range

    wrapper.__name__ = f"mindspeed_prof_rl_{stage}_wrapper"
    return wrapper


mindspeed_prof_rl_rollout_wrapper = _stage_wrapper("rollout")
mindspeed_prof_rl_logprobs_wrapper = _stage_wrapper("logprobs")

def mindspeed_prof_rl_shutdown_wrapper(shutdown):
    @functools.wraps(shutdown)
    def shutdown_after_flush(*args, **kwargs):
        manager = state.finished_manager  # the last profiled train()'s driver, if any
        if manager is not None:
            if not manager.closed:  # inside train(): its finally will never run
                manager.close(*SHUTDOWN_EXIT, wait_timeout=sigterm.FLUSH_TIMEOUT_S)
            elif not manager.wait(sigterm.FLUSH_TIMEOUT_S):
                log.error(f"megatron.rl ends the process (os._exit) while the trace was still "
                          f"being written after {sigterm.FLUSH_TIMEOUT_S} s; it is incomplete",
                          rank=manager.rank)
        return shutdown(*args, **kwargs)

    return shutdown_after_flush


STAGES = {
    "get_environment_rollouts": mindspeed_prof_rl_rollout_wrapper,
    "prepare_data_for_update": mindspeed_prof_rl_logprobs_wrapper,
}


def hook_rl_loop():
    """Patch megatron.rl's iteration and stages when Megatron's training imported it (it does so
    at import when the package is there). Returns the targets patched."""
    rl_utils = sys.modules.get(RL_UTILS)
    if rl_utils is None:
        return []
    wanted = {name: mindspeed_prof_rl_iteration_wrapper for name in ITERATORS}
    wanted.update(STAGES)
    wanted[SHUTDOWN] = mindspeed_prof_rl_shutdown_wrapper
    targets = []
    for name, wrapper in wanted.items():
        if callable(getattr(rl_utils, name, None)):
            target = f"{RL_UTILS}.{name}"
            registry.register(target, wrapper)
            registry.ensure(target)
            targets.append(target)
    return targets
