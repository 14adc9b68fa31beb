"""Rollouts as verl 0.9.1's worker builds them (``base.get_rollout_class(name, "async")``):

- ``ServerAdapter`` (vllm, sglang, trtllm): weights go to a server process that generates; the
  worker-side object has no ``generate_sequences`` of its own;
- ``InWorkerRollout`` (the CPU tier's ``cpu_hf``): generates in the worker's process, one
  ``generate_sequences`` call per batch, with weights synced by ``update_weights``.
"""

import torch

from .base import BaseRollout


class ServerAdapter(BaseRollout):
    async def resume(self, tags):
        return None

    async def update_weights(self, weights, wire_format="named_tensors", **kwargs):
        for _ in weights:
            pass

    async def release(self):
        return None


class InWorkerRollout(ServerAdapter):
    def __init__(self, config, model_config, device_mesh, **kwargs):
        super().__init__(config, model_config, device_mesh)
        torch.manual_seed(0)
        self.module = torch.nn.Linear(8, 8)
        self.global_steps = None

    async def update_weights(self, weights, wire_format="named_tensors", **kwargs):
        params = dict(self.module.named_parameters())
        with torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor)
        self.global_steps = kwargs.get("global_steps")

    def generate_sequences(self, prompts):
        with torch.no_grad():
            logits = self.module(prompts.batch["x"])
        return logits.argmax(-1)

