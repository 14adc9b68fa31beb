"""Megatron initialisation: arguments, process groups and seeds."""

import os
import random
from datetime import timedelta

import numpy as np
import torch
from megatron.core import mpu, tensor_parallel
from megatron.core.rerun_state_machine import RerunMode, initialize_rerun_state_machine

from megatron.training import _harness
from megatron.training.arguments import parse_args, validate_args
from megatron.training.global_vars import get_args, set_global_variables
from megatron.training.utils import print_rank_0

# Test-only: collectives time out after this many seconds instead of --distributed-timeout-minutes,
# so a test that hangs a rank fails in seconds.
PG_TIMEOUT_ENV = "HARNESS_PG_TIMEOUT_S"


def initialize_megatron(
    extra_args_provider=None,
    args_defaults={},
    ignore_unknown_args=False,
    allow_no_cuda=False,
    skip_mpu_initialization=False,
    get_embedding_ranks=None,
    get_position_embedding_ranks=None,
    parsed_args=None,
    store=None,
):
    """Set global variables, initialise torch.distributed and the model-parallel groups, seed.

    The real function asserts ``torch.cuda.is_available()`` unless ``allow_no_cuda``; the CPU
    stand-in cannot, and relies on the CPU shim instead.
    """
    if _harness.VERSION >= (0, 18):
        # 0.18+: the entry script already parsed and validated (parse_and_validate_args) and
        # published the args; initialize_megatron only reads them.
        args = get_args()
    else:
        # parse_args and validate_args are the names imported above, as in Megatron-LM: a
        # plugin must patch them here, in megatron.training.initialize, for this call to see it.
        if parsed_args is None:
            args = parse_args(extra_args_provider, ignore_unknown_args)
        else:
            args = parsed_args
        validate_args(args, args_defaults)
        set_global_variables(args)
    initialize_rerun_state_machine(mode=RerunMode.DISABLED)
    if skip_mpu_initialization:
        return None
    _initialize_distributed(get_embedding_ranks, get_position_embedding_ranks, store)
    print_rank_0(f"> setting random seeds to {args.seed} ...")
    _set_random_seed(args.seed, args.data_parallel_random_init)
    return None


def _process_group_timeout(args):
    seconds = os.environ.get(PG_TIMEOUT_ENV)
    if seconds:
        return timedelta(seconds=float(seconds))
    return timedelta(minutes=args.distributed_timeout_minutes)


def _initialize_distributed(get_embedding_ranks, get_position_embedding_ranks, store):
    args = get_args()
    timeout = _process_group_timeout(args)
    if not torch.distributed.is_initialized():
        init_kwargs = {"store": store} if store is not None else {}
        torch.distributed.init_process_group(
            backend=args.distributed_backend,
            world_size=args.world_size,
            rank=args.rank,
            timeout=timeout,
            **init_kwargs,
        )
    if not mpu.model_parallel_is_initialized():
        mpu.initialize_model_parallel(
            args.tensor_model_parallel_size,
            args.pipeline_model_parallel_size,
            virtual_pipeline_model_parallel_size=args.virtual_pipeline_model_parallel_size,
            # megatron-core builds timedelta(minutes=...) from it; a fraction keeps the override.
            distributed_timeout_minutes=timeout.total_seconds() / 60,
            get_embedding_ranks=get_embedding_ranks,
            get_position_embedding_ranks=get_position_embedding_ranks,
        )


def _set_random_seed(seed_, data_parallel_random_init=False):
    if seed_ is None or seed_ <= 0:
        raise ValueError(f"--seed {seed_} must be a positive integer")
    # Pipeline stages differ so their layers differ; data-parallel replicas agree unless asked.
    seed = seed_ + 100 * mpu.get_pipeline_model_parallel_rank()
    if data_parallel_random_init:
        seed += 10 * mpu.get_data_parallel_rank()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # Megatron skips this without a GPU; the shim makes the CUDA RNG tracker work on the CPU.
    tensor_parallel.model_parallel_cuda_manual_seed(seed)
