"""CPU integration-test harness: a Megatron-LM ``megatron.training`` stand-in over real
megatron-core, a CUDA-to-CPU shim and launch helpers. See README.md."""
