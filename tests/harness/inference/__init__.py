"""A CPU Megatron text-generation server for the inference tests (see README.md here)."""
