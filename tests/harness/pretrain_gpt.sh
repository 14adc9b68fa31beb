#!/bin/bash
# Pretrain a tiny GPT on the CPU stand-in, laid out like Megatron-LM's examples/gpt3 scripts.
# Extra arguments are appended to the training command, e.g.
#   bash pretrain_gpt.sh --profile --profile-step-start 2 --profile-step-end 3
set -euo pipefail

export CUDA_DEVICE_MAX_CONNECTIONS=1
export TORCHDYNAMO_DISABLE=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# An adapted copy of this script elsewhere still finds the harness through MEGATRON_PATH.
MEGATRON_PATH=${MEGATRON_PATH:-$SCRIPT_DIR}
export PYTHONPATH="$MEGATRON_PATH/megatron_standin${PYTHONPATH:+:$PYTHONPATH}"

NPROC=${NPROC:-2}
TP=${TP:-1}
PP=${PP:-1}
TRAIN_ITERS=${TRAIN_ITERS:-6}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

# As Megatron-LM's examples launch (no --standalone: torchrun hands the workers no run id).
DISTRIBUTED_ARGS=(
    --nproc-per-node "$NPROC"
    --nnodes "$NNODES"
    --node-rank "$NODE_RANK"
    --master-addr "$MASTER_ADDR"
    --master-port "$MASTER_PORT"
)

GPT_ARGS=(
    --num-layers 2
    --hidden-size 64
    --num-attention-heads 4
    --seq-length 32
    --max-position-embeddings 32
    --micro-batch-size 1
    --global-batch-size 4
    --train-iters "$TRAIN_ITERS"
    --lr 1.0e-3
    --lr-decay-style constant
    --hidden-dropout 0
    --attention-dropout 0
    --tensor-model-parallel-size "$TP"
    --pipeline-model-parallel-size "$PP"
    --transformer-impl local
    --use-cpu-initialization
    --no-masked-softmax-fusion
    --no-bias-gelu-fusion
    --no-bias-dropout-fusion
    --no-gradient-accumulation-fusion
    --no-persist-layer-norm
    --distributed-backend gloo
)

DATA_ARGS=(
    --mock-data
    --vocab-size 128
    --tokenizer-type NullTokenizer
)

OUTPUT_ARGS=(
    --log-interval 1
    --eval-iters 0
)

torchrun "${DISTRIBUTED_ARGS[@]}" "$MEGATRON_PATH/pretrain_gpt.py" \
    "${GPT_ARGS[@]}" \
    "${DATA_ARGS[@]}" \
    "${OUTPUT_ARGS[@]}" \
    "$@"
