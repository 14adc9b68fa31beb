"""Process-wide singletons, reached through getters as in Megatron-LM."""

from megatron.core.num_microbatches_calculator import init_num_microbatches_calculator

from megatron.training.dist_signal_handler import DistributedSignalHandler

_GLOBAL_ARGS = None
_GLOBAL_SIGNAL_HANDLER = None


def get_args():
    return _GLOBAL_ARGS


def set_args(args):
    global _GLOBAL_ARGS
    _GLOBAL_ARGS = args


def get_signal_handler():
    return _GLOBAL_SIGNAL_HANDLER


def get_tensorboard_writer():
    # No SummaryWriter on CPU CI; --tensorboard-dir still feeds Megatron's torch profiler.
    return None


def set_global_variables(args, build_tokenizer=True):
    """Publish ``args`` and set up what depends only on them."""
    set_args(args)
    init_num_microbatches_calculator(
        args.rank,
        args.rampup_batch_size,
        args.global_batch_size,
        args.micro_batch_size,
        args.data_parallel_size,
        args.decrease_batch_size_if_needed,
    )
    if args.exit_signal_handler:
        global _GLOBAL_SIGNAL_HANDLER
        _GLOBAL_SIGNAL_HANDLER = DistributedSignalHandler().__enter__()
