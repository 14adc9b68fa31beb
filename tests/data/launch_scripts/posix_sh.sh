#!/bin/sh
# Fixture: a POSIX sh script (no bash arrays), env assignment in front of the launch.
ARGS="--num-layers 2 --hidden-size 64 --train-iters 20"
OMP_NUM_THREADS=2 torchrun --nproc_per_node 2 pretrain_gpt.py $ARGS > train.log 2>&1
