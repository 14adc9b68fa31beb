#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=2 --time=0:20:00

# Fixture in the shape of Megatron-LM's SLURM examples: the options and the training command are
# assembled in strings, and srun runs the command string with `sh -c`.

MEGATRON=${MEGATRON:-.}
STAMP=fixture
mkdir -p logs

options=" \
    --tensor-model-parallel-size 1 \
    --num-layers 2 \
    --hidden-size 64 \
    --micro-batch-size 1 \
    --train-iters 10 \
    --save-interval 100"

run_cmd="python -u ${MEGATRON}/pretrain_gpt.py ${options} --log-dir logs/${STAMP}"

srun -l \
     --ntasks-per-node=1 \
     --output=logs/%x_%j_${STAMP}.log sh -c "${run_cmd}"

set +x
