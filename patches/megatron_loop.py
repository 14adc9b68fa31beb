"""Megatron's training loop: ``train`` owns the manager's life, ``train_step`` feeds it iterations.

``train`` is wrapped in try/finally because every way out of Megatron's loop (return,
``sys.exit`` from ``--exit-interval``/``--exit-duration-in-mins``/the signal handler, an
exception) leaves through it; the manager is created per ``train()`` call so an in-process
restart gets a fresh one. ``train_step`` passes its arguments and its result through untouched
(4-, 7- or 8-tuples across versions) and only tells the manager which iteration runs.
"""

import functools
import sys

from mindspeed_prof.config import ranks
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.recording.exits import exit_reason
from mindspeed_prof.drivers.base import NULL_DRIVER
from mindspeed_prof.drivers.training import TrainingDriver
from mindspeed_prof.patches import sigterm
from mindspeed_prof.patches.state import registry, state, usage_exit
from mindspeed_prof.patches.topology import (distributed_args, pipeline_args, rank_and_world,
                                             rank_layout)
from mindspeed_prof.config.window import train_limit

TRAIN = "megatron.training.training.train"
TRAIN_STEP = "megatron.training.training.train_step"
LLM_TRAIN = "mindspeed_llm.training.training.train"


def _get_args():
    from megatron.training.global_vars import get_args
    return get_args()


def _logged_iteration(args, kwargs):
    """The number the training log prints for this step: 0.16+ passes the loop counter as
    ``iteration=``, earlier versions set ``args.curr_iteration``."""
    iteration = kwargs.get("iteration")
    if iteration is None:
        iteration = _get_args().curr_iteration
    return iteration + 1


def mindspeed_prof_train_step_wrapper(train_step):
    @functools.wraps(train_step)
    def train_step_with_profiler(*args, **kwargs):
        # NULL_DRIVER unless a profiled train() runs here: then just train_step. The label is
        # megatron.rl's (the policy update is one stage of its iteration), else None.
        return state.manager.run(_logged_iteration, state.update_range, train_step, args, kwargs)

    return train_step_with_profiler


def mindspeed_prof_train_wrapper(train):
    @functools.wraps(train)
    def train_with_profiler(*args, **kwargs):
        config = state.config
        if config is None or not config.profile or state.training:
            return train(*args, **kwargs)
        state.train_hooked = True
        manager = _start_manager(config, _get_args())
        state.training, state.finished_manager = True, manager
        # Ranks that record nothing keep the null driver: train_step passes straight through.
        state.manager = NULL_DRIVER if manager.idle else manager
        reason, detail = "finished", None
        try:
            return train(*args, **kwargs)
        except BaseException as exc:
            reason, detail = exit_reason(type(exc), exc)
            raise
        finally:
            state.manager, state.training = NULL_DRIVER, False
            # After a normal return Megatron runs collectives (final checkpoint, validation and
            # test): a profiled rank still waiting here for its background export would make
            # every other rank wait in them, and time out. The export thread is not a daemon:
            # the process ends when it has written the trace and the final manifest.
            # On the other ways out the wait is bounded, since SIGTERM/SIGINT wait for it
            # (close runs inside exits.final_flush, which holds them until the manifest is final).
            manager.close(reason, detail, wait=reason != "finished",
                          wait_timeout=sigterm.FLUSH_TIMEOUT_S)

    return train_with_profiler


def _start_manager(config, args):
    rank, world = rank_and_world(args)
    try:
        layout = rank_layout(world) if ranks.needs_topology(config.profile_ranks) else None
        manager = TrainingDriver(config, rank=rank, world_size=world,
                                  local_rank=getattr(args, "local_rank", None), layout_of=layout,
                                  parallel={**distributed_args(args, rank, world),
                                            **pipeline_args(args)})
        # --train-samples runs: Megatron derived train_iters; messages name the flag given.
        train_iters = train_limit(args.train_iters, getattr(args, "train_samples", None))
        manager.arm(first_iteration=int(args.iteration) + 1, train_iters=train_iters,
                    exit_interval=getattr(args, "exit_interval", None))
    except ConfigError as exc:
        usage_exit(str(exc), rank=rank, show=rank == 0 or _rank_specific(exc))
    return manager


def _rank_specific(exc):
    return "--profile-save-path" in str(exc) or "--profile-backend" in str(exc)


def hook_training_loop():
    """Patch train/train_step (and MindSpeed-LLM's own train, which replaces Megatron's)."""
    registry.register(TRAIN, mindspeed_prof_train_wrapper)
    registry.register(TRAIN_STEP, mindspeed_prof_train_step_wrapper)
    targets = [TRAIN, TRAIN_STEP]
    # Only where MindSpeed-LLM's loop is already imported: importing it ourselves would run its
    # adaptor (its package imports it) in a plain Megatron or MindSpeed job. The registry does not
    # wrap it twice when wrapping Megatron's name already rebound it.
    if LLM_TRAIN.rsplit(".", 1)[0] in sys.modules:
        registry.register(LLM_TRAIN, mindspeed_prof_train_wrapper)
        targets.append(LLM_TRAIN)
    for target in targets:
        registry.ensure(target)
