#!/bin/bash
# Fixture: the launch lives in a function, under set -u, with quoted array expansions and the
# script's own arguments forwarded with "$@". The options array's name says nothing: its value
# (only options) tells it holds torchrun's options.
set -u

LAUNCH_OPTS=(--nproc_per_node 2 --max-restarts 0 --log-dir ./torchrun_logs -t 3)
MODEL_ARGS=(--num-layers 2 --hidden-size 64 --train-iters 20)

run_training() {
    local entry=pretrain_gpt.py
    torchrun "${LAUNCH_OPTS[@]}" "$entry" "${MODEL_ARGS[@]}" "$@"
}

mkdir -p checkpoints && \
    run_training --save ./checkpoints
