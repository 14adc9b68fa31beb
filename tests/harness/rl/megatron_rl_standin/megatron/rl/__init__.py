"""CPU stand-in for Megatron-LM's ``megatron/rl`` (core_v0.15+), which the megatron-core wheel
does not ship. Put ``tests/harness/rl/megatron_rl_standin`` on PYTHONPATH after the training
stand-in: the ``megatron`` namespace package merges all three folders."""
