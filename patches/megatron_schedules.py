"""Megatron's pipeline schedules, hooked: the three schedule families and the pieces they share
(forward/backward steps, p2p, gradient and parameter sync, the optimizer), registered once
profiling owns the job. The marks themselves: ``megatron_schedule_marks.py``; each family's
wrapper: ``megatron_schedule_{no_pipelining,1f1b,interleaved}.py``. This module is the only one
that imports them all, so the families and the marks import one way.
"""

from mindspeed_prof.patches import (megatron_schedule_1f1b, megatron_schedule_interleaved,
                                    megatron_schedule_no_pipelining)
from mindspeed_prof.patches.megatron_schedule_marks import shared_targets
from mindspeed_prof.patches.state import registry

FAMILIES = (megatron_schedule_no_pipelining, megatron_schedule_1f1b,
            megatron_schedule_interleaved)


def hook_schedules() -> None:
    """Register the schedule families and the pieces they share (profiling on only)."""
    try:
        targets = shared_targets()
    except ImportError:
        return  # no megatron-core pipeline package here: nothing to mark
    for family in FAMILIES:
        targets.append((family.TARGET, family.WRAPPER))
    for target, wrapper in targets:
        registry.register(target, wrapper)
        registry.ensure(target)
