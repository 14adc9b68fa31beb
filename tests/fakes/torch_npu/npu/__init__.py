"""Minimal torch_npu.npu: a host with a fixed number of healthy devices and no real work.

Calls only track which device is current, so the profiler can label its output
(device_<id> directories, "NPU <id>" process labels) the way a real run would. ``memory`` (the
caching allocator's history) and ``mstx`` are their own modules, as in the wheels.
"""

import threading

from . import memory  # noqa: F401  torch_npu.npu.memory, as `from .memory import *` makes it
from .mstx import mstx  # noqa: F401

DEVICE_COUNT = 8
DEVICE_NAME = "Ascend910B"

_state = threading.local()
_init_lock = threading.Lock()
_initialized = False


def is_available() -> bool:
    return True


def device_count() -> int:
    return DEVICE_COUNT


def _device_index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        # Accepts "npu", "npu:3" and torch.device-like objects with .type/.index.
        text = str(device)
        kind, _, suffix = text.partition(":")
        if kind != "npu":
            raise ValueError(f"Expected an npu device, got {text!r}.")
        index = int(suffix) if suffix else current_device()
    if not 0 <= index < DEVICE_COUNT:
        raise RuntimeError(f"Invalid device id {index}: this host has {DEVICE_COUNT} NPUs.")
    return index


def current_device() -> int:
    return getattr(_state, "device", 0)


def set_device(device) -> None:
    _state.device = _device_index(device)


def synchronize(device=None) -> None:
    _device_index(device)


def _lazy_init() -> None:
    global _initialized
    with _init_lock:
        _initialized = True


def is_initialized() -> bool:
    return _initialized


def get_device_name(device=None) -> str:
    _device_index(device)
    return DEVICE_NAME


class Stream:
    """A device stream as mstx takes it: its id, device index and device type (the wheels'
    ``torch_npu.npu.Stream`` hands these to ``_C._mstx._range_start``)."""

    device_type = 20  # PrivateUse1, the type torch gives npu devices

    def __init__(self, device=None, stream_id=0):
        self.device_index = _device_index(device)
        self.stream_id = stream_id


def current_stream(device=None) -> Stream:
    """The current device's default stream."""
    return Stream(device)
