#!/bin/bash
# Fixture in the shape of MindSpeed-LLM's newer torchrun scripts: a MOE_ARGS block, posttrain
# entry, a trailing continuation before a blank line, then stderr merged into the tee'd log.

export CUDA_DEVICE_MAX_CONNECTIONS=1

NPUS_PER_NODE=8
NNODES=2
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=6020

DISTRIBUTED_ARGS="--nproc_per_node $NPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"

MOE_ARGS="
    --num-experts 8 \
    --moe-router-topk 2 \
    --expert-model-parallel-size 4 \
    --moe-token-dispatcher-type alltoall \
"

GPT_ARGS="
    --use-mcore-models \
    --num-layers 4 \
    --hidden-size 1024 \
    --num-attention-heads 8 \
    --train-iters 50 \
    --finetune \
    --stage sft \

"

torchrun $DISTRIBUTED_ARGS posttrain_gpt.py \
    $GPT_ARGS \
    $MOE_ARGS \
    --distributed-backend nccl \
    2>&1 | tee logs/tune_fixture_moe.log
