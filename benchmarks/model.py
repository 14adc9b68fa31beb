"""The harness's small megatron-core GPT, built in this process (rank 0 of a gloo world of 1).

The model, optimizer, data and ``train_step`` are the ones the integration tests train: the CPU
stand-in for ``megatron.training`` over the real installed megatron-core, the tiny GPT of
``tests/harness/launch.default_args`` and its synthetic data. Only the loop is ours, so a figure
can time each call of ``train_step`` (bare, or wrapped by mindspeed_prof's hook) on its own.
One model per process: Megatron's globals and the CPU shim are process-wide.
"""

import importlib
import os
import socket
import sys

from .common import HARNESS_DIR, STANDIN_DIR


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TinyGPT:
    """``step(fn, iteration)`` runs one training iteration through ``fn`` (``train_step`` or a
    wrapper of it), called the way Megatron-LM 0.16 calls it; ``iteration`` is 0-based, as the
    loop counter is."""

    def __init__(self, extra_args=(), train_iters=100_000):
        for path in (STANDIN_DIR, HARNESS_DIR):
            if path not in sys.path:
                sys.path.insert(0, path)
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(_free_port()))
        os.environ.pop("HARNESS_REPORT_DIR", None)
        from launch import default_args

        sys.argv = ["pretrain_gpt.py", *default_args(train_iters=train_iters), *extra_args]
        importlib.import_module("megatron.training")  # installs the CPU shim
        import pretrain_gpt
        import torch
        from megatron.core.distributed import finalize_model_grads
        from megatron.core.enums import ModelType
        from megatron.core.pipeline_parallel import get_forward_backward_func
        from megatron.core.utils import get_model_config
        from megatron.training import training
        from megatron.training.global_vars import get_args
        from megatron.training.initialize import initialize_megatron
        from megatron.training.model_and_data import (build_train_valid_test_data_iterators,
                                                      setup_model_and_optimizer)

        torch.set_num_threads(1)
        initialize_megatron(args_defaults={"tokenizer_type": "GPT2BPETokenizer"})
        self.args = get_args()
        model, optimizer, scheduler = setup_model_and_optimizer(
            pretrain_gpt.model_provider, ModelType.encoder_or_decoder)
        data, _, _ = build_train_valid_test_data_iterators(
            pretrain_gpt.train_valid_test_datasets_provider)
        config = get_model_config(model[0])
        config.grad_scale_func = optimizer.scale_loss
        config.finalize_model_grads_func = finalize_model_grads
        for chunk in model:
            chunk.train()
        self.train_step = training.train_step
        self._step_args = (pretrain_gpt.forward_step, data, model, optimizer, scheduler, config)
        self._forward_backward = get_forward_backward_func()

    def step(self, fn, iteration):
        self.args.curr_iteration = iteration
        return fn(*self._step_args, self._forward_backward, iteration=iteration)

    def close(self):
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
