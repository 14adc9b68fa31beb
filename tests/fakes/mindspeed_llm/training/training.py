"""Mirror of ``mindspeed_llm.training.training``: its ``train`` replaces Megatron's (the real one
is a copy of Megatron's loop; this one runs Megatron's) and starts MindSpeed-LLM's own loop
profiler when ``args.profile`` is on, here torch's on the CPU, so it fails beside mindspeed_prof's
as two real profilers on one thread do. Each call logs which mindspeed_prof wrappers sit on the
module's ``train`` (the name MindSpeed-LLM's ``pretrain`` calls)."""

import sys

import megatron.training.training as _megatron_training

from mindspeed._log import event
from mindspeed_prof.patches.registry import markers  # what the tests look at, not MindSpeed-LLM

# Imported from the adaptor right after remove_patches(): Megatron's own train.
_MEGATRON_TRAIN = _megatron_training.train


def train(*args, **kwargs):
    from megatron.training import get_args
    import torch

    event("llm_train", wrappers=markers(sys.modules[__name__].train))
    if not get_args().profile:
        return _MEGATRON_TRAIN(*args, **kwargs)
    event("llm_own_profiler_started")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        return _MEGATRON_TRAIN(*args, **kwargs)
