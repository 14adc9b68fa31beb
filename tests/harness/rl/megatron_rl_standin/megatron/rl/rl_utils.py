"""``megatron.rl.rl_utils`` as core_v0.16 calls it from ``train()``, with CPU stand-ins.

``get_grpo_data_iterator`` keeps upstream's signature and control flow: when new rollouts are
due it calls the module globals ``get_environment_rollouts`` and ``prepare_data_for_update``
(which a profiler patches), else it returns the buffered rollouts. Upstream's rollout needs the
dynamic inference engine (GPU only); here a rollout is one greedy forward pass of the policy
over seeded random prompts, and the log-prob pass one more forward, so both stages do real
megatron-core compute on the CPU. What comes back feeds ``train_step`` as micro-batches of the
harness's ``forward_step`` format.
"""

import json
import os

import torch

from megatron.training import _harness
from megatron.training.global_vars import get_args

CALLS = []  # (function, iteration): what ran, for the harness report


class _RuntimeState:
    last_collection_iteration = 0

    def reset_iteration_counters(self, iteration):
        self.last_collection_iteration = iteration


_STATE = _RuntimeState()


def get_rl_runtime_state():
    return _STATE


def _forward(model, tokens):
    position_ids = torch.arange(tokens.shape[1]).unsqueeze(0).expand_as(tokens)
    return model[0](tokens, position_ids, None)


def get_environment_rollouts(model, inference_model, optimizer, n_prompts, samples_per_group):
    """Stand-in: greedy next tokens of the policy for n_prompts x samples_per_group prompts."""
    args = get_args()
    CALLS.append(("get_environment_rollouts", args.curr_iteration + 1))
    generator = torch.Generator().manual_seed(args.seed + args.curr_iteration)
    prompts = torch.randint(0, args.vocab_size, (n_prompts * samples_per_group, args.seq_length),
                            generator=generator)
    logits = _forward(model, prompts)
    return torch.cat([prompts[:, :1], logits.argmax(-1)[:, :-1] % args.vocab_size], dim=1)


def prepare_data_for_update(model, ref_state_dict, rollouts, tokenizer, sequence_packing=False,
                            is_correction=False):
    """Stand-in: one log-prob forward pass, then micro-batches for train_step."""
    args = get_args()
    CALLS.append(("prepare_data_for_update", args.curr_iteration + 1))
    logits = _forward(model, rollouts).float()
    torch.log_softmax(logits, dim=-1)
    rows = args.micro_batch_size
    batches = [{"tokens": rollouts[i:i + rows], "labels": torch.roll(rollouts[i:i + rows], -1, 1),
                "loss_mask": torch.ones(rows, args.seq_length),
                "position_ids": torch.arange(args.seq_length).unsqueeze(0).expand(rows, -1)}
               for i in range(0, rollouts.shape[0], rows)]
    return iter(batches * args.grpo_iterations)


def get_grpo_data_iterator(model, inference_model, optimizer, iteration, ref_state_dict,
                           grpo_iterations, grpo_prompts_per_step, grpo_group_size,
                           global_batch_size, sequence_packing, is_correction,
                           buffered_rollouts=None):
    """Upstream's flow: collect when nothing is buffered or the buffer has been used up."""
    runtime_state = get_rl_runtime_state()
    per_collection = max(1, (grpo_prompts_per_step * grpo_group_size) // global_batch_size)
    if buffered_rollouts is None or iteration == (runtime_state.last_collection_iteration
                                                  + grpo_iterations * per_collection):
        rollouts = get_environment_rollouts(model, inference_model, optimizer,
                                            grpo_prompts_per_step, grpo_group_size)
        buffered_rollouts = prepare_data_for_update(model=model, ref_state_dict=ref_state_dict,
                                                    rollouts=rollouts, tokenizer=None,
                                                    sequence_packing=sequence_packing,
                                                    is_correction=is_correction)
        runtime_state.reset_iteration_counters(iteration)
    return buffered_rollouts


def write_calls_report():
    """What ran, for the harness (``rl_calls_rank{R}.json``), on every way out."""
    report = os.environ.get("HARNESS_REPORT_DIR")
    if report:
        rank = os.environ.get("RANK", "0")
        with open(os.path.join(report, f"rl_calls_rank{rank}.json"), "w") as handle:
            json.dump(CALLS, handle)


def rl_inference_interface_shutdown():
    """As upstream, called at the end of ``pretrain`` and on ``train()``'s exit path before its
    ``sys.exit``. From Megatron-LM 0.17 it ends the process with ``os._exit(0)`` (the inference
    front ends keep non-daemon threads): no ``finally``, no ``atexit``, every thread killed,
    which is what a profiler's flush must survive. 0.16 returns."""
    CALLS.append(["rl_inference_interface_shutdown", None])
    write_calls_report()
    if _harness.VERSION >= (0, 17):
        _harness.report.end("os_exit", code=0)
        os._exit(0)
