"""A test-only rollout for verl 0.9.1 on the CPU: verl's own ``HFRollout.generate_sequences`` run
in the ActorRolloutRefWorker's process, behind a rollout replica that verl's agent loop talks to.

verl 0.9.1 has no synchronous rollout: generation is per-sample requests from verl's agent loop
workers to a server replica (vLLM, SGLang, TRT-LLM; none runs on a CPU). ``HFRollout`` is still
shipped but cannot be built (its ``__init__`` calls ``BaseRollout.__init__()`` without the
arguments that now takes). So, registered as rollout ``cpu_hf`` by cpu_platform.py:

- ``CpuHFRollout`` (in the worker, built by verl's ``init_model`` from its rollout table): an
  ``HFRollout`` over its own copy of the model, whose weights verl's ``update_weights`` syncs
  from the actor as it would into vLLM;
- ``CpuHFServer`` (a Ray actor, one per replica): serves the agent loop's ``generate`` requests,
  gathers one step's requests (``expected`` of them, or whatever arrived once ``QUIET_S`` pass
  without a new one) and has the worker generate them as one batch (``__ray_call__``, as verl's
  vLLM replica reaches its workers): one ``generate_sequences`` call per RL step, the call a
  synchronous rollout made;
- ``CpuHFReplica``: the ``RolloutReplica`` that starts the server on the hybrid worker group.
"""

import asyncio

import torch

from verl import DataProto
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.hf_rollout import HFRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

QUIET_S = 0.5


class CpuHFRollout(HFRollout):
    """HFRollout made buildable again: verl 0.9.1's rollout constructor arguments."""

    def __init__(self, config, model_config, device_mesh, **kwargs):
        from transformers import AutoModelForCausalLM

        BaseRollout.__init__(self, config, model_config, device_mesh)
        self.module = AutoModelForCausalLM.from_pretrained(
            self.model_config.local_path, torch_dtype=torch.float32, attn_implementation="sdpa")
        self.global_steps = None

    async def resume(self, tags):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, wire_format="named_tensors", **kwargs):
        params = dict(self.module.named_parameters())
        with torch.no_grad():
            for name, tensor in weights:
                if hasattr(tensor, "full_tensor"):
                    tensor = tensor.full_tensor()
                if name in params:
                    params[name].copy_(tensor.to(params[name].dtype))
        self.global_steps = kwargs.get("global_steps")


def generate_in_worker(worker_dict, batch):
    """Runs in the worker process (``__ray_call__``): the colocated worker's rollout generates."""
    for worker in worker_dict.worker_dict.values():
        rollout = getattr(worker, "rollout", None)
        if rollout is not None:
            output = rollout.generate_sequences(batch)
            return output.batch["responses"].tolist(), rollout.global_steps
    raise RuntimeError("no colocated worker with a rollout in this process")


class CpuHFServer:
    """The replica's server: the agent loop's per-sample requests, generated per step."""

    def __init__(self, workers, expected, pad_token_id, eos_token_id, response_length):
        self.workers = workers
        self.expected = expected
        self.pad, self.eos, self.response_length = pad_token_id, eos_token_id, response_length
        self.pending = []
        self.flusher = None

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        future = asyncio.get_running_loop().create_future()
        self.pending.append((list(prompt_ids), dict(sampling_params), future))
        if self.flusher is not None:
            self.flusher.cancel()
        if len(self.pending) >= self.expected:
            await self._flush()
        else:
            self.flusher = asyncio.get_running_loop().call_later(
                QUIET_S, lambda: asyncio.ensure_future(self._flush()))
        return await future

    async def _flush(self):
        batch, self.pending, self.flusher = self.pending, [], None
        if not batch:
            return
        try:
            responses, version = await self.workers[0].__ray_call__.remote(
                generate_in_worker, self._proto(batch))
        except BaseException as exc:
            for _, _, future in batch:
                future.set_exception(exc)
            return
        for (_, _, future), tokens in zip(batch, responses):
            if self.eos in tokens:
                tokens = tokens[:tokens.index(self.eos) + 1]
            tokens = [t for t in tokens if t != self.pad] or [self.eos]
            future.set_result(TokenOutput(token_ids=tokens, extra_fields={"global_steps": version}))

    def _proto(self, batch):
        width = max(len(ids) for ids, _, _ in batch)
        input_ids = torch.full((len(batch), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, _, _) in enumerate(batch):
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            mask[row, width - len(ids):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        params = batch[0][1]
        return DataProto.from_dict(
            {"input_ids": input_ids, "attention_mask": mask, "position_ids": positions},
            meta_info={"eos_token_id": self.eos, "pad_token_id": self.pad,
                       "do_sample": params.get("temperature", 1.0) > 0,
                       "temperature": params.get("temperature", 1.0),
                       "response_length": self.response_length})

    # what verl's replica calls on its servers around generation
    async def wake_up(self, tags=None):
        return None

    async def sleep(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def abort_all_requests(self, reject_request=False, **kwargs):
        return {}

    async def resume_generation(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


class CpuHFReplica(RolloutReplica):
    """One server per replica, on the hybrid (actor+rollout+ref) worker group."""

    async def launch_servers(self):
        import ray
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.model_config.path)
        expected = max(1, int(self.config.get("max_num_seqs", 1)))
        server = ray.remote(CpuHFServer).options(
            num_cpus=0, name=f"cpu_hf_server_{self.replica_rank}").remote(
            self.workers, expected, tokenizer.pad_token_id, tokenizer.eos_token_id,
            self.config.response_length)
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"cpu-hf-replica-{self.replica_rank}"
