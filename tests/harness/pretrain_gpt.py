"""Pretrain a tiny GPT, shaped like Megatron-LM's ``pretrain_gpt.py``.

Only ``megatron.training`` (the CPU stand-in) and ``megatron.core`` are used, the way the
upstream script uses them, so a profiling plugin sees the same call pattern. The data is a
seeded synthetic corpus: identical runs produce bit-identical losses.
"""

from functools import partial

import torch

from megatron.core import parallel_state
from megatron.core.enums import ModelType
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.training import get_args, pretrain, print_rank_0
from megatron.training.arguments import core_transformer_config_from_args

try:
    from megatron.training import inprocess_restart
except ImportError:  # Megatron-LM < 0.13 has no in-process restart.
    inprocess_restart = None
try:  # Megatron-LM >= 0.18: the script parses, validates and builds the config container
    from megatron.training.argument_utils import pretrain_cfg_container_from_args
    from megatron.training.arguments import parse_and_validate_args
except ImportError:
    parse_and_validate_args = None


def model_provider(pre_process=True, post_process=True, vp_stage=None):
    """Build the model."""
    args = get_args()
    print_rank_0("building GPT model ...")
    config = core_transformer_config_from_args(args)
    if args.transformer_impl != "local":
        raise ValueError("--transformer-impl transformer_engine needs Transformer Engine; "
                         "pass --transformer-impl local")
    return GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(normalization=args.normalization),
        vocab_size=args.padded_vocab_size,
        max_sequence_length=args.max_position_embeddings,
        pre_process=pre_process,
        post_process=post_process,
        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
        position_embedding_type=args.position_embedding_type,
        vp_stage=vp_stage,
    )


class MockGPTDataset(torch.utils.data.Dataset):
    """Arithmetic token sequences drawn from a generator seeded by (seed, index): learnable,
    cheap, and the same on every rank and every run."""

    def __init__(self, num_samples, seq_length, vocab_size, seed):
        self.num_samples = max(num_samples, 1)
        self.seq_length = seq_length
        self.vocab_size = vocab_size
        self.seed = seed

    def __len__(self):
        return self.num_samples

    def __getitem__(self, idx):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + idx)
        start, stride = torch.randint(0, self.vocab_size, (2,), generator=generator).tolist()
        text = (start + (stride | 1) * torch.arange(self.seq_length + 1)) % self.vocab_size
        return {
            "tokens": text[:-1],
            "labels": text[1:],
            "loss_mask": torch.ones(self.seq_length),
            "position_ids": torch.arange(self.seq_length),
        }


def get_batch(data_iterator):
    """Generate a batch."""
    # Middle pipeline stages take activations, not data.
    if not (parallel_state.is_pipeline_first_stage() or parallel_state.is_pipeline_last_stage()):
        return None, None, None, None, None
    batch = next(data_iterator)
    return batch["tokens"], batch["labels"], batch["loss_mask"], None, batch["position_ids"]


def loss_func(loss_mask, output_tensor):
    """Sum of token losses plus the token count, Megatron's per-token loss reporting."""
    losses = output_tensor.view(-1).float()
    loss_mask = loss_mask.view(-1).float()
    loss = torch.sum(losses * loss_mask)
    num_tokens = loss_mask.sum().clone().detach().to(torch.int)
    report = {"lm loss": torch.cat([loss.clone().detach().view(1), num_tokens.view(1)])}
    return loss, num_tokens, report


def forward_step(data_iterator, model):
    """Forward training step."""
    tokens, labels, loss_mask, attention_mask, position_ids = get_batch(data_iterator)
    output_tensor = model(tokens, position_ids, attention_mask, labels=labels)
    return output_tensor, partial(loss_func, loss_mask)


def train_valid_test_datasets_provider(train_val_test_num_samples):
    """Build the train, validation and test datasets."""
    args = get_args()
    if not args.mock_data:
        raise ValueError("the CPU harness reads no data files; pass --mock-data")
    print_rank_0("> building train, validation, and test datasets for GPT ...")
    # Distinct seeds per split so validation never replays training samples.
    return tuple(
        MockGPTDataset(num_samples, args.seq_length, args.vocab_size, args.seed + split)
        for split, num_samples in enumerate(train_val_test_num_samples)
    )


if __name__ == "__main__":
    train_valid_test_datasets_provider.is_distributed = True

    if inprocess_restart is None:
        pretrain(
            train_valid_test_datasets_provider,
            model_provider,
            ModelType.encoder_or_decoder,
            forward_step,
            args_defaults={"tokenizer_type": "GPT2BPETokenizer"},
        )
    elif parse_and_validate_args is not None:
        pretrain, store = inprocess_restart.maybe_wrap_for_inprocess_restart(pretrain)
        args = parse_and_validate_args(args_defaults={"tokenizer_type": "GPT2BPETokenizer"})
        full_config = pretrain_cfg_container_from_args(args)
        # By keyword: 0.18 takes model_provider third, 0.19 after forward_step_func.
        pretrain(
            full_config,
            train_valid_test_datasets_provider,
            model_type=ModelType.encoder_or_decoder,
            forward_step_func=forward_step,
            model_provider=model_provider,
            store=store,
        )
    else:
        pretrain, store = inprocess_restart.maybe_wrap_for_inprocess_restart(pretrain)
        pretrain(
            train_valid_test_datasets_provider,
            model_provider,
            ModelType.encoder_or_decoder,
            forward_step,
            args_defaults={"tokenizer_type": "GPT2BPETokenizer"},
            store=store,
        )
