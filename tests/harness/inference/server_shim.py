"""CPU fixes the text-generation server path needs on top of ``cpu_shim`` (found by running it).

* ``cpu_shim``'s device mode is a ``TorchFunctionMode``, and modes are thread-local: Flask runs
  every request on a new thread, so each new thread enters the mode for its whole life.
* ``TextGenerationController`` builds ``torch.Generator(device=torch.cuda.current_device())``;
  the constructor is not a torch function, so no mode sees its device: a subclass maps it to CPU.
* ``communication_utils._is_cuda`` asserts ``tensor.is_cuda`` before every broadcast.
* Older servers allocate ``torch.cuda.LongTensor(...)``-style buffers: the CPU types stand in.
"""

import os
import sys

import torch

_INSTALLED_FLAG = "_harness_server_shim_installed"
_CUDA_TENSOR_TYPES = ("LongTensor", "FloatTensor", "HalfTensor", "BFloat16Tensor", "IntTensor",
                      "ByteTensor", "BoolTensor")


def _cpu_shim():
    # The stand-in's megatron.training loads cpu_shim under this name; reuse that copy.
    loaded = sys.modules.get("_megatron_standin_cpu_shim")
    if loaded is not None:
        return loaded
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        import cpu_shim
    finally:
        sys.path.pop(0)
    return cpu_shim


class CpuGenerator(torch.Generator):
    """``torch.Generator`` whatever device it is asked for: the CPU one (isinstance still holds)."""

    def __new__(cls, device=None):
        return super().__new__(cls, "cpu")


def _no_cuda_assertions():
    from megatron.core.inference import communication_utils

    communication_utils._is_cuda = lambda tensor: None


def _cuda_tensor_types():
    for name in _CUDA_TENSOR_TYPES:
        setattr(torch.cuda, name, getattr(torch, name))


def install():
    """Install ``cpu_shim`` and the server-path fixes once per process."""
    if getattr(torch, _INSTALLED_FLAG, False):
        return
    cpu_shim = _cpu_shim()
    cpu_shim.install()
    cpu_shim.device_mode_in_every_thread()
    torch.Generator = CpuGenerator
    _no_cuda_assertions()
    _cuda_tensor_types()
    setattr(torch, _INSTALLED_FLAG, True)
