"""Model, optimizer, scheduler and data iterators for the stand-in's ``pretrain``.

Megatron-LM keeps these in ``training.py``; they live apart here so the loop stays readable, and
``training`` imports them by name so ``megatron.training.training.get_model`` still exists.
"""

import torch
from megatron.core import mpu
from megatron.core.distributed import DistributedDataParallel as DDP
from megatron.core.distributed import DistributedDataParallelConfig
from megatron.core.enums import ModelType
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
from megatron.core.utils import get_model_config

from megatron.training.checkpointing import load_checkpoint
from megatron.training.global_vars import get_args
from megatron.training.utils import print_rank_0


def update_train_iters(args):
    # --train-samples runs learn their iteration count only here, after argument validation.
    args.train_iters = args.train_samples // args.global_batch_size
    print_rank_0(f"setting training iterations to {args.train_iters}")


def get_model(model_provider_func, model_type=ModelType.encoder_or_decoder, wrap_with_ddp=True):
    vpp = get_args().virtual_pipeline_model_parallel_size
    if vpp is None:
        model = [model_provider_func(pre_process=mpu.is_pipeline_first_stage(),
                                     post_process=mpu.is_pipeline_last_stage())]
    else:  # one model chunk per virtual stage, as upstream
        model = [model_provider_func(
            pre_process=mpu.is_pipeline_first_stage(ignore_virtual=False, vp_stage=i),
            post_process=mpu.is_pipeline_last_stage(ignore_virtual=False, vp_stage=i),
            vp_stage=i) for i in range(vpp)]
    for chunk in model:
        chunk.model_type = model_type
    if wrap_with_ddp:
        ddp_config = DistributedDataParallelConfig(grad_reduce_in_fp32=False,
                                                   overlap_grad_reduce=False)
        model = [DDP(config=get_model_config(chunk), ddp_config=ddp_config, module=chunk)
                 for chunk in model]
    return model


def get_optimizer_param_scheduler(optimizer):
    args = get_args()
    if args.train_iters is None:
        update_train_iters(args)
    return OptimizerParamScheduler(
        optimizer,
        init_lr=args.lr_warmup_init,
        max_lr=args.lr,
        min_lr=args.min_lr,
        lr_warmup_steps=args.lr_warmup_iters * args.global_batch_size,
        lr_decay_steps=(args.lr_decay_iters or args.train_iters) * args.global_batch_size,
        lr_decay_style=args.lr_decay_style,
        start_wd=args.weight_decay,
        end_wd=args.weight_decay,
        wd_incr_steps=args.train_iters * args.global_batch_size,
        wd_incr_style="constant",
    )


def setup_model_and_optimizer(model_provider_func, model_type, checkpointing_context=None):
    args = get_args()
    model = get_model(model_provider_func, model_type)
    optimizer_config = OptimizerConfig(
        optimizer=args.optimizer,
        lr=args.lr,
        min_lr=args.min_lr,
        weight_decay=args.weight_decay,
        adam_beta1=args.adam_beta1,
        adam_beta2=args.adam_beta2,
        adam_eps=args.adam_eps,
        clip_grad=args.clip_grad,
        params_dtype=args.params_dtype,
    )
    optimizer = get_megatron_optimizer(optimizer_config, model)
    opt_param_scheduler = get_optimizer_param_scheduler(optimizer)
    if args.load is not None:
        args.iteration, args.num_floating_point_operations_so_far = load_checkpoint(
            model, optimizer, opt_param_scheduler
        )
    else:
        args.iteration = 0
    return model, optimizer, opt_param_scheduler


class _PretrainingBatchSampler:
    """Megatron's pretraining sampler order: each data-parallel rank takes its own slice of
    consecutive global batches, starting after the samples a checkpoint already consumed."""

    def __init__(self, dataset_size, consumed_samples):
        args = get_args()
        self.size = args.micro_batch_size
        self.stride = self.size * mpu.get_data_parallel_world_size()
        self.first = consumed_samples + mpu.get_data_parallel_rank() * self.size
        self.dataset_size = dataset_size

    def __iter__(self):
        first = self.first
        while True:
            yield [i % self.dataset_size for i in range(first, first + self.size)]
            first += self.stride


def _micro_batches(dataset, consumed_samples):
    """Micro-batches as Megatron's ``build_pretraining_data_loader`` makes them: a DataLoader
    with ``--num-workers`` worker processes (upstream's default is 2), persistent like
    upstream's, so a signal sent to the whole job reaches worker processes too. ``0`` loads in
    the training process."""
    num_workers = get_args().num_workers
    loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=_PretrainingBatchSampler(len(dataset), consumed_samples),
        num_workers=num_workers, persistent_workers=num_workers > 0)
    return iter(loader)


def build_train_valid_test_data_iterators(build_train_valid_test_datasets_provider):
    args = get_args()
    evaluations = args.train_iters // args.eval_interval + 1 if args.eval_interval else 1
    num_samples = [
        args.train_iters * args.global_batch_size,
        evaluations * args.eval_iters * args.global_batch_size,
        args.eval_iters * args.global_batch_size,
    ]
    train_ds, valid_ds, test_ds = build_train_valid_test_datasets_provider(num_samples)
    args.do_train = train_ds is not None and args.train_iters > 0
    args.do_valid = valid_ds is not None and args.eval_iters > 0
    args.do_test = test_ds is not None and args.eval_iters > 0
    if args.virtual_pipeline_model_parallel_size is not None:
        # each model chunk reads its own iterator, as upstream (the schedule takes a list)
        chunks = range(args.virtual_pipeline_model_parallel_size)
        return (
            [_micro_batches(train_ds, args.consumed_train_samples) for _ in chunks]
            if args.do_train else None,
            [_micro_batches(valid_ds, 0) for _ in chunks] if args.do_valid else None,
            [_micro_batches(test_ds, 0) for _ in chunks] if args.do_test else None,
        )
    return (
        _micro_batches(train_ds, args.consumed_train_samples) if args.do_train else None,
        _micro_batches(valid_ds, 0) if args.do_valid else None,
        _micro_batches(test_ds, 0) if args.do_test else None,
    )

