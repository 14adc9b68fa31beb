"""A GRPO-shaped RL job on the CPU: a controller that computes nothing drives role processes
(actor, ref, rollout) that compute with tiny megatron-core GPT models (see grpo.py)."""
