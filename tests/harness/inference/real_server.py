"""Run a real Megatron-LM checkout's ``tools/run_text_generation_server.py`` on the CPU (the
opt-in tier, ``MEGATRON_LM_PATH``).

Put the folder made by ``harness.real_megatron.overlay.build`` on ``PYTHONPATH`` (the checkout's
``megatron/training`` and root modules over the installed megatron-core wheel), then run this
file, under torchrun and our launcher, with the tool's arguments. It applies the CPU fixes of
the real pretraining tier and of the CI server (``server_shim``), writes the same
``server_rank{R}.json`` as the CI server, and runs the checkout's tool as ``__main__``.
"""

import importlib.util
import os
import runpy
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def _real_tier_fixes():
    path = os.path.join(os.path.dirname(HERE), "real_megatron", "run_pretrain_gpt.py")
    spec = importlib.util.spec_from_file_location("_real_tier_cpu_fixes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _no_triton_kernels():
    """The tool imports the Mamba builder, whose mixer imports triton kernels (no triton on a
    CPU build of torch); the GPT server never calls them."""
    name = "megatron.core.inference.contexts.attention_context.triton.tensor_ops"
    stub = types.ModuleType(name)

    def unavailable(*args, **kwargs):
        raise NotImplementedError("triton kernels are not available on the CPU")

    stub.tensor_get_slice_after = stub.tensor_masked_update = stub.tensor_merge = unavailable
    sys.modules[name] = stub


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import server_shim
    from server_report import ServerReport

    _real_tier_fixes().apply_cpu_fixes()
    server_shim.install()
    _no_triton_kernels()
    from megatron.core.inference.text_generation_server import (
        text_generation_server as server_module,
    )

    rank = int(os.environ.get("RANK", "0"))
    report = ServerReport(rank)
    if rank == 0:
        report.spy_on(server_module)  # rank 0 serves on Flask's threads
    tool = os.path.join(os.environ["MEGATRON_LM_PATH"], "tools", "run_text_generation_server.py")
    sys.argv[0] = tool
    runpy.run_path(tool, run_name="__main__")
