"""The dynamic inference engine of megatron-core >= 0.19 on the CPU (see README.md)."""
