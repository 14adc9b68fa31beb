"""Print, as JSON, the shape of the stand-in for every emulated Megatron-LM version.

Run it in its own interpreter (``python introspect.py`` with the stand-in on ``PYTHONPATH``):
importing ``megatron.training`` installs the CPU shim into the process for good.
"""

import argparse
import importlib
import inspect
import json
import os
import sys


def _import_version(version):
    os.environ["MEGATRON_STANDIN_VERSION"] = version
    for name in [name for name in sys.modules if name.startswith("megatron.training")]:
        del sys.modules[name]
    return importlib.import_module("megatron.training.training")


def signatures(versions):
    found = {}
    for version in versions:
        training = _import_version(version)
        found[version] = {name: str(inspect.signature(getattr(training, name)))
                          for name in ("train_step", "train", "pretrain")}
    return found


def lookups():
    import megatron
    import megatron.core
    import megatron.training
    from megatron.training import arguments, initialize, training

    return {
        "megatron_is_namespace_package": getattr(megatron, "__file__", None) is None,
        "core_dir": os.path.dirname(megatron.core.__file__),
        "training_dir": os.path.dirname(megatron.training.__file__),
        "initialize_imports_parse_args_by_name": initialize.parse_args is arguments.parse_args,
        "initialize_imports_validate_args_by_name":
            initialize.validate_args is arguments.validate_args,
        "package_reexports_pretrain": megatron.training.pretrain is training.pretrain,
    }


def profile_flags():
    from megatron.training import arguments

    sys.argv = ["pretrain_gpt.py"]
    args = arguments.parse_args()
    names = ("profile", "profile_step_start", "profile_step_end", "profile_ranks",
             "use_pytorch_profiler", "record_memory_history", "memory_snapshot_path",
             "iterations_to_skip", "pytorch_profiler_collect_shapes",
             "pytorch_profiler_collect_callstack", "pytorch_profiler_collect_chakra",
             "record_shapes", "nvtx_ranges")
    flags = {name: getattr(args, name) for name in names if hasattr(args, name)}

    def re_add_profile(parser):
        parser.add_argument("--profile", action="store_true")
        return parser

    try:
        arguments.parse_args(extra_args_provider=re_add_profile)
        flags["re_adding_profile"] = "accepted"
    except argparse.ArgumentError as exc:
        flags["re_adding_profile"] = str(exc)
    return flags


def shim():
    import torch

    from megatron.training import _harness

    modes_before = torch._C._len_torch_function_stack()
    _harness.cpu_shim.install()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    return {
        "zeros_on_cuda": str(torch.zeros(2, device="cuda").device),
        "zeros_on_npu": str(torch.zeros(2, device="npu:0").device),
        "zeros_on_current_device": str(torch.zeros(2, device=torch.cuda.current_device()).device),
        "dot_cuda": str(torch.ones(2).cuda().device),
        "to_cuda_1": str(torch.ones(2).to("cuda:1").device),
        "float_type": torch.ones(2).type(),
        "current_device": torch.cuda.current_device(),
        "is_available": torch.cuda.is_available(),
        "event_elapsed_ms_non_negative": start.elapsed_time(end) >= 0,
        "reinstall_adds_no_mode": torch._C._len_torch_function_stack() == modes_before,
        "accelerator_device_index": torch.accelerator.current_device_index(),
        "accelerator_stream_capturing": torch.accelerator.current_stream().is_capturing(),
        "cuda_stream_capturing": torch.cuda.is_current_stream_capturing(),
        "pin_memory_stays_on_cpu": str(torch.ones(2).pin_memory().device),
    }


if __name__ == "__main__":
    versions = sys.argv[1:]
    facts = {"signatures": signatures(versions), "profile_flags": {}}
    for version in versions:
        _import_version(version)
        facts["profile_flags"][version] = profile_flags()
    _import_version(versions[-1])
    facts.update(lookups=lookups(), shim=shim())
    print(json.dumps(facts))
