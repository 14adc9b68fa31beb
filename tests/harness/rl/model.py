"""The role processes' compute: a tiny megatron-core GPT, sampling, log-probs and a GRPO update.

Each role process owns a default process group of its own (gloo), as verl and MindSpeed-RL give
each role its own group; megatron-core's parallel state is built on it with TP=PP=1.
"""

import os

import torch

VOCAB, PROMPT, GENERATE = 64, 4, 8
PROMPTS, GROUP = 2, 4  # prompts per RL step, samples per prompt
TARGET = 7  # the reward counts this token in the generated text


def init_role_group(rank, world_size, port):
    """This role's own process group, then megatron-core's parallel state on it."""
    from harness import cpu_shim

    cpu_shim.install()
    import torch.distributed as dist
    from megatron.core import parallel_state, tensor_parallel

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    parallel_state.initialize_model_parallel(1, 1)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)


def build_model():
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer import TransformerConfig

    torch.manual_seed(1234)  # every role starts from the same weights
    config = TransformerConfig(num_layers=2, hidden_size=32, num_attention_heads=4,
                               use_cpu_initialization=True, pipeline_dtype=torch.float32)
    return GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                    vocab_size=VOCAB, max_sequence_length=PROMPT + GENERATE,
                    pre_process=True, post_process=True)


def _logits(model, tokens):
    batch, length = tokens.shape
    position = torch.arange(length).unsqueeze(0).expand(batch, length)
    mask = torch.triu(torch.ones(1, 1, length, length, dtype=torch.bool), diagonal=1)
    return model(tokens, position, mask)


def prompts(step):
    generator = torch.Generator().manual_seed(step)
    return torch.randint(0, VOCAB, (PROMPTS, PROMPT), generator=generator)


@torch.no_grad()
def generate(model, prompt_tokens, step):
    """GROUP samples per prompt, GENERATE tokens each."""
    generator = torch.Generator().manual_seed(10_000 + step)
    tokens = prompt_tokens.repeat_interleave(GROUP, dim=0)
    for _ in range(GENERATE):
        probs = torch.softmax(_logits(model, tokens)[:, -1].float(), dim=-1)
        tokens = torch.cat([tokens, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return tokens


def logprobs(model, tokens):
    """Log-probability of every generated token, (batch, GENERATE)."""
    logits = _logits(model, tokens[:, :-1]).float()
    chosen = torch.log_softmax(logits, dim=-1).gather(-1, tokens[:, 1:].unsqueeze(-1))
    return chosen.squeeze(-1)[:, PROMPT - 1:]


def grpo_update(model, optimizer, tokens, old, ref, group, beta=0.05):
    """One GRPO step on this rank's rows; gradients averaged over ``group`` (the actor's ranks)."""
    import torch.distributed as dist

    rewards = (tokens[:, PROMPT:] == TARGET).float().mean(-1)
    grouped = rewards.view(-1, GROUP)
    advantage = ((grouped - grouped.mean(-1, keepdim=True))
                 / (grouped.std(-1, keepdim=True) + 1e-4)).view(-1, 1)
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    rows = slice(rank, None, world)
    new = logprobs(model, tokens[rows])
    ratio = torch.exp(new - old[rows])
    kl = torch.exp(ref[rows] - new) - (ref[rows] - new) - 1
    loss = (-(ratio * advantage[rows]) + beta * kl).mean()
    optimizer.zero_grad()
    loss.backward()
    for parameter in model.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad, group=group)
            parameter.grad /= world
    optimizer.step()
    return float(loss), float(rewards.mean())
