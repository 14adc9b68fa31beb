"""Lets megatron-core's CUDA-minded code run on a CPU-only torch build.

Two parts, both process-global and installed once by :func:`install`:

* a ``TorchFunctionMode`` that turns every device argument naming ``cuda``/``npu`` (or a bare
  device index, which is what ``torch.cuda.current_device()`` feeds back) into ``cpu``;
* stand-ins for the ``torch.cuda`` functions megatron-core calls for bookkeeping (streams,
  events, RNG state, memory stats, NVTX).

``torch.cuda.is_available()`` stays False on purpose: a faked CUDA makes ``torch.profiler`` add
CUDA activity (stderr floods with "Failed to record CUDA event") and would mislead any code that
picks a profiler backend from it.
"""

import contextlib
import threading
import time

import torch
from torch.overrides import TorchFunctionMode

_ACCELERATORS = ("cuda", "npu")
_CPU = torch.device("cpu")
_INSTALLED_FLAG = "_harness_cpu_shim_installed"
# Moving to an accelerator or pinning is a no-op when everything already lives on the CPU.
_RETURN_SELF = (torch.Tensor.cuda, torch.Tensor.pin_memory)


def _as_cpu(device):
    if isinstance(device, bool):
        return device
    if isinstance(device, int):
        return _CPU
    if isinstance(device, str) and device.split(":")[0] in _ACCELERATORS:
        return _CPU
    if isinstance(device, torch.device) and device.type in _ACCELERATORS:
        return _CPU
    return device


def _cpu_type_name(name):
    # Tensor.type("torch.cuda.FloatTensor") would try to move the tensor to CUDA.
    return name.replace("torch.cuda.", "torch.") if isinstance(name, str) else name


class CpuDeviceMode(TorchFunctionMode):
    """Rewrites accelerator devices to CPU in every torch call made while the mode is active."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _RETURN_SELF:
            return args[0]
        if func is torch.Tensor.type:
            if len(args) == 1 and not kwargs:
                # megatron's clip_grads asserts grad.type() == 'torch.cuda.FloatTensor'.
                return func(*args).replace("torch.", "torch.cuda.", 1)
            args = (args[0],) + tuple(_cpu_type_name(a) for a in args[1:])
            if "dtype" in kwargs:
                kwargs["dtype"] = _cpu_type_name(kwargs["dtype"])
        if func is torch.Tensor.to:
            args = (args[0],) + tuple(_as_cpu(a) for a in args[1:])
        if "device" in kwargs:
            kwargs["device"] = _as_cpu(kwargs["device"])
        kwargs.pop("pin_memory", None)
        return func(*args, **kwargs)


class _Stream:
    """A CUDA stream that is always idle: CPU work is synchronous."""

    def __init__(self, *args, **kwargs):
        self.device = _CPU

    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record(self)
        return event

    def synchronize(self):
        pass

    def query(self):
        return True

    def is_capturing(self):
        # Asked by torch.optim's Adam step (graph-capture checks): never on the CPU.
        return False


class _Event:
    """A CUDA event that remembers the wall clock, so timers report real elapsed time."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._time = None

    def record(self, stream=None):
        self._time = time.perf_counter()

    def elapsed_time(self, end_event):
        return (end_event._time - self._time) * 1000.0

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass


class _DeviceProperties:
    # Hopper-like, so capability checks take their most common branch.
    name = "cpu-shim"
    total_memory = 0
    major = 9
    minor = 0
    multi_processor_count = 1


_DEFAULT_STREAM = _Stream()


def _returns(value):
    # A fresh function per stand-in: torch._dynamo indexes torch.cuda's functions by identity
    # and rejects one object registered under two names.
    def stand_in(*args, **kwargs):
        return value

    return stand_in


def _torch_cuda_stand_ins():
    return {
        "current_device": _returns(0),
        "set_device": _returns(None),
        "synchronize": _returns(None),
        "empty_cache": _returns(None),
        "Stream": _Stream,
        "Event": _Event,
        "current_stream": lambda *a, **k: _DEFAULT_STREAM,
        "default_stream": lambda *a, **k: _DEFAULT_STREAM,
        "stream": lambda *a, **k: contextlib.nullcontext(),
        "is_current_stream_capturing": lambda: False,
        # The RNG tracker saves and restores "CUDA" state; the CPU generator is the real one here.
        "get_rng_state": lambda *a, **k: torch.get_rng_state(),
        "set_rng_state": _returns(None),
        "get_device_properties": lambda *a, **k: _DeviceProperties(),
        "get_device_name": lambda *a, **k: _DeviceProperties.name,
        "get_device_capability": lambda *a, **k: (_DeviceProperties.major, _DeviceProperties.minor),
        "memory_allocated": _returns(0),
        "max_memory_allocated": _returns(0),
        "memory_reserved": _returns(0),
        "max_memory_reserved": _returns(0),
        "reset_peak_memory_stats": _returns(None),
        "reset_max_memory_allocated": _returns(None),
        "memory_stats": lambda *a, **k: {},
    }


def _stub_rng_module():
    # megatron's RNG tracker also reaches the state through torch.cuda.random directly.
    torch.cuda.random.get_rng_state = torch.cuda.get_rng_state
    torch.cuda.random.set_rng_state = torch.cuda.set_rng_state


def _stub_nvtx():
    for name in ("range_push", "range_pop", "mark"):
        setattr(torch.cuda.nvtx, name, _returns(None))
    torch.cuda.nvtx.range = lambda *a, **k: contextlib.nullcontext()


def _stub_accelerator():
    # torch >= 2.6's device-generic API, asked by megatron-core 0.19 and torch.optim.
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:
        return
    accelerator.current_device_index = _returns(0)
    accelerator.set_device_index = _returns(None)  # the DataLoader's pin thread sets it
    accelerator.current_stream = lambda *a, **k: _DEFAULT_STREAM
    accelerator.synchronize = _returns(None)


def _stub_pin_memory():
    # The DataLoader's pin-memory thread runs outside the (thread-local) device mode, so the
    # method itself must not ask for a driver: pinning is a no-op for CPU-only tensors.
    torch.Tensor.pin_memory = lambda self, *a, **k: self


def install():
    """Install the device mode and the ``torch.cuda`` stand-ins once per process."""
    if getattr(torch, _INSTALLED_FLAG, False):
        return
    for name, value in _torch_cuda_stand_ins().items():
        setattr(torch.cuda, name, value)
    _stub_accelerator()
    _stub_pin_memory()
    _stub_rng_module()
    _stub_nvtx()
    # Stays entered for the life of the process: the harness runs one training per process.
    CpuDeviceMode().__enter__()
    setattr(torch, _INSTALLED_FLAG, True)


def device_mode_in_every_thread():
    """Enter the device mode in every thread started from now on: modes are thread-local, and
    servers (Flask, the dynamic engine's API) compute on threads of their own."""
    original_run = threading.Thread.run

    def run_in_cpu_device_mode(self):
        with CpuDeviceMode():
            original_run(self)

    threading.Thread.run = run_in_cpu_device_mode
