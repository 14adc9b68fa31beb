"""verl/workers/rollout/base.py: BaseRollout. ``generate_sequences`` (sync batch generation) is
only implemented by rollouts that generate in the worker's process; the server rollouts (vLLM,
SGLang, TRT-LLM ServerAdapter) keep the base's NotImplementedError."""

import importlib
from abc import ABC, abstractmethod


class BaseRollout(ABC):
    def __init__(self, config, model_config, device_mesh, *args, **kwargs):
        self.config, self.model_config, self.device_mesh = config, model_config, device_mesh

    @abstractmethod
    async def resume(self, tags):
        ...

    @abstractmethod
    async def update_weights(self, weights, wire_format="named_tensors", **kwargs):
        ...

    @abstractmethod
    async def release(self):
        ...

    def generate_sequences(self, prompts):
        raise NotImplementedError


_ROLLOUT_REGISTRY = {
    ("vllm", "async"): "verl.workers.rollout.servers.ServerAdapter",
    ("sglang", "async"): "verl.workers.rollout.servers.ServerAdapter",
    ("trtllm", "async"): "verl.workers.rollout.servers.ServerAdapter",
    ("cpu_hf", "async"): "verl.workers.rollout.servers.InWorkerRollout",
}


def get_rollout_class(rollout_name, mode="async"):
    assert (rollout_name, mode) in _ROLLOUT_REGISTRY, f"Rollout {rollout_name} with mode {mode} not found"
    module_name, class_name = _ROLLOUT_REGISTRY[(rollout_name, mode)].rsplit(".", 1)
    return getattr(importlib.import_module(module_name), class_name)
