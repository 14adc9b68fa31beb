"""Minimal legacy-format checkpoints: enough for runs that resume at iteration > 0.

Layout mirrors Megatron-LM's torch format: ``{save}/iter_{N:07d}/mp_rank_{tp:02d}[_{pp:03d}]/
model_optim_rng.pt`` written by data-parallel rank 0 of each model-parallel slice, plus
``latest_checkpointed_iteration.txt`` naming the newest complete one.
"""

import os

import torch
from megatron.core import mpu

from megatron.training.global_vars import get_args
from megatron.training.utils import print_rank_0, unwrap_model

TRACKER_FILENAME = "latest_checkpointed_iteration.txt"


def get_checkpoint_name(checkpoints_path, iteration):
    slice_name = f"mp_rank_{mpu.get_tensor_model_parallel_rank():02d}"
    if mpu.get_pipeline_model_parallel_world_size() > 1:
        slice_name += f"_{mpu.get_pipeline_model_parallel_rank():03d}"
    return os.path.join(checkpoints_path, f"iter_{iteration:07d}", slice_name, "model_optim_rng.pt")


def save_checkpoint(
    iteration,
    model,
    optimizer,
    opt_param_scheduler,
    num_floating_point_operations_so_far,
    checkpointing_context=None,
    **kwargs,
):
    args = get_args()
    print_rank_0(f"saving checkpoint at iteration {iteration:7d} to {args.save}")
    if mpu.get_data_parallel_rank() == 0:
        state = {
            "iteration": iteration,
            "consumed_train_samples": args.consumed_train_samples,
            "num_floating_point_operations_so_far": num_floating_point_operations_so_far,
            "model": [unwrap_model(chunk).state_dict() for chunk in model],
            "opt_param_scheduler": opt_param_scheduler.state_dict(),
        }
        if not args.no_save_optim:
            state["optimizer"] = optimizer.state_dict()
        path = get_checkpoint_name(args.save, iteration)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
    # The tracker may only name an iteration once every slice of it is on disk.
    torch.distributed.barrier()
    if torch.distributed.get_rank() == 0:
        with open(os.path.join(args.save, TRACKER_FILENAME), "w") as f:
            f.write(str(iteration))
    torch.distributed.barrier()
    print_rank_0(f"  successfully saved checkpoint from iteration {iteration:7d} to {args.save}")


def read_tracker(checkpoints_path):
    """The newest complete iteration under ``checkpoints_path``, or None."""
    try:
        with open(os.path.join(checkpoints_path, TRACKER_FILENAME)) as f:
            return int(f.read().strip())
    except FileNotFoundError:
        return None


def load_checkpoint(model, optimizer, opt_param_scheduler, load_arg="load", strict=True, **kwargs):
    """Restore the newest checkpoint; returns (iteration, num_floating_point_operations_so_far)."""
    args = get_args()
    load_dir = getattr(args, load_arg)
    iteration = read_tracker(load_dir)
    if iteration is None:
        print_rank_0(f"WARNING: could not find the metadata file {TRACKER_FILENAME} in {load_dir}; "
                     "starting from scratch")
        return 0, 0
    state = torch.load(get_checkpoint_name(load_dir, iteration), weights_only=False)
    for chunk, chunk_state in zip(model, state["model"]):
        unwrap_model(chunk).load_state_dict(chunk_state, strict=strict)
    if optimizer is not None and not args.no_load_optim and "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    if opt_param_scheduler is not None:
        opt_param_scheduler.load_state_dict(state["opt_param_scheduler"])
    args.consumed_train_samples = state["consumed_train_samples"]
    print_rank_0(f"  successfully loaded checkpoint from {load_dir} at iteration {iteration}")
    return iteration, state["num_floating_point_operations_so_far"]
