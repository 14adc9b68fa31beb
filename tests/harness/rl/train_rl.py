"""Megatron-LM's ``train_rl.py`` shape on the CPU harness: ``pretrain(...)`` with
``--perform-rl-step``, so ``train()`` runs rollouts and log-probs (megatron.rl stand-in) before
each ``train_step``. Needs ``tests/harness`` (pretrain_gpt's providers) and
``tests/harness/rl/megatron_rl_standin`` on PYTHONPATH after the training stand-in."""

from megatron.core.enums import ModelType
from megatron.training import pretrain

from pretrain_gpt import forward_step, model_provider, train_valid_test_datasets_provider


def rl_args(parser):
    group = parser.add_argument_group(title="rl (stand-in)")
    group.add_argument("--perform-rl-step", action="store_true")
    group.add_argument("--grpo-iterations", type=int, default=1)
    group.add_argument("--grpo-prompts-per-step", type=int, default=2)
    group.add_argument("--grpo-group-size", type=int, default=2)
    group.add_argument("--rl-use-sequence-packing", action="store_true")
    group.add_argument("--rl-inference-logprobs-is-correction", action="store_true")
    return parser


if __name__ == "__main__":
    train_valid_test_datasets_provider.is_distributed = True
    try:
        pretrain(train_valid_test_datasets_provider, model_provider,
                 ModelType.encoder_or_decoder, forward_step, extra_args_provider=rl_args,
                 args_defaults={"tokenizer_type": "GPT2BPETokenizer"})
    finally:  # from 0.17, megatron.rl's shutdown ends the process first (and writes it)
        from megatron.rl import rl_utils
        rl_utils.write_calls_report()
