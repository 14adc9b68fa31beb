"""verl on the CPU, test harness only: loaded into every process of the job by verl's own plugin
hook (``VERL_USE_EXTERNAL_MODULES=harness.verl.cpu_platform``, imported by ``import verl``), with
``VERL_PLATFORM=cpu`` selecting the platform registered here.

verl 0.9.1 knows CUDA, NPU and ROCm platforms and falls back to "nvidia" without one; with it
``get_device_name()`` is "cuda" and nothing runs on a CPU-only torch. What this module changes,
and why each is needed (measured on verl 0.9.1, torch 2.13 CPU):

- a ``cpu`` platform: device "cpu", gloo, Ray's logical "GPU" resource (the job asks Ray for
  ``num_gpus=1``; verl's placement groups ask for GPU bundles), memory statistics of zero;
- ``torch.distributed.init_process_group``: verl asks for ``cpu:gloo,{device}:{backend}``, which
  is ``cpu:gloo,cpu:gloo`` here and refused by torch as a duplicate; the duplicate is dropped;
- FSDP2's ``CPUOffloadPolicy(pin_memory=True)`` (the ref model's offload): pinning needs an
  accelerator, so the policy is made with ``pin_memory=False``;
- the test-only rollout ``cpu_hf`` (rollout.py) is registered with verl's replica registry (the
  TaskRunner's side) and its rollout table (the worker's side).

``VERL_ENGINE_DEVICE=cuda`` (set by the test) picks verl's FSDP engine, registered for cuda and
npu only; it then runs on the CPU because this platform's device is "cpu".
"""

import types
from typing import Any, Optional

import torch
import torch.distributed
import torch.distributed.fsdp as fsdp

from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

ROLLOUT_NAME = "cpu_hf"


def _zero(*args, **kwargs):
    return 0


def _nothing(*args, **kwargs):
    return None


def _device_module():
    """What verl calls on ``get_torch_device()`` (torch.cuda's names), answered for the CPU."""
    module = types.ModuleType("harness_cpu_device")
    for name in ("empty_cache", "synchronize", "set_device", "ipc_collect",
                 "set_per_process_memory_fraction", "manual_seed", "manual_seed_all",
                 "reset_peak_memory_stats"):
        setattr(module, name, _nothing)
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated",
                 "max_memory_reserved"):
        setattr(module, name, _zero)
    module.is_available = lambda: False
    module.device_count = lambda: 1
    module.current_device = lambda: "cpu"
    module.get_device_name = lambda *a: "cpu"
    module.mem_get_info = lambda *a: (8 << 30, 16 << 30)
    module.get_rng_state = torch.get_rng_state
    module.set_rng_state = torch.set_rng_state
    module.Stream = torch.cpu.Stream
    module.stream = torch.cpu.stream
    module.current_stream = torch.cpu.current_stream
    module.Event = torch.cpu.Event
    return module


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface answered for a CPU-only torch."""

    _module = _device_module()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return self._module

    def is_available(self) -> bool:
        return True

    def current_device(self):
        return "cpu"  # verl builds devices as torch.device(get_device_id())

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # Ray sets it for its logical GPUs; nothing reads it here

    def nvtx_range(self, msg: str):
        import contextlib

        return contextlib.nullcontext()

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def get_collective_module(self) -> Any:
        return None

    def cudart(self) -> Any:
        return None


def _one_backend_per_device(init_process_group):
    def init(*args, backend=None, **kwargs):
        if isinstance(backend, str) and "," in backend:
            parts = list(dict.fromkeys(part.strip() for part in backend.split(",")))
            backend = ",".join(parts)
        return init_process_group(*args, backend=backend, **kwargs)

    init.harness_cpu = True
    return init


class _UnpinnedCPUOffloadPolicy(fsdp.CPUOffloadPolicy):
    def __init__(self, pin_memory: bool = False):
        super().__init__(pin_memory=False)


def install() -> None:
    if not getattr(torch.distributed.init_process_group, "harness_cpu", False):
        torch.distributed.init_process_group = _one_backend_per_device(
            torch.distributed.init_process_group)
    fsdp.CPUOffloadPolicy = _UnpinnedCPUOffloadPolicy
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = "harness.verl.rollout.CpuHFRollout"

    def load():
        from harness.verl.rollout import CpuHFReplica

        return CpuHFReplica

    RolloutReplicaRegistry.register(ROLLOUT_NAME, load)


install()
