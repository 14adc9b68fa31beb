"""Run a real Megatron-LM checkout's ``pretrain_gpt.py`` on the CPU (the opt-in test tier).

``MEGATRON_LM_PATH`` points at the checkout. The overlay made by ``overlay.build`` puts its
``megatron/training`` (and friends) and root modules on the path without its ``megatron/core``,
so the installed megatron-core wheel is used. Before running the script as ``__main__`` this
applies the CPU fixes of shared/reference/cpu_megatron_harness.md §3: the CUDA shim, a pretended
CUDA device (``initialize_megatron`` insists on one), no-op builds of C++ helpers and fused
kernels, and a stub for the triton-only batch-invariant module.
"""

import os
import sys
import types

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def apply_cpu_fixes():
    import torch

    sys.path.insert(0, HARNESS)
    import cpu_shim

    cpu_shim.install()
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    stub = types.ModuleType("megatron.core.transformer.custom_layers.batch_invariant_kernels")
    stub.enable_batch_invariant_mode = stub.disable_batch_invariant_mode = lambda *a, **k: None
    stub.set_batch_invariant_mode = lambda *a, **k: None
    stub.is_batch_invariant_mode_enabled = lambda: False
    sys.modules[stub.__name__] = stub
    import megatron.core.datasets.utils as dataset_utils
    dataset_utils.compile_helpers = lambda: None
    try:
        import megatron.legacy.fused_kernels as fused_kernels
        fused_kernels.load = lambda *a, **k: None
    except ImportError:
        pass
    sys.path.remove(HARNESS)


def install_faults():
    """The harness's fault knobs (``faults.py``: HARNESS_SLEEP_AT_ITER, HARNESS_BUSY_FROM_ITER,
    ...) in the real loop: run at the first forward step of each iteration (megatron-core's
    ``schedules.forward_step``, looked up at call time), inside ``train_step``; with
    HARNESS_SLOW_FORWARD_FROM_ITER every micro-batch's ``forward_step_func`` (the script's own
    ``forward_step``) computes first. Megatron-LM sets ``args.curr_iteration`` to the 0-based
    counter: the logged iteration is one more."""
    if not any(key.startswith("HARNESS_") for key in os.environ):
        return
    sys.path.insert(0, HARNESS)
    import faults

    sys.path.remove(HARNESS)
    plan = faults.FaultPlan.from_env(os.environ)
    from megatron.core.pipeline_parallel import schedules

    original, done = schedules.forward_step, set()

    def forward_step(*args, **kwargs):
        from megatron.training import get_args

        iteration = get_args().curr_iteration + 1
        if iteration not in done:
            done.add(iteration)
            plan.at_step(iteration)
        if args:  # forward_step_func is the first parameter
            args = (plan.slow_forward(args[0], iteration), *args[1:])
        else:
            kwargs["forward_step_func"] = plan.slow_forward(kwargs["forward_step_func"],
                                                            iteration)
        return original(*args, **kwargs)

    schedules.forward_step = forward_step


if __name__ == "__main__":
    import runpy

    apply_cpu_fixes()
    install_faults()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrain_gpt.py")
    sys.argv[0] = script
    runpy.run_path(script, run_name="__main__")
