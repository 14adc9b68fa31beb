"""Megatron-LM's command line, reduced to what the CPU stand-in can honour.

Names, types and defaults follow Megatron-LM 0.12-0.19. ``parse_args`` finds
``add_megatron_arguments`` and the caller's ``extra_args_provider`` at call time and parses
strictly, as the real one does, so a plugin that wraps it sees the real shape. From 0.17 the
profiling flags come from the ``ProfilingConfig`` dataclass (``--profile-ranks`` defaults to
``[]``: every rank); from 0.18 entry scripts call ``parse_and_validate_args`` themselves and
``initialize_megatron`` parses nothing.
"""

import argparse
import os

import torch
from megatron.core.transformer.transformer_config import TransformerConfig

from megatron.training import _harness


if _harness.VERSION >= (0, 18):

    def parse_and_validate_args(extra_args_provider=None, ignore_unknown_args=False,
                                args_defaults={}):
        """Parse, validate and publish the arguments (0.18+: the entry script calls this)."""
        from megatron.training.global_vars import set_global_variables

        # Module globals looked up at call time, as upstream: a plugin's wrappers run.
        args = parse_args(extra_args_provider, ignore_unknown_args)
        validate_args(args, args_defaults)
        set_global_variables(args)
        return args


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    """Parse all arguments."""
    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    parser = add_megatron_arguments(parser)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    if ignore_unknown_args:
        args, _ = parser.parse_known_args()
    else:
        args = parser.parse_args()
    args.rank = int(os.getenv("RANK", "0"))
    args.world_size = int(os.getenv("WORLD_SIZE", "1"))
    return args


def add_megatron_arguments(parser):
    for add_group in (
        _add_network_size_args,
        _add_regularization_args,
        _add_training_args,
        _add_initialization_args,
        _add_learning_rate_args,
        _add_checkpointing_args,
        _add_distributed_args,
        _add_validation_args,
        _add_data_args,
        _add_tokenizer_args,
        _add_logging_args,
        _add_transformer_engine_args,
        _add_inprocess_restart_args,
    ):
        parser = add_group(parser)
    return parser


def _add_network_size_args(parser):
    group = parser.add_argument_group(title="network size")
    group.add_argument("--num-layers", type=int, default=None)
    group.add_argument("--hidden-size", type=int, default=None)
    group.add_argument("--ffn-hidden-size", type=int, default=None)
    group.add_argument("--num-attention-heads", type=int, default=None)
    group.add_argument("--kv-channels", type=int, default=None)
    group.add_argument("--max-position-embeddings", type=int, default=None)
    group.add_argument(
        "--position-embedding-type",
        type=str,
        default="learned_absolute",
        choices=["learned_absolute", "rope", "none"],
    )
    group.add_argument("--normalization", default="LayerNorm", choices=["LayerNorm", "RMSNorm"])
    group.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    group.add_argument("--untie-embeddings-and-output-weights", action="store_true")
    return parser


def _add_regularization_args(parser):
    group = parser.add_argument_group(title="regularization")
    group.add_argument("--attention-dropout", type=float, default=0.1)
    group.add_argument("--hidden-dropout", type=float, default=0.1)
    group.add_argument("--weight-decay", type=float, default=0.01)
    group.add_argument("--clip-grad", type=float, default=1.0)
    group.add_argument("--adam-beta1", type=float, default=0.9)
    group.add_argument("--adam-beta2", type=float, default=0.999)
    group.add_argument("--adam-eps", type=float, default=1e-08)
    return parser


def _add_profiling_args(group):
    # Exactly Megatron's flags: a plugin must reuse them, and re-adding one must conflict.
    group.add_argument("--profile", action="store_true", help="Enable nsys profiling.")
    group.add_argument("--profile-step-start", type=int, default=10,
                       help="Global step to start profiling.")
    group.add_argument("--profile-step-end", type=int, default=12,
                       help="Global step to stop profiling.")
    group.add_argument("--use-pytorch-profiler", action="store_true", dest="use_pytorch_profiler",
                       help="Use the built-in pytorch profiler.")
    group.add_argument("--profile-ranks", nargs="+", type=int, default=[0],
                       help="Global ranks to profile.")
    group.add_argument("--record-memory-history", action="store_true", default=False)
    group.add_argument("--memory-snapshot-path", type=str, default="snapshot.pickle")


