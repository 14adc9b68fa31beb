"""A tiny, offline RL environment for ``train_rl.py``: prompts are space-separated token ids
(what ``NullTokenizer`` reads and writes), the reward is a fixed function of the response.

Megatron's agent registry is an allowlist (``megatron.rl.agent.registry.AGENT_REGISTRY``, names
to ``module:Class``); :func:`register` adds this agent under :data:`NAME` in the training
process before the loop reads the environment config. Prompts come in a fixed order (a counter,
not ``random``), and the agent sends one generation request at a time (the group's requests
otherwise reach the engine concurrently and share its steps as the HTTP timing falls, so the
engine's seeded sampler draws for them in a different order from run to run): two runs then
sample the same tokens and get the same rewards.
"""

import asyncio
from typing import Any

from megatron.rl.agent.reward_only_agent import RewardOnlyAgent

NAME = "HarnessTinyIdsAgent"
# Prompt lengths 5..8 and ids below 100 (vocab 127: 126 is NullTokenizer's end of document).
PROMPTS = tuple(" ".join(str((7 * i + 3 * j) % 100 + 1) for j in range(5 + i % 4))
                for i in range(16))
LOW = 64  # the reward: the share of generated ids below this
_one_at_a_time = None  # asyncio.Lock, made on the training process's loop at first use


class TinyIdsAgent(RewardOnlyAgent):
    """Reward = the share of response ids below :data:`LOW` (0 for an empty response)."""

    env_id: str = "tiny_ids"
    next_prompt: int = 0

    def get_dataset(self, validation: bool = False):
        return list(PROMPTS)

    async def get_prompt(self, validation: bool = False) -> tuple[str, dict]:
        index = self.next_prompt % len(PROMPTS)
        self.next_prompt += 1
        return PROMPTS[index], {"problem_id": str(index)}

    async def evaluation_prompts(self, num_prompts: int, validation: bool = False):
        return [(PROMPTS[i % len(PROMPTS)], {"problem_id": str(i % len(PROMPTS))})
                for i in range(num_prompts)]

    async def get_rollout_response(self, request, inference_request):
        global _one_at_a_time
        if _one_at_a_time is None:
            _one_at_a_time = asyncio.Lock()
        async with _one_at_a_time:
            return await super().get_rollout_response(request, inference_request)

    async def get_reward(self, response: str, golden: Any, finish_reason: str) -> float:
        ids = [int(word) for word in (response or "").split() if word.lstrip("-").isdigit()]
        return sum(1 for i in ids if i < LOW) / len(ids) if ids else 0.0


def register() -> None:
    from megatron.rl.agent import registry

    registry.AGENT_REGISTRY[NAME] = f"{__name__}:TinyIdsAgent"
