#!/bin/bash
# Fixture: a SLURM job step under a wall-clock guard. timeout and setsid wrap srun, which starts
# one Python per task; a post-processing step runs afterwards under srun too.

GPT_ARGS=(
    --num-layers 2
    --hidden-size 64
    --train-iters 10
)

export WORLD_SIZE=${SLURM_NTASKS:-1}
timeout --signal=TERM 3600 setsid srun --ntasks-per-node=1 --kill-on-bad-exit=1 \
    python -u pretrain_gpt.py "${GPT_ARGS[@]}" --distributed-backend gloo
status=$?
srun --ntasks=1 python tools/checkpoint/convert_ckpt.py --load-dir ckpt --save-dir hf
exit $status