def _add_training_args(parser):
    if _harness.VERSION >= (0, 17):
        # 0.17+ build every profiling flag from megatron/training/config's ProfilingConfig.
        from megatron.training.argument_utils import ArgumentGroupFactory
        from megatron.training.config import ProfilingConfig

        ArgumentGroupFactory(ProfilingConfig).build_group(parser, "profiling")
    elif _harness.VERSION >= (0, 16):
        # 0.16 builds these from its ProfilingConfig dataclass, in a group of their own.
        _add_profiling_args(parser.add_argument_group(title="profiling"))
    group = parser.add_argument_group(title="training")
    if _harness.VERSION < (0, 16):
        _add_profiling_args(group)
    group.add_argument("--micro-batch-size", type=int, default=None)
    group.add_argument("--global-batch-size", type=int, default=None)
    group.add_argument("--train-iters", type=int, default=None)
    group.add_argument("--train-samples", type=int, default=None)
    group.add_argument("--exit-interval", type=int, default=None)
    group.add_argument("--exit-duration-in-mins", type=int, default=None)
    group.add_argument("--exit-signal-handler", action="store_true")
    group.add_argument("--iterations-to-skip", nargs="+", type=int, default=[])
    group.add_argument("--use-cpu-initialization", action="store_true", default=None)
    group.add_argument("--optimizer", type=str, default="adam", choices=["adam", "sgd"])
    for fusion in ("masked_softmax", "bias_gelu", "bias_dropout", "gradient_accumulation"):
        group.add_argument(f"--no-{fusion.replace('_', '-')}-fusion", action="store_false",
                           dest=f"{fusion}_fusion")
    group.add_argument("--no-persist-layer-norm", action="store_true")
    return parser


def _add_initialization_args(parser):
    group = parser.add_argument_group(title="initialization")
    group.add_argument("--seed", type=int, default=1234)
    group.add_argument("--data-parallel-random-init", action="store_true")
    group.add_argument("--init-method-std", type=float, default=0.02)
    return parser


def _add_learning_rate_args(parser):
    group = parser.add_argument_group(title="learning rate")
    group.add_argument("--lr", type=float, default=None)
    group.add_argument("--lr-decay-style", type=str, default="linear",
                       choices=["constant", "linear", "cosine"])
    group.add_argument("--lr-decay-iters", type=int, default=None)
    group.add_argument("--lr-warmup-iters", type=int, default=0)
    group.add_argument("--lr-warmup-init", type=float, default=0.0)
    group.add_argument("--min-lr", type=float, default=0.0)
    return parser


def _add_checkpointing_args(parser):
    group = parser.add_argument_group(title="checkpointing")
    group.add_argument("--save", type=str, default=None)
    group.add_argument("--save-interval", "--persistent-save-interval", type=int, default=None)
    group.add_argument("--no-save-optim", action="store_true", default=None)
    group.add_argument("--load", type=str, default=None)
    group.add_argument("--no-load-optim", action="store_true", default=None)
    return parser


def _add_distributed_args(parser):
    group = parser.add_argument_group(title="distributed")
    group.add_argument("--tensor-model-parallel-size", type=int, default=1)
    group.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    group.add_argument("--num-layers-per-virtual-pipeline-stage", type=int, default=None)
    group.add_argument("--no-overlap-p2p-communication", action="store_false",
                       dest="overlap_p2p_comm")
    group.add_argument("--distributed-backend", default="nccl", choices=["nccl", "gloo"])
    group.add_argument("--distributed-timeout-minutes", type=int, default=10)
    group.add_argument("--local-rank", type=int, default=int(os.getenv("LOCAL_RANK", "0")))
    return parser


def _add_validation_args(parser):
    group = parser.add_argument_group(title="validation")
    group.add_argument("--eval-iters", type=int, default=100)
    group.add_argument("--eval-interval", type=int, default=1000)
    return parser


def _add_data_args(parser):
    group = parser.add_argument_group(title="data and dataloader")
    group.add_argument("--data-path", nargs="*", default=None)
    group.add_argument("--mock-data", action="store_true")
    group.add_argument("--split", type=str, default=None)
    group.add_argument("--seq-length", type=int, default=None)
    group.add_argument("--num-workers", type=int, default=2)
    return parser


def _add_tokenizer_args(parser):
    group = parser.add_argument_group(title="tokenizer")
    group.add_argument("--vocab-size", type=int, default=None)
    group.add_argument(
        "--tokenizer-type", type=str, default=None, choices=["GPT2BPETokenizer", "NullTokenizer"]
    )
    return parser


def _add_logging_args(parser):
    group = parser.add_argument_group(title="logging")
    group.add_argument("--log-interval", type=int, default=100)
    group.add_argument("--tensorboard-dir", type=str, default=None)
    return parser


def _add_transformer_engine_args(parser):
    group = parser.add_argument_group(title="transformer-engine")
    group.add_argument("--transformer-impl", default="transformer_engine",
                       choices=["local", "transformer_engine"])
    return parser


