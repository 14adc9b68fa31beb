#!/bin/bash
# Fixture in the shape of MindSpeed-LLM's examples/mcore/*/generate_*.sh: a chat/generation run
# of inference.py under torchrun, its arguments in strings, the output teed into a log.

export CUDA_DEVICE_MAX_CONNECTIONS=1
NPUS_PER_NODE=1
MASTER_PORT=6111
CHECKPOINT="your model ckpt path"
TOKENIZER_PATH="your tokenizer path"

DISTRIBUTED_ARGS="
    --nproc_per_node $NPUS_PER_NODE \
    --nnodes 1 \
    --node_rank 0 \
    --master_addr localhost \
    --master_port $MASTER_PORT
"

GPT_ARGS="
    --use-mcore-models \
    --tensor-model-parallel-size 1 \
    --num-layers 2 \
    --max-new-tokens 16 \
    --tokenizer-name-or-path ${TOKENIZER_PATH} \
"

mkdir -p logs
torchrun $DISTRIBUTED_ARGS inference.py \
    $GPT_ARGS \
    --load "${CHECKPOINT}" \
    --prompt-type llama2 \
    | tee logs/generate_fixture.log
