#!/bin/bash
# Example: a Megatron-LM GPT pre-training launch, in the shape of examples/gpt3/*.sh
# (argument groups in bash arrays, torchrun's options in DISTRIBUTED_ARGS).
#
# This file is what you already have. Profiling never edits it:
#
#   mindspeed-prof adapt-script scripts/examples/megatron_lm/pretrain_gpt.sh \
#       --profile-step-start 5 --profile-step-end 7 --profile-ranks 0
#
# writes pretrain_gpt_profile.sh next to it (committed here, byte for byte what the tool wrote)
# and prints the diff. Only the torchrun command at the bottom changes; see the notes there.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NUM_NODES=1
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}

CHECKPOINT_PATH=${1:-./checkpoints/gpt_1b}
DATA_PATH=${2:-./data/my_corpus_text_document}
VOCAB_FILE=${3:-./data/gpt2-vocab.json}
MERGE_FILE=${4:-./data/gpt2-merges.txt}

# torchrun's own options. adapt-script recognises this array as launcher options from its
# content (only options, no .py) and from its name, so `-m mindspeed_prof.launch` goes after it.
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

GPT_MODEL_ARGS=(
    --num-layers 24
    --hidden-size 2048
    --num-attention-heads 16
    --seq-length 2048
    --max-position-embeddings 2048
)

TRAINING_ARGS=(
    --micro-batch-size 2
    --global-batch-size 256
    --train-iters 20000
    --lr 3.0e-4
    --min-lr 3.0e-5
    --lr-decay-style cosine
    --lr-warmup-fraction .01
    --clip-grad 1.0
    --bf16
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
    --pipeline-model-parallel-size 2
)

DATA_ARGS=(
    --data-path $DATA_PATH
    --vocab-file $VOCAB_FILE
    --merge-file $MERGE_FILE
    --split 969,30,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 10
    --save-interval 2000
    --eval-interval 1000
    --eval-iters 10
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
)

# The training command. In the adapted copy:
#  - a `# mindspeed-prof adapt-script: ...` comment and a PROFILE_ARGS=(...) array holding the
#    flags you gave (--profile is implied) appear on the lines just above it;
#  - `-m mindspeed_prof.launch` goes right before pretrain_gpt.py, so the script runs under the
#    launcher, which arms the profiling patches in every rank torchrun starts;
#  - "${PROFILE_ARGS[@]}" is appended after the last argument group, so the flags reach Megatron's
#    argument parser after your own arguments.
# To change the flags later, edit the PROFILE_ARGS line, or re-run adapt-script with --force.
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]}
