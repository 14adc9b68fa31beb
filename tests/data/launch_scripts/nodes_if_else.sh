#!/usr/bin/env bash
# Fixture: strict mode, and a different launch for single- and multi-node runs, each in its own
# branch (only one of them runs).
set -euo pipefail

NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-2}
TRAIN_ARGS=(--num-layers 2 --hidden-size 64 --train-iters 20)

if [ "$NNODES" -gt 1 ]; then
    DIST_ARGS=(--nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE"
               --rdzv-backend c10d --rdzv-endpoint "${MASTER_ADDR:-localhost}:29400")
    torchrun "${DIST_ARGS[@]}" pretrain_gpt.py "${TRAIN_ARGS[@]}" --distributed-timeout-minutes 30
else
    torchrun --standalone --nproc_per_node="$GPUS_PER_NODE" pretrain_gpt.py "${TRAIN_ARGS[@]}"
fi
