#!/bin/bash

# Fixture in the shape of Megatron-LM's examples/gpt3 launchers: bash arrays for every argument
# group, torchrun's options in an array, one command continued over several lines.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=4
MASTER_ADDR=localhost
MASTER_PORT=6123
NUM_NODES=1

CHECKPOINT_PATH=${1:-/tmp/ckpt}
DATA_PATH=${2:-/tmp/data/corpus_text_document}

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

GPT_MODEL_ARGS=(
    --num-layers 8
    --hidden-size 512
    --num-attention-heads 8
    --seq-length 1024
    --max-position-embeddings 1024
    --attention-backend auto # flash, fused, unfused or local
)

TRAINING_ARGS=(
    --micro-batch-size 2
    --global-batch-size 32
    --train-iters 200
    --lr 1.0e-4
    --bf16
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size 2
	--pipeline-model-parallel-size 2
)

DATA_ARGS=(
    --data-path $DATA_PATH
    --split 98,1,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 10
    --save $CHECKPOINT_PATH
    --eval-iters 5
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]}
