#!/bin/bash
# Fixture: a command string extended where it is run: eval parses the string with arguments
# appended after it, and an echo only shows the command.

DISTRIBUTED_ARGS="--nproc_per_node 1 --nnodes 1 --standalone"
TRAIN_CMD="torchrun ${DISTRIBUTED_ARGS} pretrain_gpt.py --num-layers 2 --train-iters 10"
echo "running: ${TRAIN_CMD}"
eval "${TRAIN_CMD} --seed 7 --log-interval 1"
