"""Run a Megatron-LM checkout's own ``train_rl.py`` on the CPU (the opt-in RL tier).

``MEGATRON_LM_PATH`` points at a ``core_v0.19.0`` checkout. Put the folder made by
``harness.real_megatron.overlay.build`` first on ``PYTHONPATH`` (the checkout's
``megatron/training``, ``megatron/rl`` ... and root modules over the installed megatron-core
wheel; the checkout has no built C++ helpers), then run this file under torchrun, directly or as
the script of ``-m mindspeed_prof.launch``, with ``train_rl.py``'s arguments.

Before running ``train_rl.py`` as ``__main__`` it applies, in this process only:

* the real tier's CPU fixes (``harness.real_megatron.run_pretrain_gpt.apply_cpu_fixes``) and the
  dynamic engine's (``harness.dynamic.cuda_extras``: the flash-attn stand-in, cudart, ...);
* ``torch._dynamo`` off (the bf16 warm-up of Megatron's compiled fusions looks for libcuda);
* ``packed_attention``: the local attention taking the packed-sequence arguments the RL forward
  always passes;
* ``null_tokenizer``: ``NullTokenizer`` answering ``bos_id`` (none) and ``eos_id``;
* ``agent.register``: the tiny offline environment named in ``env_config.yaml``;
* ``processes.install``: the front ends' and the coordinator's pids, for the tests.

Nothing runs at import: the inference coordinator (spawned) re-imports this file.
"""

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
ENV_CONFIG = os.path.join(HERE, "env_config.yaml")


def apply_fixes():
    sys.path.insert(0, TESTS)
    from harness.real_megatron import run_pretrain_gpt

    run_pretrain_gpt.apply_cpu_fixes()
    from harness.dynamic import cuda_extras
    from harness.megatron_rl import agent, null_tokenizer, packed_attention, processes

    cuda_extras.install()
    import torch._dynamo

    # Megatron warms its torch.compile'd fusions up in bf16 (set_jit_fusion_options): under the
    # pretended CUDA device inductor looks for libcuda.so and fails; run them eagerly.
    torch._dynamo.config.disable = True
    packed_attention.install()
    null_tokenizer.install()
    agent.register()
    processes.install()


def main():
    apply_fixes()
    script = os.path.join(os.environ["MEGATRON_LM_PATH"], "train_rl.py")
    sys.argv[0] = script
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