def _add_inprocess_restart_args(parser):
    group = parser.add_argument_group(title="In-process restart")
    group.add_argument("--inprocess-restart", action="store_true")
    return parser


def _require(condition, message):
    if not condition:
        raise ValueError(message)


def validate_args(args, defaults={}):
    """Fill derived values and reject what the stand-in (or Megatron) cannot run."""
    for key, value in defaults.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)

    model_parallel = args.tensor_model_parallel_size * args.pipeline_model_parallel_size
    _require(
        args.world_size % model_parallel == 0,
        f"world size {args.world_size} is not divisible by --tensor-model-parallel-size x "
        f"--pipeline-model-parallel-size = {model_parallel}",
    )
    args.data_parallel_size = args.world_size // model_parallel
    required = ("num_layers", "hidden_size", "num_attention_heads", "seq_length",
                "micro_batch_size", "lr", "vocab_size")
    for name in required:
        _require(getattr(args, name) is not None, f"--{name.replace('_', '-')} is required")
    _require(
        args.num_layers % args.pipeline_model_parallel_size == 0,
        "--num-layers must be divisible by --pipeline-model-parallel-size",
    )
    args.virtual_pipeline_model_parallel_size = None
    if args.num_layers_per_virtual_pipeline_stage is not None:
        per_stage = args.num_layers // args.pipeline_model_parallel_size
        _require(
            args.pipeline_model_parallel_size > 1
            and per_stage % args.num_layers_per_virtual_pipeline_stage == 0,
            "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size > 1 "
            "and must divide the layers of a stage",
        )
        args.virtual_pipeline_model_parallel_size = \
            per_stage // args.num_layers_per_virtual_pipeline_stage
    else:
        # as upstream: the non-interleaved schedule cannot overlap its p2p communication
        args.overlap_p2p_comm = False
    if args.global_batch_size is None:
        args.global_batch_size = args.micro_batch_size * args.data_parallel_size
    _require(
        args.global_batch_size % (args.micro_batch_size * args.data_parallel_size) == 0,
        "--global-batch-size must be a multiple of --micro-batch-size x data-parallel size",
    )
    _require(
        (args.train_iters is None) != (args.train_samples is None),
        "give exactly one of --train-iters and --train-samples",
    )
    _require(args.save is None or args.save_interval, "--save needs --save-interval")
    args.rampup_batch_size = None
    args.decrease_batch_size_if_needed = False

    if args.max_position_embeddings is None:
        args.max_position_embeddings = args.seq_length
    if args.ffn_hidden_size is None:
        args.ffn_hidden_size = 4 * args.hidden_size
    if args.kv_channels is None:
        args.kv_channels = args.hidden_size // args.num_attention_heads
    multiple = args.make_vocab_size_divisible_by * args.tensor_model_parallel_size
    args.padded_vocab_size = -(-args.vocab_size // multiple) * multiple
    args.params_dtype = torch.float32

    args.iteration = 0
    args.curr_iteration = 0
    args.consumed_train_samples = 0
    args.skipped_train_samples = 0
    args.num_floating_point_operations_so_far = 0
    return args


def core_transformer_config_from_args(args, config_class=None):
    config_class = config_class or TransformerConfig
    return config_class(
        num_layers=args.num_layers,
        hidden_size=args.hidden_size,
        ffn_hidden_size=args.ffn_hidden_size,
        num_attention_heads=args.num_attention_heads,
        kv_channels=args.kv_channels,
        hidden_dropout=args.hidden_dropout,
        attention_dropout=args.attention_dropout,
        normalization=args.normalization,
        init_method_std=args.init_method_std,
        tensor_model_parallel_size=args.tensor_model_parallel_size,
        pipeline_model_parallel_size=args.pipeline_model_parallel_size,
        pipeline_dtype=args.params_dtype,
        params_dtype=args.params_dtype,
        use_cpu_initialization=bool(args.use_cpu_initialization),
        masked_softmax_fusion=args.masked_softmax_fusion,
        bias_activation_fusion=args.bias_gelu_fusion,
        bias_dropout_fusion=args.bias_dropout_fusion,
        gradient_accumulation_fusion=args.gradient_accumulation_fusion,
        persist_layer_norm=not args.no_persist_layer_norm,
        apply_rope_fusion=False,
        virtual_pipeline_model_parallel_size=args.virtual_pipeline_model_parallel_size,
        # upstream's hardcoded values: outputs freed once sent; batched p2p unless overlapped
        deallocate_pipeline_outputs=True,
        overlap_p2p_comm=args.overlap_p2p_comm,
        batch_p2p_comm=not args.overlap_p2p_comm,
    )
