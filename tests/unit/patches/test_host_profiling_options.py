"""Megatron's own profiling options once mindspeed_prof owns --profile: taken over, refused with
the fix, or left to nsys; and the torch backend traces CUDA only where the driver has devices."""

import types

import pytest
import torch

from mindspeed_prof.backends import torch_backend
from mindspeed_prof.config.profiler_config import ProfilerConfig
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.patches import megatron_host_profiling as host


def megatron_args(**set_flags):
    flags = dict(profile=True, profile_step_start=3, profile_step_end=5, profile_ranks=[],
                 pytorch_profiler_collect_shapes=False, pytorch_profiler_collect_callstack=False,
                 pytorch_profiler_collect_chakra=False, record_shapes=False, nvtx_ranges=False)
    flags.update(set_flags)
    return types.SimpleNamespace(**flags)


def test_collect_shapes_and_callstack_become_record_shapes_and_with_stack():
    config, notes = host.take_over_options(
        megatron_args(pytorch_profiler_collect_shapes=True,
                      pytorch_profiler_collect_callstack=True), ProfilerConfig(profile=True))
    assert config.profile_record_shapes and config.profile_with_stack
    assert any("--pytorch-profiler-collect-shapes is taken over as --profile-record-shapes" in n
               for n in notes)
    assert any("--pytorch-profiler-collect-callstack is taken over as --profile-with-stack" in n
               for n in notes)


def test_nsys_record_shapes_becomes_record_shapes_and_nvtx_ranges_is_reported_unused():
    config, notes = host.take_over_options(megatron_args(record_shapes=True, nvtx_ranges=True),
                                           ProfilerConfig(profile=True))
    assert config.profile_record_shapes
    assert any(n.startswith("--nvtx-ranges only marks Megatron's nsys capture") for n in notes)


def test_megatron_0_16_args_without_the_new_options_change_nothing():
    args = types.SimpleNamespace(profile=True, profile_ranks=[0])
    config = ProfilerConfig(profile=True)
    assert host.take_over_options(args, config) == (config, [])


def test_chakra_is_refused_naming_the_flag_and_the_fix():
    with pytest.raises(ConfigError, match=r"^--pytorch-profiler-collect-chakra .* drop it"):
        host.take_over_options(megatron_args(pytorch_profiler_collect_chakra=True),
                               ProfilerConfig(profile=True))


def test_an_nsys_session_is_detected_from_its_environment_variable():
    assert host.under_nsys({"NSYS_PROFILING_SESSION_ID": "3"})
    assert not host.under_nsys({}) and not host.under_nsys({"NSYS_PROFILING_SESSION_ID": ""})
    message = host.nsys_message(megatron_args(profile_ranks=[1]))
    assert "iterations [3, 5) on rank(s) 1" in message and "records nothing" in message


def test_a_shim_that_makes_cuda_look_available_adds_no_cuda_activity(monkeypatch):
    # A CUDA build of torch on a machine without a driver, under a CPU shim (the real-Megatron
    # tier's): torch.cuda says yes, the driver has no device, so CUPTI must not be asked.
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", lambda: 0, raising=False)
    assert torch_backend._activities() == [torch.profiler.ProfilerActivity.CPU]


def test_a_driver_with_devices_gets_cuda_activity(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", lambda: 2, raising=False)
    assert torch_backend._activities() == [torch.profiler.ProfilerActivity.CPU,
                                           torch.profiler.ProfilerActivity.CUDA]
