"""verl 0.9.1's own ``main_ppo`` on the CPU: 3 GRPO steps of the tiny Llama, actor + rollout + ref
colocated in one FSDP2 worker.

    python -m harness.verl.job WORKDIR [ENTRY] [extra hydra overrides...]

builds the assets in WORKDIR and runs ENTRY (default ``verl.trainer.main_ppo``) as ``python -m``
with ``overrides(...)``; ``environment()`` is what every process of the job needs (verl reads
it in the driver, Ray passes it to every actor).
"""

import os
import subprocess
import sys
from typing import Dict, List

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 3
PROMPTS_PER_STEP, SAMPLES = 2, 2


def overrides(assets: Dict[str, str], workdir: str, steps: int = STEPS) -> List[str]:
    """What makes verl's defaults fit a CPU and this model (see cpu_platform.py for the rest)."""
    batch = PROMPTS_PER_STEP * SAMPLES
    arr = "actor_rollout_ref"
    return [
        "trainer.use_v1=false",  # v1 needs TransferQueue; RayPPOTrainer.fit is the v0 loop
        "algorithm.adv_estimator=grpo",
        f"data.train_files={assets['train']}", f"data.val_files={assets['val']}",
        f"data.train_batch_size={PROMPTS_PER_STEP}", "data.max_prompt_length=16",
        "data.max_response_length=8", "data.filter_overlong_prompts=false",
        "data.dataloader_num_workers=0",
        f"{arr}.model.path={assets['model']}", f"{arr}.model.use_remove_padding=false",
        f"{arr}.model.enable_gradient_checkpointing=false",
        f"+{arr}.model.override_config.attn_implementation=sdpa",
        f"{arr}.actor.strategy=fsdp2",  # FSDP1 refuses CPU modules
        f"{arr}.actor.use_torch_compile=false", f"{arr}.actor.fsdp_config.use_torch_compile=false",
        f"{arr}.actor.fsdp_config.dtype=float32", f"{arr}.ref.fsdp_config.dtype=float32",
        f"{arr}.ref.fsdp_config.use_torch_compile=false",
        f"{arr}.actor.optim.lr=1e-3",
        f"{arr}.actor.ppo_mini_batch_size={PROMPTS_PER_STEP}",
        f"{arr}.actor.ppo_micro_batch_size_per_gpu={batch}",
        f"{arr}.actor.use_kl_loss=true",  # the ref policy: KL loss against it
        f"{arr}.rollout.name=cpu_hf", f"{arr}.rollout.n={SAMPLES}",
        f"{arr}.rollout.tensor_model_parallel_size=1", f"{arr}.rollout.max_num_seqs={batch}",
        f"{arr}.rollout.log_prob_micro_batch_size_per_gpu={batch}",
        f"{arr}.rollout.calculate_log_probs=false", f"{arr}.rollout.agent.num_workers=1",
        f"{arr}.ref.log_prob_micro_batch_size_per_gpu={batch}",
        "reward.num_workers=1", f"reward.custom_reward_function.path={assets['reward']}",
        "reward.custom_reward_function.name=compute_score",
        "trainer.n_gpus_per_node=1", "trainer.nnodes=1", f"trainer.total_training_steps={steps}",
        "trainer.total_epochs=1", "trainer.logger=[console]", "trainer.val_before_train=false",
        "trainer.test_freq=-1", "trainer.save_freq=-1", "trainer.critic_warmup=0",
        f"trainer.default_local_dir={os.path.join(workdir, 'checkpoints')}",
        # Ray's logical resources: verl's placement groups need GPU bundles and more than 2 CPUs
        "ray_kwargs.ray_init.num_cpus=8", "+ray_kwargs.ray_init.num_gpus=1",
        "+ray_kwargs.ray_init.include_dashboard=false",
    ]


def environment(workdir: str, pythonpath=()) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({
        "VERL_USE_EXTERNAL_MODULES": "harness.verl.cpu_platform", "VERL_PLATFORM": "cpu",
        "VERL_ENGINE_DEVICE": "cuda", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled", "RAY_DEDUP_LOGS": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": os.pathsep.join([*pythonpath, TESTS, env.get("PYTHONPATH", "")]),
    })
    return env


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    workdir = os.path.abspath(argv.pop(0))
    entry = argv.pop(0) if argv and not argv[0].count("=") else "verl.trainer.main_ppo"
    from harness.verl import assets as tiny

    os.makedirs(workdir, exist_ok=True)
    paths = tiny.build(workdir)
    command = [sys.executable, "-m", entry, *overrides(paths, workdir), *argv]
    return subprocess.call(command, cwd=workdir, env=environment(workdir))


if __name__ == "__main__":
    sys.exit(main())
