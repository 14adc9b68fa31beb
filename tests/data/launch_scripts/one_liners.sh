#!/bin/bash
# Fixture: the training command shares its line with other commands.
ROOT=${ROOT:-.}
ARGS="--num-layers 2 --hidden-size 64 --train-iters 20"
cd "$ROOT" && [ -n "$ARGS" ] && torchrun --nproc_per_node 2 --master_port=6040 pretrain_gpt.py $ARGS 2>&1 | tee one_liner.log; echo done
