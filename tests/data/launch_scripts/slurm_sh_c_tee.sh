#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1
# Fixture: the command string is pasted into a bigger one that srun's shell runs, so the log goes
# through tee inside the job step; the string itself holds $(...) substitutions.

MEGATRON=${MEGATRON:-.}
mkdir -p logs

options=" \
    --num-layers 2 \
    --hidden-size 64 \
    --seed $(echo 1234) \
    --train-iters 10"

run_cmd="python -u ${MEGATRON}/pretrain_gpt.py ${options} --log-dir logs/$(basename "$PWD")"

srun -l --ntasks-per-node=1 sh -c "${run_cmd} 2>&1 | tee logs/train.log"
