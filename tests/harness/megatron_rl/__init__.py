"""CPU harness: Megatron-LM's own RL loop (``train_rl.py --perform-rl-step``), opt-in tier."""
