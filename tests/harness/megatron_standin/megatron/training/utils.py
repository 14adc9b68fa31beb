"""Rank-aware printing, as Megatron-LM's training utilities offer it."""

import torch


def is_last_rank():
    return torch.distributed.get_rank() == torch.distributed.get_world_size() - 1


def print_rank_0(message):
    if not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0:
        print(message, flush=True)


def print_rank_last(message):
    if not torch.distributed.is_initialized() or is_last_rank():
        print(message, flush=True)


def unwrap_model(model):
    """The bare module under DDP-style wrappers (anything with ``.module``)."""
    while hasattr(model, "module"):
        model = model.module
    return model
