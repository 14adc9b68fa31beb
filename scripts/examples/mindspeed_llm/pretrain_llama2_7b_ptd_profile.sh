#!/bin/bash
# Example: a MindSpeed-LLM Llama-2 7B pre-training launch on Ascend NPUs, in the shape of
# examples/mcore/<model>/pretrain_<model>_ptd.sh (string argument blocks continued with
# backslashes, python -m torch.distributed.launch, the log piped through tee).
#
# This file is what you already have. Profiling never edits it:
#
#   mindspeed-prof adapt-script scripts/examples/mindspeed_llm/pretrain_llama2_7b_ptd.sh \
#       --profile-step-start 10 --profile-step-end 12 --profile-ranks 0 \
#       --profile-level level1 --profile-with-cpu --profile-save-path ./profile_llama2_7b
#
# writes pretrain_llama2_7b_ptd_profile.sh next to it (committed here, exactly as written by
# the tool). Only the launch at the bottom changes; see the notes there.

export HCCL_CONNECT_TIMEOUT=1200
export CUDA_DEVICE_MAX_CONNECTIONS=1
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True

NPUS_PER_NODE=8
MASTER_ADDR=localhost
MASTER_PORT=6000
NNODES=1
NODE_RANK=0

CKPT_SAVE_DIR="./ckpt/llama2_7b"
CKPT_LOAD_DIR="./model_weights/llama2_7b_mcore"
DATA_PATH="./dataset/llama2_text_document"
TOKENIZER_MODEL="./model_from_hf/llama2_7b/tokenizer.model"
TP=1
PP=2

# torchrun-style options of torch.distributed.launch, in a string. adapt-script takes this
# variable for launcher options (its value holds only options), so the launcher module goes
# after it.
DISTRIBUTED_ARGS="
    --nproc_per_node $NPUS_PER_NODE \
    --nnodes $NNODES \
    --node_rank $NODE_RANK \
    --master_addr $MASTER_ADDR \
    --master_port $MASTER_PORT
"

GPT_ARGS="
    --use-mcore-models \
    --tensor-model-parallel-size ${TP} \
    --pipeline-model-parallel-size ${PP} \
    --sequence-parallel \
    --num-layers 32 \
    --hidden-size 4096 \
    --ffn-hidden-size 11008 \
    --num-attention-heads 32 \
    --tokenizer-type Llama2Tokenizer \
    --tokenizer-model ${TOKENIZER_MODEL} \
    --seq-length 4096 \
    --max-position-embeddings 4096 \
    --micro-batch-size 1 \
    --global-batch-size 256 \
    --make-vocab-size-divisible-by 1 \
    --lr 1.25e-6 \
    --train-iters 2000 \
    --lr-decay-style cosine \
    --untie-embeddings-and-output-weights \
    --disable-bias-linear \
    --position-embedding-type rope \
    --normalization RMSNorm \
    --swiglu \
    --use-flash-attn \
    --load ${CKPT_LOAD_DIR} \
    --bf16
"

DATA_ARGS="
    --data-path $DATA_PATH \
    --split 949,50,1
"

OUTPUT_ARGS="
    --log-interval 1 \
    --save-interval 1000 \
    --eval-interval 1000 \
    --eval-iters 0 \
"

# The training command. In the adapted copy:
#  - PROFILE_ARGS=(...) with the flags you gave (--profile first) is defined on the lines above
#    it, under a `# mindspeed-prof adapt-script: ...` comment; this is the same PROFILE_ARGS
#    idea MindSpeed-LLM's own test scripts use, as an array so a path with spaces survives;
#  - `-m mindspeed_prof.launch` goes right before pretrain_gpt.py: torch.distributed.launch
#    accepts -m like torchrun does, and the --local-rank=N it adds reaches pretrain_gpt.py;
#  - "${PROFILE_ARGS[@]}" is appended to the last argument line, before `| tee`, so the log
#    still goes where it went.
# mindspeed-prof adapt-script: the --profile* flags of the training command below.
PROFILE_ARGS=(--profile --profile-step-start 10 --profile-step-end 12 --profile-ranks 0 --profile-level level1 --profile-with-cpu --profile-save-path ./profile_llama2_7b)
python -m torch.distributed.launch $DISTRIBUTED_ARGS -m mindspeed_prof.launch pretrain_gpt.py \
    $GPT_ARGS \
    $DATA_ARGS \
    $OUTPUT_ARGS \
    --distributed-backend nccl \
    --save $CKPT_SAVE_DIR "${PROFILE_ARGS[@]}" \
    | tee logs/train_llama2_7b.log
