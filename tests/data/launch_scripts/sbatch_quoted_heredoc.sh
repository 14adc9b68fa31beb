#!/bin/bash
# Fixture: a batch script in a heredoc taken as written (quoted delimiter): nothing of this script
# reaches it, so its variables are its own and the flags must be defined inside it.

mkdir -p logs
sbatch --job-name=fixture <<'EOF'
#!/bin/bash
#SBATCH --nodes=1
GPT_ARGS=(
    --num-layers 2
    --train-iters 10
)
if [ -n "${SLURM_JOB_ID:-}" ]; then echo "job ${SLURM_JOB_ID}"; fi
srun --ntasks-per-node=1 torchrun --nproc_per_node 1 --standalone pretrain_gpt.py \
    "${GPT_ARGS[@]}" > logs/train.log 2>&1
EOF
