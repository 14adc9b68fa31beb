"""CPU fixes megatron-core's dynamic inference engine needs on top of ``harness.cpu_shim``.

Each was found by running the engine on the CPU (megatron-core 0.19.2, torch 2.13.0):

* the step log (``logging_step_interval > 0``) reads ``torch.cuda.memory_stats()[...]`` keys,
  and ``cpu_shim`` returns ``{}``: every key reads 0 here;
* ``TextGenerationController`` builds ``torch.Generator(device=torch.cuda.current_device())``
  (not a torch function, so no ``TorchFunctionMode`` sees the device): a subclass answers CPU;
* ``TorchFunctionMode``s are thread-local and the high-level API (``MegatronLLM``) runs the engine
  loop on a thread of its own: every new thread enters the CUDA->CPU mode for its whole life;
* ``torch.cuda.cudart()`` (the relayed START/STOP_CUDA_PROFILER signal calls
  ``cudaProfilerStart/Stop``) needs a driver: a stand-in records each call (name, thread,
  listener callbacks) so a test can see where the signal lands;
* ``dynamic_context.triton_append_key_value_cache``: triton imports, but its kernel needs a GPU;
  with the name set to ``None`` the context takes its torch fallback;
* the flash-attn kernels: ``harness.dynamic.flash_standin``.

:func:`install` is idempotent and process-global; call it before building the engine (and in a
spawned coordinator nothing is needed: it computes nothing on a device).
"""

import collections
import importlib.util
import sys
import threading
import time

import torch

_INSTALLED_FLAG = "_harness_dynamic_cuda_extras_installed"


class CpuGenerator(torch.Generator):
    """``torch.Generator`` whatever device it is asked for: the CPU one (isinstance still holds)."""

    def __new__(cls, device=None):
        return super().__new__(cls, "cpu")


class CudartStandIn:
    """``torch.cuda.cudart()``: remembers profiler start/stop calls and tells listeners."""

    def __init__(self):
        self.calls = []
        self.listeners = []

    def _record(self, name):
        # Who called: the engine method the relayed signal reached (two frames up).
        caller = sys._getframe(2).f_code
        call = {"call": name, "thread": threading.get_native_id(),
                "main_thread": threading.current_thread() is threading.main_thread(),
                "caller": f"{caller.co_qualname}", "time": time.time()}
        self.calls.append(call)
        for listener in self.listeners:
            listener(call)
        return 0

    def cudaProfilerStart(self):
        return self._record("cudaProfilerStart")

    def cudaProfilerStop(self):
        return self._record("cudaProfilerStop")


CUDART = CudartStandIn()


def _memory_stats(*args, **kwargs):
    return collections.defaultdict(int)


def install():
    """``cpu_shim.install()``, then the dynamic engine's fixes (see the module docstring)."""
    if getattr(torch, _INSTALLED_FLAG, False):
        return
    if importlib.util.find_spec("einops") is None:
        # megatron-core imports einops optionally and its attention then calls None: say so
        # here instead of "'NoneType' object is not callable" deep in the first forward
        raise RuntimeError("the dynamic engine's attention needs einops: pip install einops "
                           "(setup.py's test extras list it)")
    from harness import cpu_shim

    from . import flash_standin

    cpu_shim.install()
    torch.cuda.memory_stats = _memory_stats
    torch.cuda.cudart = lambda: CUDART
    torch.Generator = CpuGenerator
    cpu_shim.device_mode_in_every_thread()
    from megatron.core.inference.contexts import dynamic_context

    dynamic_context.triton_append_key_value_cache = None
    flash_standin.install()
    setattr(torch, _INSTALLED_FLAG, True)
