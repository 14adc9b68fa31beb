"""Facts about the process that the manifest records: versions and the rank's identity.

Versions are read from package metadata, so recording megatron-core's version never imports
Megatron (the core must not), and torch_npu's only when it is already imported.
"""

import importlib.metadata
import os
import platform
import sys


def _dist_version(*names):
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def versions():
    import torch

    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_npu": None,
        "cann": None,
        "megatron_core": _dist_version("megatron-core", "megatron_core"),
        "mindspeed": _dist_version("mindspeed"),
        "mindspeed_llm": _dist_version("mindspeed-llm", "mindspeed_llm"),
    }
    torch_npu = sys.modules.get("torch_npu")
    if torch_npu is not None:
        found["torch_npu"] = getattr(torch_npu, "__version__", None)
        version_module = getattr(torch_npu, "version", None)
        found["cann"] = getattr(version_module, "cann", None) or os.environ.get("ASCEND_TOOLKIT_VERSION")
    return found


def rank_from_env():
    """(rank, world_size, local_rank) from torch.distributed when initialised, else torchrun's env."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    except Exception:  # noqa: BLE001 - fall back to the environment
        pass
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
            int(os.environ.get("LOCAL_RANK", 0)))
